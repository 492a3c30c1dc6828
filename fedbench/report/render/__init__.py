"""Render report tables: terminal (rich) and Markdown (``text``), LaTeX (``latex``), CSV and JSON (``csv_json``),
HTML (``html``: a table, and the self-contained report page). What every format shows alike — a cell's text, the
marks, the notes under a table, the summary and the legend — is in ``notes``.

Every format but CSV and JSON reads in the same order: the summary (per table, the methods significantly better or
worse than the baseline; per paper, the cells reproduced), the tables, then the legend of the marks once."""

from __future__ import annotations

from typing import Any

from fedbench.report.cells import Table
from fedbench.report.render.csv_json import csv_document, to_json
from fedbench.report.render.html import page
from fedbench.report.render.latex import report_latex
from fedbench.report.render.notes import paper_summaries
from fedbench.report.render.text import report_markdown, report_rich

FORMATS = ("rich", "markdown", "latex", "csv", "json", "html")


def render(tables: list[Table], fmt: str) -> Any:
    """A string for every format except ``rich`` (a list of renderables). JSON has each paper's reproduction
    summary ("papers") beside the tables."""
    if fmt == "rich":
        return report_rich(tables)
    if fmt == "json":
        return to_json(tables, paper_summaries(tables))
    if fmt == "csv":
        return csv_document(tables)
    if fmt == "html":
        return page(tables, title="fedbench report")
    if fmt == "markdown":
        return report_markdown(tables)
    return report_latex(tables)


__all__ = ["FORMATS", "render"]
