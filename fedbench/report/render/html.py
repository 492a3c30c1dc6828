"""HTML: a table per view with its marks (the baseline comparison's CI and p, the paper verdict's interval) and
notes, and the report page: one self-contained page per paper (or recipe) — the reproduction summary at the top,
every table with its captions, the plots embedded as base64 PNGs, and a per-run drill-down (spec, provenance, curve)
in ``<details>``. No external file, script or font: the page opens offline and can be mailed."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fedbench.recipes.schema import Recipe
from fedbench.report.cells import Cell, Table
from fedbench.report.collect import EmptyRegistry
from fedbench.report.render.claim_lines import claims_summary
from fedbench.report.render.notes import (
    baseline_mark,
    column_names,
    diff_text,
    has_grid,
    header,
    legend,
    ours_text,
    paper_text,
    row_header,
    row_name,
    summary,
    table_notes,
    verdict_detail,
    verdict_mark,
)
from fedbench.report.run_view import result_line
from fedbench.vocab.metrics import axis_label, display_factor, metric_curve

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
.reproduced{color:#0a7d22}.higher,.lower{color:#8a5a00}.inconclusive{color:#555}
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
    value with its verdict (and the intervals of ours − paper against the margin)."""
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
        if verdict is not None and verdict.ci90_low is not None:
            parts.append(f'<span class="stat">{html.escape(verdict_detail(verdict))}</span>')
        elif verdict is not None and verdict.reason:
            parts.append(f'<span class="stat">{html.escape(verdict.reason)}</span>')
    return "<td>" + "".join(parts) + "</td>"


def table_html(table: Table) -> str:
    """A table with its marks, the baseline comparison's CI and p and the verdicts, its caption and its own notes
    (the legend of the marks is the page's, once)."""
    figure = table.view.figure
    out = [f"<h3>{html.escape(header(table))}</h3>"]
    if table.view.caption:
        out.append(f"<p>{html.escape(table.view.caption)}</p>")
    if has_grid(table):
        out += ['<div class="scroll"><table>', "<thead><tr>"]
        out += [f"<th>{html.escape(x)}</th>" for x in [row_header(table), *column_names(table)]]
        out.append("</tr></thead><tbody>")
        for row in table.rows:
            cells = "".join(cell_html(table.cells.get((row, c)), figure) for c in table.columns)
            out.append(f"<tr><th>{html.escape(row_name(table, row))}</th>{cells}</tr>")
        out.append("</tbody></table></div>")
    out += ['<ul class="notes">', *(f"<li>{html.escape(n)}</li>" for n in table_notes(table)), "</ul>"]
    return "\n".join(out) + "\n"


def page(tables: list[Table], title: str, extras: dict[int, str] | None = None) -> str:
    """A self-contained HTML page: the summary (per table, the methods against the baseline; per paper, the cells
    reproduced), then each table with its marks and notes, followed by ``extras[i]`` (HTML: plots, run
    drill-down) for table ``i``, then the legend of the marks once."""
    body = [f"<h1>{html.escape(title)}</h1>", '<div class="summary" id="summary"><ul>']
    for heading, lines in summary(tables) + claims_summary(tables):
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
        body.append(f"<li>{html.escape(heading)}<ul>{items}</ul></li>")
    body.append("</ul></div>")
    for i, table in enumerate(tables):
        body += [f'<section id="table-{i}">', table_html(table), (extras or {}).get(i, ""), "</section>"]
    lines = legend(tables)
    if lines:
        body += ['<h2>Legend</h2><ul class="notes" id="legend">', *(f"<li>{html.escape(n)}</li>" for n in lines)]
        body.append("</ul>")
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def curve_svg(curve: Sequence[tuple[int, float]], width: int = 320, height: int = 90) -> str:
    """A tiny inline SVG polyline of a run's curve (no image file: the page stays self-contained)."""
    if not curve:
        return "<p>no evaluated round</p>"
    rounds = [r for r, _ in curve]
    values = [v for _, v in curve]
    r0, r1 = min(rounds), max(rounds) if max(rounds) > min(rounds) else min(rounds) + 1
    v0, v1 = min(values), max(values) if max(values) > min(values) else min(values) + 1
    points = " ".join(
        f"{4 + (r - r0) / (r1 - r0) * (width - 8):.1f},{height - 4 - (v - v0) / (v1 - v0) * (height - 8):.1f}"
        for r, v in curve
    )
    label = f"rounds {rounds[0]}–{rounds[-1]}, {v0:.4g} to {max(values):.4g}"
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(label)}"><polyline fill="none" stroke="#1f77b4" stroke-width="1.5" '
        f'points="{points}"/></svg><br><small>{html.escape(label)}</small>'
    )


def runs_html(
    table: Table, curves: dict[int, list[Any]], specs: dict[int, Any], shown: set[tuple[int, str]] | None = None
) -> str:
    """The drill-down of a table: per cell, per run its spec, provenance and curve of the view's metric. ``shown``
    (the page's runs so far, with the metric drawn) keeps a page from repeating a run: one already shown with the same
    metric is a link to it; with another metric, its curve and the link (the spec and provenance are above)."""
    cells = [c for c in table.cells.values() if c.runs]
    if not cells:
        return ""
    shown = set() if shown is None else shown
    metric = table.view.metric
    factor = display_factor(metric, table.view.percent)
    out = [f"<details><summary>runs of this table ({sum(len(c.runs) for c in cells)})</summary>"]
    for cell in cells:
        for seed, run in zip(cell.seeds, cell.runs):
            title = f"{cell.row} / {cell.column} · seed {seed} · run {run.id} ({run.spec_hash[:10]}, {run.status})"
            link = f'<a href="#run-{run.id}">{html.escape(title)}</a>'
            if (run.id, metric) in shown:
                out.append(f"<p>{link}: shown above</p>")
                continue
            curve = [(r, v * factor) for r, v in metric_curve(curves.get(run.id, []), metric)]
            drawn = (
                f"<p>{html.escape(axis_label(metric, table.view.percent, table.tasks))} by round</p>{curve_svg(curve)}"
            )
            if any(run_id == run.id for run_id, _ in shown):
                out += [f"<details><summary>{html.escape(title)}</summary>", drawn, f"<p>spec, provenance: {link}</p>"]
            else:
                out += [
                    f'<details id="run-{run.id}"><summary>{html.escape(title)}</summary>',
                    drawn,
                    f"<p>spec</p><pre>{html.escape(json.dumps(specs.get(run.id), indent=1, sort_keys=True))}</pre>",
                    f"<p>provenance</p><pre>{html.escape(json.dumps(run.provenance or {}, indent=1, sort_keys=True))}</pre>",
                ]
                # what `fedbench show` prints of it
                stored = result_line(run.summary, (specs.get(run.id) or {}).get("eval_mode", "global"))
                if stored:
                    out.append(f"<p>stored summary, test accuracy (%): {html.escape(' · '.join(stored))}</p>")
            out.append("</details>")
            shown.add((run.id, metric))
    out.append("</details>")
    return "\n".join(out) + "\n"


def plots_html(images: list[tuple[str, bytes]]) -> str:
    """PNG images embedded as base64 data URLs."""
    if not images:
        return ""
    tags = [
        f'<img alt="{html.escape(stem)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'
        for stem, png in images
    ]
    return '<div class="plots">' + "".join(tags) + "</div>\n"


def html_pages(
    recipes: Iterable[Recipe],
    tables: list[Table],
    store: Any,
    *,
    scale: str = "full",
    synthetic: bool = False,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> dict[str, str]:
    """{paper: page} of ``tables``: each paper's tables with their plots and run drill-down (one query for the
    curves of all runs shown, one per plotted view for the plot curves); the plots draw the runs ``seeds`` and
    ``only`` select, as the tables do."""
    # local: keeps matplotlib out of report's start-up (only --format html draws)
    from fedbench.report.plots import figures, png_bytes

    source: Any = store if store is not None else EmptyRegistry()
    by_name = {r.name: r for r in recipes}
    ids = [i for t in tables for c in t.cells.values() for i in c.run_ids]
    curves = store.curves(ids) if store is not None and ids else {}
    hashes = list(dict.fromkeys(run.spec_hash for t in tables for c in t.cells.values() for run in c.runs))
    specs = {run.id: run.spec for run in store.runs(spec_hashes=hashes)} if store is not None and hashes else {}
    pages = {}
    for paper in dict.fromkeys(t.paper for t in tables):
        mine = [t for t in tables if t.paper == paper]
        extras = {}
        shown: set[tuple[int, str]] = set()  # a run's drill-down appears once per page
        for i, table in enumerate(mine):
            made = figures(
                by_name[table.recipe], table.view, source, scale=scale, synthetic=synthetic, seeds=seeds, only=only
            )
            extras[i] = plots_html([(stem, png_bytes(fig)) for stem, fig in made]) + runs_html(
                table, curves, specs, shown
            )
        pages[paper] = page(mine, title=f"fedbench report: {paper}", extras=extras)
    return pages
