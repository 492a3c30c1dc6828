"""What every format shows the same way: a cell's text (ours, the paper's, Δ, marks), a table's header, row
header and column names, and its notes (the caption lines: what a cell is, what each mark means, the statistics).

Every format shows ours (mean ± std over seeds, n) beside the paper's value and the difference; partial cells (fewer
seeds than asked), diverged runs, synthetic data and non-paper scales are marked. A figure's number format, label
and caption line come from the figure catalogue (fedbench.vocab.figures).
"""

from __future__ import annotations

from typing import Any

from fedbench.recipes.views import DERIVED_MARK
from fedbench.report.cells import Cell, Table, reproduction_counts
from fedbench.report.stats import CENSORED_RULE, reproduction_line
from fedbench.vocab.figures import FIGURES, figure_label
from fedbench.vocab.metrics import display_unit

# After the name of a row or column of values added on the command line (--add): not the paper's, no published value.
ADDED_MARK = "⁺"


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
    if cell.mean is None:  # no seed has a value (a to-target figure: none reached the target)
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
    """ " ✓" reproduced, " ↑" / " ↓" ours higher / lower than the paper; nothing when not comparable."""
    mark = cell.verdict.mark if cell.verdict else ""
    return f" {mark}" if mark else ""


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
    out = []
    if table.view.kind != "runs":
        return (
            ([table.view.caption] if table.view.caption else [])
            + (table.notes or ["analytic: computed from the models' measured costs, no runs."])
            + derived_note(table)
        )
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
    view = table.view
    agg = "on the seed-mean curve" if view.summary == "mean_curve" else "mean ± std over seeds"
    published = "; paper value and Δ = ours − paper" if any(c.published is not None for c in cells) else ""
    figure = FIGURES[view.figure]
    if figure.of_run:
        what = ""
    elif view.metrics:
        what = (
            " of each metric entry (" + ", ".join(f"{label} = {metric}" for label, metric in view.metrics.items()) + ")"
        )
    else:
        what = f" {view.metric}"
    out.append(f"cell: {figure_name(view)}{what}{f' ({table.unit})' if table.unit else ''}, {agg}{published}.")
    out += derived_note(table)
    out += added_note(table)
    out += statistics_notes(table)
    if figure.note:
        out.append(figure.note)
    out += table.notes
    if view.ratio_to:
        out.append(f"[r×] = ratio to the {view.ratio_to} cell (paper's ratio in its own brackets).")
    if view.published_ratio:
        out.append("the paper's [r×] is recomputed from its values; (printed r×) where the paper printed another.")
    if figure.states_target_rule and view.target_rule == "count_not_above":
        out.append("rounds to target counted as the number of rounds at or below the target (FedTrip's code).")
    return out


def added_note(table: Table) -> list[str]:
    """The caption line of the added mark, where the table has a row or column added with --add."""
    if not table.added_rows and not table.added_columns:
        return []
    return [f"{ADDED_MARK} added with --add: not in the paper's recipe, so no published value."]


def statistics_notes(table: Table) -> list[str]:
    """What the marks of a run table mean: against the baseline, against the paper, the reproduction count."""
    out = []
    comparisons = [c.comparison for c in table.cells.values() if c.comparison is not None]
    if table.baseline is not None and comparisons:
        across = "the table"
        if any(c.added and c.comparison is not None for c in table.cells.values()):
            across = f"the recipe's cells, and apart across the added ones {ADDED_MARK}"
        out.append(
            f"▲/▼ better/worse than {table.baseline} (paired t-test over seeds, Holm-corrected across {across}, "
            "p < 0.05); · no significant difference; no mark: fewer than two seed pairs."
        )
        if FIGURES[table.view.figure].censored and any(c.censored or c.dropped for c in comparisons):
            out.append(f"baseline test on rounds: {CENSORED_RULE}.")
    if any(c.verdict is not None for c in table.cells.values()):
        tolerance = f" or within {table.view.tolerance:g} of ours" if table.view.tolerance else ""
        if not table.synthetic and table.scale == "full":
            out.append(
                f"✓ reproduced: the paper's value is inside our 95% t interval over seeds{tolerance}; "
                "↑/↓ ours higher/lower than the paper."
            )
        out.append(reproduction_text(table))
    return out


def reproduction_text(table: Table) -> str:
    return reproduction_line(table.reproduction(), table.synthetic, table.scale)


def paper_summaries(tables: list[Table]) -> list[dict[str, Any]]:
    """Per paper: the reproduction counts over all its run tables and the "k of n cells reproduced" line."""
    out = []
    for paper in dict.fromkeys(t.paper for t in tables):
        mine = [t for t in tables if t.paper == paper and t.view.kind == "runs"]
        counts = reproduction_counts([c.verdict for t in mine for c in t.cells.values()])
        synthetic = any(t.synthetic for t in mine)
        scale = next((t.scale for t in mine if t.scale != "full"), "full")
        line = reproduction_line(counts, synthetic, scale)
        out.append({"paper": paper, **counts, "line": f"{paper}: {line}"})
    return out


def figure_name(view) -> str:
    """The view's figure as words, with its parameters: "rounds to 60%", "mean of last 10 evaluations"."""
    unit = display_unit(view.metric, view.percent)
    target = f"{view.target:g}{'' if unit in ('', '%') else ' '}{unit}" if view.target is not None else "target"
    return figure_label(view.figure, k=view.k, target=target, at_round=view.at_round)


def column_names(table: Table) -> list[str]:
    """Column headers (marked ``ADDED_MARK`` where added with --add); a table without column axes has one column named after its figure."""
    if table.view.columns or table.view.kind != "runs":
        return [column + ADDED_MARK if column in table.added_columns else column for column in table.columns]
    return [figure_name(table.view)]


def row_name(table: Table, row: str) -> str:
    """A row as shown: its label, marked ``ADDED_MARK`` when it is a value added with --add."""
    return row + ADDED_MARK if row in table.added_rows else row


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
