"""Render report tables: terminal (rich) and Markdown (``text``), LaTeX (``latex``), CSV and JSON (``csv_json``),
HTML (``html``: a table, and the self-contained report page). What every format shows alike — a cell's text, the
marks, the notes under a table — is in ``notes``."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from fedbench.report.cells import Table
from fedbench.report.render.csv_json import csv_document, to_json
from fedbench.report.render.html import page
from fedbench.report.render.latex import to_latex
from fedbench.report.render.notes import paper_summaries
from fedbench.report.render.text import to_markdown, to_rich

FORMATS = ("rich", "markdown", "latex", "csv", "json", "html")


def render(tables: list[Table], fmt: str) -> Any:
    """A string for every format except ``rich`` (a list of renderables). Every format but CSV ends (JSON: has
    "papers") with each paper's reproduction summary."""
    summaries = paper_summaries(tables)
    if fmt == "rich":
        return [to_rich(t) for t in tables] + [Text(s["line"]) for s in summaries]
    if fmt == "json":
        return to_json(tables, summaries)
    if fmt == "csv":
        return csv_document(tables)
    if fmt == "html":
        return page(tables, title="fedbench report")
    joiner = {"markdown": to_markdown, "latex": to_latex}[fmt]
    body = "\n".join(joiner(t) for t in tables)
    lines = [s["line"] for s in summaries]
    if fmt == "markdown":
        return "\n".join(f"**{line}**  " for line in lines) + "\n\n" + body
    return body + "".join(f"% {line}\n" for line in lines)


__all__ = ["FORMATS", "render"]
