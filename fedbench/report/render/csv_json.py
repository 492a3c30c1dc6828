"""The machine-readable formats: CSV (one line per cell) and JSON (each table with its cells and notes, and each
paper's reproduction summary)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from fedbench.report.cells import Table
from fedbench.report.render.notes import notes


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
            "added",
            "no_target",
            "target",
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
                    cell.added,
                    cell.no_target,
                    cell.target,
                ]
            )
    return buffer.getvalue()


def to_json(tables: list[Table], summaries: list[dict[str, Any]]) -> str:
    """The tables (with their notes) and the papers' reproduction summaries as one JSON document."""
    document = {"papers": summaries, "tables": [{**t.to_json(), "notes": notes(t)} for t in tables]}
    return json.dumps(document, indent=2) + "\n"


def csv_document(tables: list[Table]) -> str:
    """The tables' CSV lines under one header line."""
    parts = [to_csv(t) for t in tables]
    return parts[0] + "".join(p.split("\n", 1)[1] for p in parts[1:]) if parts else ""
