"""What every format shows the same way: a cell's text (ours, the paper's, Δ, marks), a table's header, row
header and column names, its own notes (what a cell is, its caption, its reproduction count), the legend of the
marks (each line once per report) and the summary a report opens with (per table, which methods differ
significantly from the baseline and which way; per paper, how many published numbers we reproduce).

Every format shows ours (mean ± std over seeds, n) beside the paper's value and the difference; partial cells (fewer
seeds than asked), diverged runs, synthetic data and non-paper scales are marked. A figure's number format, label
and caption line come from the figure catalogue (fedbench.vocab.figures), a metric's human name from the metric
catalogue (fedbench.vocab.metrics): storage keys (test_acc, last_k_mean) appear only in JSON and CSV.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedbench.recipes.views import DERIVED_MARK
from fedbench.report.cells import MARKS, Cell, Table, Verdict, reproduction_counts
from fedbench.report.render.claim_lines import claim_legend, claim_notes
from fedbench.report.stats import ALPHA, CENSORED_RULE, reproduction_line, unreachable_significance
from fedbench.vocab.figures import FIGURES, figure_label, margin_text
from fedbench.vocab.metrics import METRICS, display_unit, metric_label

# After the name of a row or column of values added on the command line (--add): not the paper's, no published value.
ADDED_MARK = "⁺"
# A to-target cell of a row or column the view gives no target.
NO_TARGET = "no target"


def _num(value: float | None, figure: str) -> str:
    if value is None:
        return "–"
    number = FIGURES[figure].number
    if number == "gflops":
        return f"{value:,.3f}" if value < 1000 else f"{value:,.0f}"
    if number == "rounds":
        return f"{value:.1f}" if value != int(value) else f"{int(value)}"
    if number == "bytes":
        return f"{value / 2**20:.1f} MiB"
    return f"{value:.2f}"


def _not_reached(cell: Cell, figure: str) -> str:
    """The cell's text when no seed reached the target within its R rounds (">R" for a count of rounds)."""
    if not FIGURES[figure].needs_target:
        return "–"
    return (
        f">{cell.rounds_limit}" if FIGURES[figure].number == "rounds" else f"not reached in {cell.rounds_limit} rounds"
    )


def ours_text(cell: Cell, figure: str) -> str:
    if cell.static:
        return f"{cell.mean:.4g}" if cell.mean is not None else "–"
    if cell.published_only:
        return "quoted"
    if cell.n == 0:
        return "—"
    if cell.no_target:  # nothing to reach: never "not reached"
        text = NO_TARGET
    elif cell.mean is None:  # no seed has a value (a to-target figure: none reached the target)
        text = _not_reached(cell, figure)
    else:
        text = _num(cell.mean, figure)
        if cell.std is not None:
            text += f" ± {_num(cell.std, figure)}"
        if cell.not_reached and FIGURES[figure].needs_target:
            text += f" ({cell.not_reached} >{cell.rounds_limit})"
        elif cell.not_reached:  # e.g. no value at the round: the run diverged before it (†)
            text += f" ({cell.not_reached} of {cell.n} missing)"
    text += f" (n={cell.n})"
    if cell.partial:
        text += "*"
    if cell.diverged:
        text += "†"
    if cell.ratio is not None:
        text += f" [{cell.ratio:.2f}×]"
    return text


def paper_text(cell: Cell, figure: str) -> str:
    if cell.published is None:
        return ""
    text = cell.published if isinstance(cell.published, str) else _num(float(cell.published), figure)
    if cell.published_derived:
        text += DERIVED_MARK
    if cell.published_std is not None:
        text += f" ± {_num(cell.published_std, figure)}" + (DERIVED_MARK if cell.published_std_derived else "")
    if cell.published_ratio is not None:
        text += f" [{cell.published_ratio:.2f}×]"
    text += printed_ratio_text(cell)
    return text


# A printed ratio within this of the one recomputed from the paper's own values is its rounding, not a misprint.
RATIO_ROUNDING = 0.01


def printed_ratio_text(cell: Cell) -> str:
    """The ratio the paper printed, where it differs from the one recomputed from its values (FedTrip Table IV)."""
    printed, recomputed = cell.printed_ratio, cell.published_ratio
    if printed is None or (recomputed is not None and abs(printed - recomputed) < RATIO_ROUNDING):
        return ""
    return f" (printed {printed:g}×)"


def baseline_mark(cell: Cell) -> str:
    """ " ▲" / " ▼" / " ·": significantly better / worse than the baseline / neither (fedbench.report.stats)."""
    mark = cell.comparison.mark if cell.comparison else ""
    return f" {mark}" if mark else ""


def verdict_mark(cell: Cell) -> str:
    """ " ✓" reproduced, " ↑" / " ↓" ours higher / lower than the paper, " ?" inconclusive (with the seeds that
    would likely decide it); nothing when not comparable."""
    verdict = cell.verdict
    if verdict is None or not verdict.mark:
        return ""
    if verdict.status == "inconclusive":
        return f" ? (≈{verdict.seeds_needed} seeds)" if verdict.seeds_needed else " ? (no seed count decides it)"
    return f" {verdict.mark}"


def verdict_detail(verdict: Verdict) -> str:
    """The verdict's intervals against its margin: "ours − paper +0.4, 90% [−0.3, 1.1], 95% [−0.5, 1.3] vs ±1
    (t, ours minus the paper's value): inconclusive"."""

    def number(value: float | None) -> str:
        return "–" if value is None else f"{value:+.3g}"

    return (
        f"ours − paper {number(verdict.difference)}, 90% [{number(verdict.ci90_low)}, {number(verdict.ci90_high)}], "
        f"95% [{number(verdict.ci_low)}, {number(verdict.ci_high)}] vs ±{verdict.margin:.3g} ({verdict.interval}): "
        f"{verdict.status}"
    )


def diff_text(cell: Cell, figure: str) -> str:
    d = cell.difference
    return "" if d is None else f"{d:+.2f}" if FIGURES[figure].number != "rounds" else f"{d:+.0f}"


def derived_note(table: Table) -> list[str]:
    """The caption line of the derived mark, where a cell of the table carries it."""
    if not any(c.published_derived or c.published_std_derived for c in table.cells.values()):
        return []
    how = f": {table.view.derived_note}" if table.view.derived_note else ""
    return [f"{DERIVED_MARK} paper value not printed in the paper; derived for this report{how}."]


def notes(table: Table) -> list[str]:
    """Every note of one table: its own lines (``table_notes``) and the legend of its marks (``legend_notes``)."""
    return table_notes(table) + legend_notes(table)


def table_notes(table: Table) -> list[str]:
    """The lines that belong to this table alone, shown under it: what a cell is, what the table's builder
    measured, its ratios and its reproduction count (the recipe's caption is the renderers' to place)."""
    view = table.view
    if view.kind != "runs":
        return (table.notes or ["analytic: computed from the models' measured costs, no runs."]) + derived_note(table)
    cells = list(table.cells.values())
    agg = "on the seed-mean curve" if view.summary == "mean_curve" else "mean ± std over seeds"
    published = "; paper value and Δ = ours − paper" if any(c.published is not None for c in cells) else ""
    entries = ""
    if view.metrics and not FIGURES[view.figure].of_run:
        entries = "; " + ", ".join(f"{label} = {metric_label(m, table.tasks)}" for label, m in view.metrics.items())
    out = [f"cell: {figure_heading(table)}, {agg}{published}{entries}."]
    out += derived_note(table)
    out += table.notes
    if view.ratio_to:
        out.append(f"[r×] = ratio to the {view.ratio_to} cell (paper's ratio in its own brackets).")
    if FIGURES[view.figure].states_target_rule and view.target_rule == "count_not_above":
        out.append("rounds to target counted as the number of rounds at or below the target (FedTrip's code).")
    out += significance_reach(table)
    if any(c.verdict is not None for c in cells):
        out.append(f"{reproduction_text(table)}.")
    out += claim_notes(table)
    return out


def legend_notes(table: Table, baseline: str | None = None) -> list[str]:
    """What the marks of the table mean: the same words for every table that has them, so a report shows each
    once (``legend``). ``baseline`` names the baseline in the ▲/▼ line (default: the table's)."""
    if table.view.kind != "runs":
        return []
    out = []
    if table.synthetic:
        out.append("SYNTHETIC DATA: numbers come from generated stand-in data, not the paper's data sets.")
    if table.scale != "full":
        out.append(f"scale '{table.scale}': not the paper's setting.")
    cells = list(table.cells.values())
    if any(c.partial for c in cells):
        out.append("* partial: fewer finished seeds than the recipe asks for.")
    if any(c.diverged for c in cells):
        out.append("† at least one seed diverged (its curve up to divergence is used).")
    if any(c.n == 0 and not c.published_only for c in cells):
        out.append("— no finished run yet.")
    if any(c.published_only for c in cells):
        out.append("quoted: a result the paper quotes from another paper; not run here, paper value only.")
    if any(c.n == 0 and c.synthetic_available for c in cells):
        out.append("Synthetic-data runs exist for empty cells: add --synthetic to see them.")
    out += added_note(table)
    if any(c.no_target for c in cells):
        out.append(
            f"{NO_TARGET}: the table gives this row or column no target; for an added one, "
            "--set-for AXIS=LABEL:target=VALUE gives it one."
        )
    out += statistics_notes(table, baseline or table.baseline)
    if FIGURES[table.view.figure].note:
        out.append(FIGURES[table.view.figure].note)
    if table.view.published_ratio:
        out.append("the paper's [r×] is recomputed from its values; (printed r×) where the paper printed another.")
    out += claim_legend(table)
    return out


def legend(tables: list[Table]) -> list[str]:
    """The legend of a report: each table's mark lines, each line once. The ▲/▼ line names the baseline where
    every compared table has the same one, else points to the summary, which names each table's."""
    baselines = {t.baseline for t in tables if t.baseline is not None}
    baseline = baselines.pop() if len(baselines) == 1 else "the table's baseline (named in the summary)"
    return list(dict.fromkeys(line for t in tables for line in legend_notes(t, baseline)))


def added_note(table: Table) -> list[str]:
    """The caption line of the added mark, where the table has a row or column added with --add."""
    if not table.added_rows and not table.added_columns:
        return []
    return [f"{ADDED_MARK} added with --add: not in the paper's recipe, so no published value."]


def statistics_notes(table: Table, baseline: str | None) -> list[str]:
    """What the marks of a run table mean: against ``baseline``, against the paper."""
    out = []
    comparisons = [c.comparison for c in table.cells.values() if c.comparison is not None]
    if table.baseline is not None and comparisons:
        across = "the table"
        if any(c.added and c.comparison is not None for c in table.cells.values()):
            across = f"the recipe's cells, and apart across the added ones {ADDED_MARK}"
        out.append(
            f"▲/▼ better/worse than {baseline} (exact sign-flip permutation test of the mean paired difference over "
            f"seeds, Holm-corrected across {across}, p < {ALPHA:g}); · no significant difference; no mark: fewer "
            "than two seed pairs."
        )
        if FIGURES[table.view.figure].censored and any(c.censored or c.dropped for c in comparisons):
            out.append(f"baseline test on rounds: {CENSORED_RULE}.")
    if any(c.verdict is not None for c in table.cells.values()) and not table.synthetic and table.scale == "full":
        out.append(
            f"✓ reproduced: the 90% interval of ours − paper lies within the margin {margin_words(table)}; ↑/↓ ours "
            "higher/lower: "
            "the 95% interval lies beyond it; ? inconclusive: neither (more seeds would decide it)."
        )
    return out


def margin_words(table: Table) -> str:
    """The equivalence margin of ``table``'s verdicts in words: the recipe's tolerance, or the figure's default."""
    view = table.view
    if view.tolerance is not None:
        return f"±{view.tolerance:g} (the recipe's tolerance)"
    return margin_text(view.figure, METRICS[view.metric].percent, view.percent)


def _unreachable_families(table: Table) -> list[tuple[list[Cell], tuple[int, float, float, int]]]:
    """The families of baseline tests (the recipe's cells, the added ones) whose seed count cannot reach
    significance at all, each with ``stats.unreachable_significance``'s figures."""
    tested = [c for c in table.cells.values() if c.comparison is not None and c.comparison.p_value is not None]
    out = []
    for family in ([c for c in tested if not c.added], [c for c in tested if c.added]):
        reach = unreachable_significance([c.comparison.pairs for c in family])  # type: ignore[union-attr]
        if reach is not None:
            out.append((family, reach))
    return out


def significance_reach(table: Table) -> list[str]:
    """A line per family of baseline tests whose seed count cannot reach significance at all: "3 seeds: the
    smallest possible p is 0.25; no cell can be marked (6 seeds could); the paper ran 10 trials"."""
    out = []
    for family, (pairs, smallest, after_holm, needed) in _unreachable_families(table):
        line = f"{pairs} seed{'s' if pairs != 1 else ''}: the smallest possible p is {smallest:.2g}"
        if len(family) > 1 and smallest < ALPHA:
            line += f", {after_holm:.2g} after Holm over {len(family)} tests"
        line += f"; no {'added ' if family[0].added else ''}cell can be marked ({needed} seeds could)"
        if table.trials is not None:
            line += f"; the paper ran {table.trials} trial{'s' if table.trials != 1 else ''}"
        out.append(line + ".")
    return out


def significance_reach_summary(table: Table) -> list[str]:
    """``significance_reach`` in the words of a summary line: "3 seeds: p ≥ 0.25, no cell can be marked"."""
    out = []
    for family, (pairs, smallest, after_holm, _) in _unreachable_families(table):
        bound = f"p ≥ {smallest:.2g}" + (f" (≥ {after_holm:.2g} after Holm)" if smallest < ALPHA else "")
        cells = "added cell" if family[0].added else "cell"
        out.append(f"{pairs} seed{'s' if pairs != 1 else ''}: {bound}, no {cells} can be marked")
    return out


def reproduction_text(table: Table) -> str:
    return reproduction_line(table.reproduction(), table.synthetic, table.scale)


def paper_summaries(tables: list[Table]) -> list[dict[str, Any]]:
    """Per paper: the reproduction counts over all its run tables and the "k of n cells … reproduced" line."""
    out = []
    for paper in dict.fromkeys(t.paper for t in tables):
        mine = [t for t in tables if t.paper == paper and t.view.kind == "runs"]
        counts = reproduction_counts([c.verdict for t in mine for c in t.cells.values()])
        synthetic = any(t.synthetic for t in mine)
        scale = next((t.scale for t in mine if t.scale != "full"), "full")
        line = reproduction_line(counts, synthetic, scale)
        out.append({"paper": paper, **counts, "line": f"{paper}: {line}"})
    return out


# The words of each baseline outcome in a summary line, and the word before the baseline's name.
OUTCOME_WORDS = {
    "better": (f"{MARKS['better']} better", "than"),
    "worse": (f"{MARKS['worse']} worse", "than"),
    "same": (f"{MARKS['same']} no significant difference", "from"),
    "": ("not tested", "against"),  # fewer than two seed pairs, or no finished run
}


def comparison_summary(table: Table) -> list[str]:
    """One line per method of the table's baseline axis: in how many of its cells it is significantly better or
    worse than the baseline, neither, or untested ("fedprox: ▲ better than fedavg in 2, · no significant
    difference in 1 of 3 cells"); one line where no cell is tested yet. Nothing for a table without a baseline or
    whose figure has no better side."""
    if table.baseline is None or FIGURES[table.view.figure].better == "none":
        return []
    axis = table.view.baseline_axis
    methods: dict[str, list[Cell]] = {}
    for cell in table.cells.values():
        method = cell.labels.get(axis)
        if cell.static or cell.published_only or method is None or method == table.baseline:
            continue
        methods.setdefault(method + (ADDED_MARK if cell.added else ""), []).append(cell)
    if not any(c.comparison and c.comparison.outcome for group in methods.values() for c in group):
        return [f"no method tested against {table.baseline} yet (fewer than two seed pairs in every cell)"]
    reach = significance_reach_summary(table)
    lines = []
    for method, cells in methods.items():
        outcomes = [c.comparison.outcome if c.comparison else "" for c in cells]
        parts: list[str] = []
        for outcome, (words, preposition) in OUTCOME_WORDS.items():
            count = outcomes.count(outcome)
            if count:
                parts.append(f"{words} {'' if parts else f'{preposition} {table.baseline} '}in {count}")
        lines.append(f"{method}: {', '.join(parts)} of {len(cells)} cell{'s' if len(cells) != 1 else ''}")
    return lines + reach


def summary(tables: list[Table]) -> list[tuple[str, list[str]]]:
    """What a report says first: (heading, lines) for each table compared with a baseline (its title; a line per
    method), then "Reproduction" with a line per paper (how many of its cells with a published number we
    reproduce)."""
    out = [(header(t), lines) for t in tables if (lines := comparison_summary(t))]
    out.append(("Reproduction", [s["line"] for s in paper_summaries(tables)]))
    return out


def figure_name(view, tasks: Sequence[str] = ("classification",), unit: str = "") -> str:
    """The view's figure as words, with its metric's human name (as called on runs of ``tasks``; followed by
    ``unit`` when given) and its parameters: "best test accuracy", "rounds to 60% test accuracy", "mean of the last
    10 evaluations of test accuracy (%)"."""
    shown = display_unit(view.metric, view.percent)
    target = f"{view.target:g}{'' if shown in ('', '%') else ' '}{shown}" if view.target is not None else "the target"
    if view.metrics:  # the "metric" pseudo-axis: each row's (or column's) own metric
        metric = "the row's metric" if "metric" in view.rows else "the column's metric"
    else:
        metric = metric_label(view.metric, tasks)
    metric += f" ({unit})" if unit else ""
    return figure_label(view.figure, metric=metric, k=view.k, target=target, at_round=view.at_round)


def figure_heading(table: Table) -> str:
    """The table's figure as words with its unit, after the metric for a value of the metric ("best test accuracy
    (%)", "test accuracy (%) at round 50"), else after the figure ("wall seconds (s)")."""
    view = table.view
    if FIGURES[view.figure].of_metric_value:
        return figure_name(view, table.tasks, table.unit)
    name = figure_name(view, table.tasks)
    return f"{name} ({table.unit})" if table.unit else name


def column_names(table: Table) -> list[str]:
    """Column headers (marked ``ADDED_MARK`` where added with --add); a table without column axes has one column
    named after its figure (``figure_heading``)."""
    if table.view.columns or table.view.kind != "runs":
        return [column + ADDED_MARK if column in table.added_columns else column for column in table.columns]
    return [figure_heading(table)]


def row_name(table: Table, row: str) -> str:
    """A row as shown: its label, marked ``ADDED_MARK`` when it is a value added with --add."""
    return row + ADDED_MARK if row in table.added_rows else row


def has_grid(table: Table) -> bool:
    """Whether the table shows a grid of cells: a diagnostics view has none, only its note (its figure is drawn)."""
    return table.view.kind != "diagnostics"


def row_header(table: Table) -> str:
    return {"models": "model", "overheads": "method"}.get(table.view.kind) or " / ".join(table.view.rows)


def header(table: Table) -> str:
    marks = []
    if table.synthetic:
        marks.append("SYNTHETIC")
    if table.scale != "full":
        marks.append(f"scale={table.scale}")
    return table.title + (f" [{', '.join(marks)}]" if marks else "")


def flat_cell(cell: Cell | None, figure: str) -> str:
    """One cell on one line (Markdown, LaTeX): ours, the baseline mark, the paper's value, Δ and the verdict."""
    if cell is None:
        return ""
    text = ours_text(cell, figure) + baseline_mark(cell)
    if cell.published is not None:
        text += f" / paper {paper_text(cell, figure)}"
        if cell.difference is not None:
            text += f" ({diff_text(cell, figure)})"
        text += verdict_mark(cell)
    return text
