"""The HTML report: one self-contained page per paper (or recipe) — the reproduction summary at the top, every
table with its marks (the baseline comparison's CI and p, the paper verdict's interval) and captions, the plots
embedded as base64 PNGs, and a per-run drill-down (spec, provenance, curve) in ``<details>``. No external file,
script or font: the page opens offline and can be mailed."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

from fedbench.recipes.schema import Recipe
from fedbench.report.cells import Table
from fedbench.report.render import page
from fedbench.vocab.metrics import display_factor, metric_curve


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


def runs_html(table: Table, curves: dict[int, list[Any]], specs: dict[int, Any]) -> str:
    """The drill-down of a table: per cell, per run its spec, provenance and curve of the view's metric."""
    cells = [c for c in table.cells.values() if c.runs]
    if not cells:
        return ""
    metric = table.view.metric
    factor = display_factor(metric, table.view.percent)
    out = [f"<details><summary>runs of this table ({sum(len(c.runs) for c in cells)})</summary>"]
    for cell in cells:
        for seed, run in zip(cell.seeds, cell.runs):
            curve = [(r, v * factor) for r, v in metric_curve(curves.get(run.id, []), metric)]
            title = f"{cell.row} / {cell.column} · seed {seed} · run {run.id} ({run.spec_hash[:10]}, {run.status})"
            out += [
                f"<details><summary>{html.escape(title)}</summary>",
                f"<p>{html.escape(metric)} by round</p>{curve_svg(curve)}",
                f"<p>spec</p><pre>{html.escape(json.dumps(specs.get(run.id), indent=1, sort_keys=True))}</pre>",
                f"<p>provenance</p><pre>{html.escape(json.dumps(run.provenance or {}, indent=1, sort_keys=True))}</pre>",
                "</details>",
            ]
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
    recipes: Iterable[Recipe], tables: list[Table], store: Any, *, scale: str = "full", synthetic: bool = False
) -> dict[str, str]:
    """{paper: page} of ``tables``: each paper's tables with their plots and run drill-down (one query for the
    curves of all runs shown, one per plotted view for the plot curves)."""
    from fedbench.report.collect import EmptyRegistry
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
        for i, table in enumerate(mine):
            made = figures(by_name[table.recipe], table.view, source, scale=scale, synthetic=synthetic)
            extras[i] = plots_html([(stem, png_bytes(fig)) for stem, fig in made]) + runs_html(table, curves, specs)
        pages[paper] = page(mine, title=f"fedbench report: {paper}", extras=extras)
    return pages
