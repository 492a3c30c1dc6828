"""Render tables: terminal (rich), Markdown, LaTeX, CSV, JSON, HTML.

Every format shows ours (mean ± std over seeds, n) beside the paper's value and the difference;
partial cells (fewer seeds than asked), diverged runs, synthetic data and non-paper scales are marked.
"""

from __future__ import annotations

import csv
import html
import io
import json
from typing import Any

from fedbench.recipes.views import DERIVED_MARK, RUN_FIGURES
from fedbench.report.cells import Cell, Table
from fedbench.vocab.metrics import display_unit

FORMATS = ("rich", "markdown", "latex", "csv", "json", "html")


def _num(value: float | None, figure: str) -> str:
    if value is None:
        return "–"
    if figure == "gflops_to_target":
        return f"{value:,.3f}" if value < 1000 else f"{value:,.0f}"
    if figure in ("best_round", "rounds_to_target"):
        return f"{value:.1f}" if value != int(value) else f"{int(value)}"
    if figure == "total_bytes_to_target":
        return f"{value / 2**20:.1f} MiB"
    return f"{value:.2f}"


_TO_TARGET = ("rounds_to_target", "gflops_to_target", "total_bytes_to_target")


def ours_text(cell: Cell, figure: str) -> str:
    if cell.static:
        return f"{cell.mean:.4g}" if cell.mean is not None else "–"
    if cell.published_only:
        return "quoted"
    if cell.n == 0:
        return "—"
    if cell.mean is None:  # rounds_to_target never reached by any seed
        text = {
            "rounds_to_target": f">{cell.rounds_limit}",
            "gflops_to_target": f"not reached in {cell.rounds_limit} rounds",
            "total_bytes_to_target": f"not reached in {cell.rounds_limit} rounds",
        }.get(figure, "–")
    else:
        text = _num(cell.mean, figure)
        if cell.std is not None:
            text += f" ± {_num(cell.std, figure)}"
        if cell.not_reached and figure in _TO_TARGET:
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
    return "" if d is None else f"{d:+.2f}" if figure not in ("best_round", "rounds_to_target") else f"{d:+.0f}"


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
    if view.figure in RUN_FIGURES:
        what = ""
    elif view.metrics:
        what = (
            " of each metric entry (" + ", ".join(f"{label} = {metric}" for label, metric in view.metrics.items()) + ")"
        )
    else:
        what = f" {view.metric}"
    out.append(f"cell: {figure_name(view)}{what}{f' ({table.unit})' if table.unit else ''}, {agg}{published}.")
    out += derived_note(table)
    out += statistics_notes(table)
    if view.figure == "peak_memory_mb":
        out.append(
            "peak memory in MB of 2^20 bytes: torch.cuda.max_memory_allocated on a GPU (fedbench keeps the whole data "
            "set on the device, so it is included); on a CPU the growth of the process's peak resident set during "
            "the run, not comparable with GPU figures; – where a run recorded none."
        )
    out += table.notes
    if view.ratio_to:
        out.append(f"[r×] = ratio to the {view.ratio_to} cell (paper's ratio in its own brackets).")
    if view.published_ratio:
        out.append("the paper's [r×] is recomputed from its values; (printed r×) where the paper printed another.")
    if view.figure in ("rounds_to_target", "gflops_to_target") and view.target_rule == "count_not_above":
        out.append("rounds to target counted as the number of rounds at or below the target (FedTrip's code).")
    return out


def statistics_notes(table: Table) -> list[str]:
    """What the marks of a run table mean: against the baseline, against the paper, the reproduction count."""
    from fedbench.report.stats import CENSORED_RULE

    out = []
    comparisons = [c.comparison for c in table.cells.values() if c.comparison is not None]
    if table.baseline is not None and comparisons:
        out.append(
            f"▲/▼ better/worse than {table.baseline} (paired t-test over seeds, Holm-corrected across the table, "
            "p < 0.05); · no significant difference; no mark: fewer than two seed pairs."
        )
        if table.view.figure == "rounds_to_target" and any(c.censored or c.dropped for c in comparisons):
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
    from fedbench.report.stats import reproduction_line

    return reproduction_line(table.reproduction(), table.synthetic, table.scale)


def paper_summaries(tables: list[Table]) -> list[dict[str, Any]]:
    """Per paper: the reproduction counts over all its run tables and the "k of n cells reproduced" line."""
    from fedbench.report.stats import reproduction_counts, reproduction_line

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
    unit = display_unit(view.metric, view.percent)
    target = f"{view.target:g}{'' if unit in ('', '%') else ' '}{unit}" if view.target is not None else "target"
    return {
        "best": "best",
        "final": "final",
        "last_k_mean": f"mean of last {view.k} evaluations",
        "best_round": "round of best",
        "rounds_to_target": f"rounds to {target}",
        "total_bytes_to_target": f"bytes communicated to {target}",
        "wall_seconds": "wall seconds",
        "seconds_per_round": "seconds per round",
        "wall_hours": "wall-clock hours",
        "peak_memory_mb": "peak memory (MB)",
        "gflops_to_target": f"GFLOPs to {target}",
        "value_at_round": f"at round {view.at_round}" if view.at_round else "at the row's round",
        "val_selected": "at the best mean-validation round",
    }[view.figure]


def column_names(table: Table) -> list[str]:
    """Column headers; a table without column axes has one column named after its figure."""
    return table.columns if table.view.columns or table.view.kind != "runs" else [figure_name(table.view)]


def row_header(table: Table) -> str:
    return {"models": "model", "overheads": "method"}.get(table.view.kind) or " / ".join(table.view.rows)


def _header(table: Table) -> str:
    marks = []
    if table.synthetic:
        marks.append("SYNTHETIC")
    if table.scale != "full":
        marks.append(f"scale={table.scale}")
    return table.title + (f" [{', '.join(marks)}]" if marks else "")


def to_rich(table: Table):
    from rich.table import Table as RichTable

    rich_table = RichTable(title=_header(table), caption="\n".join(notes(table)), show_lines=True)
    rich_table.add_column(row_header(table), style="bold")
    for column in column_names(table):
        rich_table.add_column(column, justify="right")
    figure = table.view.figure
    for row in table.rows:
        values = []
        for column in table.columns:
            cell = table.cells.get((row, column))
            if cell is None:
                values.append("")
                continue
            text = ours_text(cell, figure) + baseline_mark(cell)
            if cell.published is not None:
                text += f"\n[dim]paper {paper_text(cell, figure)}[/dim]{verdict_mark(cell)}"
                if cell.difference is not None:
                    text += f" [dim]Δ {diff_text(cell, figure)}[/dim]"
            values.append(text)
        rich_table.add_row(row, *values)
    return rich_table


def _flat_cell(cell: Cell | None, figure: str) -> str:
    if cell is None:
        return ""
    text = ours_text(cell, figure) + baseline_mark(cell)
    if cell.published is not None:
        text += f" / paper {paper_text(cell, figure)}"
        if cell.difference is not None:
            text += f" ({diff_text(cell, figure)})"
        text += verdict_mark(cell)
    return text


def to_markdown(table: Table) -> str:
    figure = table.view.figure
    lines = [f"### {_header(table)}", ""]
    if table.view.caption:
        lines += [table.view.caption, ""]
    lines.append("| " + " | ".join([row_header(table), *column_names(table)]) + " |")
    lines.append("|" + "---|" * (len(table.columns) + 1))

    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    for row in table.rows:
        cells = [escape(_flat_cell(table.cells.get((row, c)), figure)) for c in table.columns]
        lines.append("| " + " | ".join([escape(row), *cells]) + " |")
    lines.append("")
    lines += [f"- {note}" for note in notes(table)]
    return "\n".join(lines) + "\n"


def _latex_escape(text: str) -> str:
    for a, b in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("_", r"\_"),
        ("#", r"\#"),
        ("^", r"\^{}"),  # before the replacements below, which write ^ themselves
        ("±", r"$\pm$"),
        ("Δ", r"$\Delta$"),
        ("†", r"$^\dagger$"),
        ("‡", r"$^\ddagger$"),
        (">", r"$>$"),
        ("—", "--"),
        ("–", "--"),
        ("▲", r"$\blacktriangle$"),  # amssymb
        ("▼", r"$\blacktriangledown$"),
        ("·", r"$\cdot$"),
        ("✓", r"$\surd$"),
        ("↑", r"$\uparrow$"),
        ("↓", r"$\downarrow$"),
        ("≥", r"$\geq$"),
    ):
        text = text.replace(a, b)
    return text


def to_latex(table: Table) -> str:
    figure = table.view.figure
    spec = "l" + "r" * len(table.columns)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        f"\\caption{{{_latex_escape(_header(table))}}}",
        f"\\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(_latex_escape(x) for x in [row_header(table), *column_names(table)]) + r" \\",
        r"\midrule",
    ]
    for row in table.rows:
        cells = [_latex_escape(_flat_cell(table.cells.get((row, c)), figure)) for c in table.columns]
        lines.append(" & ".join([_latex_escape(row), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    lines += [f"\\par\\footnotesize {_latex_escape(note)}" for note in notes(table)]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            "paper",
            "recipe",
            "table",
            "row",
            "column",
            "n",
            "expected",
            "mean",
            "std",
            "values",
            "published",
            "difference",
            "partial",
            "diverged",
            "synthetic",
            "scale",
            "published_std",
            "published_derived",
            "published_std_derived",
            "baseline",
            "baseline_difference",
            "baseline_ci_low",
            "baseline_ci_high",
            "baseline_p_holm",
            "baseline_outcome",
            "verdict",
        ]
    )
    for row in table.rows:
        for column in table.columns:
            cell = table.cells.get((row, column))
            if cell is None:
                continue
            comparison = cell.comparison
            writer.writerow(
                [
                    table.paper,
                    table.recipe,
                    table.view.name,
                    row,
                    column,
                    cell.n,
                    cell.expected,
                    cell.mean,
                    cell.std,
                    json.dumps(cell.values),
                    cell.published,
                    cell.difference,
                    cell.partial,
                    cell.diverged,
                    table.synthetic,
                    table.scale,
                    cell.published_std,
                    cell.published_derived,
                    cell.published_std_derived,
                    comparison.baseline if comparison else None,
                    comparison.difference if comparison else None,
                    comparison.ci_low if comparison else None,
                    comparison.ci_high if comparison else None,
                    comparison.p_holm if comparison else None,
                    comparison.outcome if comparison else None,
                    cell.verdict.status if cell.verdict else None,
                ]
            )
    return buffer.getvalue()


STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;
color:#1b1b1b;line-height:1.35}
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
.summary{background:#f3f7fb;border:1px solid #c9d9ea;padding:.6em 1em;border-radius:6px}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top}
td{text-align:right}th{background:#fafafa;text-align:left}
.paper,.stat{color:#666;font-size:.85em;display:block}
.better{color:#0a7d22}.worse{color:#b3261e}
.reproduced{color:#0a7d22}.higher,.lower{color:#8a5a00}
ul.notes{font-size:.85em;color:#444}
img{max-width:100%;height:auto;display:block;margin:.5em 0}
.plots{display:flex;flex-wrap:wrap;gap:.5em}.plots img{max-width:min(100%,36em)}
details{margin:.2em 0}summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-all;background:#f7f7f7;padding:.4em;font-size:.8em;max-height:20em;
overflow:auto}
"""


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def cell_html(cell: Cell | None, figure: str) -> str:
    """One cell: ours with its baseline mark (and the paired difference, its 95 % CI and Holm p), the paper's
    value with its verdict (and our 95 % interval)."""
    if cell is None:
        return "<td></td>"
    outcome = cell.comparison.outcome if cell.comparison else ""
    parts = [f'<span class="{outcome}">{html.escape(ours_text(cell, figure) + baseline_mark(cell))}</span>']
    c = cell.comparison
    if c is not None and c.difference is not None:
        ci = f" [{_number(c.ci_low)}, {_number(c.ci_high)}]" if c.ci_low is not None else ""
        p = f", p<sub>Holm</sub> = {_number(c.p_holm, 2)}" if c.p_holm is not None else ""
        why = f" ({html.escape(c.reason)})" if c.reason else ""
        parts.append(
            f'<span class="stat">Δ vs {html.escape(c.baseline)} {c.difference:+.3g}{ci}{p}, {c.pairs} pairs{why}</span>'
        )
    if cell.published is not None:
        verdict = cell.verdict
        status = verdict.status if verdict else ""
        text = f"paper {paper_text(cell, figure)}"
        if cell.difference is not None:
            text += f" (Δ {diff_text(cell, figure)})"
        parts.append(f'<span class="paper {status}">{html.escape(text + verdict_mark(cell))}</span>')
        if verdict is not None and verdict.ci_low is not None:
            parts.append(
                f'<span class="stat">ours 95% CI [{_number(verdict.ci_low)}, {_number(verdict.ci_high)}]: '
                f"{html.escape(status)}</span>"
            )
        elif verdict is not None and verdict.reason:
            parts.append(f'<span class="stat">{html.escape(verdict.reason)}</span>')
    return "<td>" + "".join(parts) + "</td>"


def table_html(table: Table) -> str:
    """A table with its marks, the baseline comparison's CI and p and the verdicts, its caption and notes."""
    figure = table.view.figure
    out = [f"<h3>{html.escape(_header(table))}</h3>"]
    if table.view.caption:
        out.append(f"<p>{html.escape(table.view.caption)}</p>")
    out += ['<div class="scroll"><table>', "<thead><tr>"]
    out += [f"<th>{html.escape(x)}</th>" for x in [row_header(table), *column_names(table)]]
    out.append("</tr></thead><tbody>")
    for row in table.rows:
        cells = "".join(cell_html(table.cells.get((row, c)), figure) for c in table.columns)
        out.append(f"<tr><th>{html.escape(row)}</th>{cells}</tr>")
    out.append("</tbody></table></div>")
    out += ['<ul class="notes">', *(f"<li>{html.escape(n)}</li>" for n in notes(table)), "</ul>"]
    return "\n".join(out) + "\n"


def page(tables: list[Table], title: str, extras: dict[int, str] | None = None) -> str:
    """A self-contained HTML page: the reproduction summary of each paper, then each table with its marks and
    notes, followed by ``extras[i]`` (HTML: plots, run drill-down) for table ``i``."""
    body = [f"<h1>{html.escape(title)}</h1>", '<div class="summary" id="summary"><ul>']
    body += [f"<li>{html.escape(s['line'])}</li>" for s in paper_summaries(tables)]
    body.append("</ul></div>")
    for i, table in enumerate(tables):
        body += [f'<section id="table-{i}">', table_html(table), (extras or {}).get(i, ""), "</section>"]
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def render(tables: list[Table], fmt: str) -> Any:
    """A string for every format except ``rich`` (a list of renderables). Every format but CSV ends (JSON: has
    "papers") with each paper's reproduction summary."""
    summaries = paper_summaries(tables)
    if fmt == "rich":
        from rich.text import Text

        return [to_rich(t) for t in tables] + [Text(s["line"]) for s in summaries]
    if fmt == "json":
        document = {"papers": summaries, "tables": [{**t.to_json(), "notes": notes(t)} for t in tables]}
        return json.dumps(document, indent=2) + "\n"
    if fmt == "csv":
        parts = [to_csv(t) for t in tables]
        return parts[0] + "".join(p.split("\n", 1)[1] for p in parts[1:]) if parts else ""
    if fmt == "html":
        return page(tables, title="fedbench report")
    joiner = {"markdown": to_markdown, "latex": to_latex}[fmt]
    body = "\n".join(joiner(t) for t in tables)
    lines = [s["line"] for s in summaries]
    if fmt == "markdown":
        return "\n".join(f"**{line}**  " for line in lines) + "\n\n" + body
    return body + "".join(f"% {line}\n" for line in lines)
