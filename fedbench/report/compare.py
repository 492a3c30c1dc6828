"""``fedbench compare``: the same cells from two registries side by side (CPU vs GPU, two fedbench versions, two
machines), their difference and whether it is within seed noise.

Within seed noise (``within_noise``): the exact two-sample permutation test of the difference of the two
registries' mean per-seed figures (fedbench.report.stats.two_sample_permutation_test) gives p ≥ 0.05. Unpaired: the
registries need not hold the same seeds. Identical per-seed values (a bit-identical rerun) are within noise without
a test; a cell with fewer than two seeds on a side has no test (None), and neither has one whose seed counts cannot
reach p < 0.05 at all (2 + 2 seeds: the smallest possible p is 1/3): "within noise" would then be no evidence.
Rounds-to-target seeds that never reached the target count as R + 1 (the censoring rule of the baseline comparison).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.table import Table as RichTable
from rich.text import Text

from fedbench.report.cells import Cell, Table
from fedbench.report.render.notes import NO_TARGET, figure_heading, ours_text
from fedbench.report.stats import ALPHA, smallest_two_sample_p, two_sample_permutation_test
from fedbench.vocab.figures import FIGURES


@dataclass
class CellPair:
    row: str
    column: str
    a: Cell
    b: Cell
    difference: float | None = None  # mean(B) − mean(A) of the per-seed figures
    p_value: float | None = None  # the two-sample permutation test's, two-sided
    within_noise: bool | None = None
    reason: str = ""
    test: str = ""  # the test's name (stats.TWO_SAMPLE_TEST, or its Monte Carlo form)
    statistic: float | None = None  # its statistic, mean(B) − mean(A)
    assignments: int = 0  # the splits of the pooled seeds it counted over
    too_few_seeds: bool = False  # no split of these seed counts could give p < 0.05

    def to_json(self) -> dict[str, Any]:
        def side(cell: Cell) -> dict[str, Any]:
            return {"n": cell.n, "mean": cell.mean, "std": cell.std, "values": cell.values, "seeds": cell.seeds}

        return {
            "row": self.row,
            "column": self.column,
            "a": side(self.a),
            "b": side(self.b),
            "difference": self.difference,
            "p_value": self.p_value,
            "within_noise": self.within_noise,
            "reason": self.reason,
            "test": self.test,
            "statistic": self.statistic,
            "assignments": self.assignments,
            "too_few_seeds": self.too_few_seeds,
        }


def _figures(cell: Cell, figure: str) -> list[float]:
    """The cell's per-seed figures; a seed that never reached the target counts as R + 1 rounds."""
    if FIGURES[figure].censored:
        return [float(v) if v is not None else float(cell.rounds_limit or 0) + 1 for v in cell.values]
    return [float(v) for v in cell.values if v is not None]


def pair_cells(a: Cell, b: Cell, figure: str) -> CellPair:
    pair = CellPair(a.row, a.column, a, b)
    if not a.n or not b.n:
        pair.reason = "no finished run in " + ("A and B" if not a.n and not b.n else "A" if not a.n else "B")
        return pair
    if a.no_target or b.no_target:  # nothing to reach, so nothing to compare (never "R + 1" on both sides)
        pair.reason = NO_TARGET
        return pair
    x, y = _figures(a, figure), _figures(b, figure)
    if x and y:
        pair.difference = sum(y) / len(y) - sum(x) / len(x)
    if sorted(zip(a.seeds, a.values), key=str) == sorted(zip(b.seeds, b.values), key=str):
        pair.within_noise, pair.reason = True, "identical per-seed values"
        return pair
    if len(x) < 2 or len(y) < 2:
        pair.reason = "fewer than two seeds on a side: no test"
        return pair
    smallest = smallest_two_sample_p(len(x), len(y))
    if smallest >= ALPHA:
        pair.reason = f"{len(x)} + {len(y)} seeds: the smallest possible p is {smallest:.2g}, so no test can tell"
        pair.too_few_seeds = True
        return pair
    test = two_sample_permutation_test(x, y)
    pair.p_value, pair.test, pair.statistic, pair.assignments = (
        test.p_value,
        test.name,
        test.statistic,
        test.assignments,
    )
    pair.difference = test.statistic
    pair.within_noise = pair.p_value >= ALPHA
    return pair


@dataclass
class TablePair:
    a: Table
    b: Table
    cells: list[CellPair]

    def to_json(self) -> dict[str, Any]:
        return {
            "paper": self.a.paper,
            "recipe": self.a.recipe,
            "table": self.a.view.name,
            "title": self.a.title,
            "unit": self.a.unit,
            "cells": [c.to_json() for c in self.cells],
        }


def compare_tables(tables_a: list[Table], tables_b: list[Table]) -> list[TablePair]:
    """Pair the run tables built from two registries (the same recipes, so the same tables and cells)."""
    out = []
    for a, b in zip(tables_a, tables_b):
        if a.view.kind != "runs":
            continue
        cells = [
            pair_cells(a.cells[(r, c)], b.cells[(r, c)], a.view.figure)
            for r in a.rows
            for c in a.columns
            if (r, c) in a.cells and (r, c) in b.cells and not a.cells[(r, c)].published_only
        ]
        out.append(TablePair(a, b, cells))
    return out


def _noise_text(pair: CellPair) -> str:
    if pair.within_noise is None:
        return pair.reason
    verdict = "yes" if pair.within_noise else "NO"
    return f"{verdict} (p={pair.p_value:.3g})" if pair.p_value is not None else f"{verdict} ({pair.reason})"


def rows_of(pair: TablePair) -> list[list[str]]:
    figure = pair.a.view.figure
    out = []
    for cell in pair.cells:
        label = f"{cell.row} / {cell.column}" if pair.a.view.columns else cell.row
        difference = "" if cell.difference is None else f"{cell.difference:+.3g}"
        out.append([label, ours_text(cell.a, figure), ours_text(cell.b, figure), difference, _noise_text(cell)])
    return out


HEADERS = ["cell", "A", "B", "Δ (B − A)", "within seed noise (permutation test)"]


def summary_line(pairs: list[TablePair]) -> str:
    tested = [c for p in pairs for c in p.cells if c.within_noise is not None]
    outside = sum(not c.within_noise for c in tested)
    untestable = sum(c.too_few_seeds for p in pairs for c in p.cells)
    line = (
        f"{len(tested)} cells compared, {outside} outside seed noise (exact two-sample permutation test, p < {ALPHA:g})"
    )
    if untestable:
        line += f"; {untestable} cell{'s' if untestable != 1 else ''} with too few seeds for any test to tell"
    return line


def render_comparison(pairs: list[TablePair], fmt: str, label_a: str, label_b: str) -> Any:
    """rich: a list of renderables; markdown and json: a string."""
    if fmt == "json":
        document = {"a": label_a, "b": label_b, "summary": summary_line(pairs), "tables": [p.to_json() for p in pairs]}
        return json.dumps(document, indent=2) + "\n"
    if fmt == "markdown":
        lines = [f"A = {label_a}  ", f"B = {label_b}", ""]
        for pair in pairs:
            lines += [
                f"### {pair.a.title} ({figure_heading(pair.a)})",
                "",
                "| " + " | ".join(HEADERS) + " |",
                "|" + "---|" * len(HEADERS),
            ]
            lines += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in rows_of(pair)]
            lines.append("")
        return "\n".join(lines + [summary_line(pairs), ""])
    out: list[Any] = [Text(f"A = {label_a}\nB = {label_b}")]
    for pair in pairs:
        table = RichTable(title=f"{pair.a.title} ({figure_heading(pair.a)})", show_lines=True)
        for header in HEADERS:
            table.add_column(header, overflow="fold")
        for row in rows_of(pair):
            table.add_row(*row)
        out.append(table)
    out.append(Text(summary_line(pairs)))
    return out


__all__ = ["CellPair", "TablePair", "compare_tables", "pair_cells", "render_comparison", "summary_line"]
