"""The text formats: the terminal (rich) and Markdown. A report reads in one order in both: the summary first,
then the tables (each with its own notes), then the legend of the marks once."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table as RichTable
from rich.text import Text

from fedbench.report.cells import Table
from fedbench.report.render.claim_lines import claims_summary
from fedbench.report.render.notes import (
    baseline_mark,
    column_names,
    diff_text,
    flat_cell,
    has_grid,
    header,
    legend,
    ours_text,
    paper_text,
    row_header,
    row_name,
    summary,
    table_notes,
    verdict_mark,
)


class Indented:
    """A line that wraps at the terminal's width, its wrapped part indented as its first (no trailing blanks)."""

    def __init__(self, line: str, indent: int, style: str = ""):
        self.text, self.indent = Text(line, style=style), indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width - self.indent, 1)
        for part in self.text.wrap(console, width, overflow="fold"):
            part.rstrip()
            yield Text(" " * self.indent) + part


def to_rich(table: Table) -> Group:
    """A table with its title and caption above it and its own notes below it, all left-aligned: the title and notes
    wrap at the terminal's width, not the table's."""
    multiline = any(cell.published is not None for cell in table.cells.values())  # ours above the paper's value
    rich_table = RichTable(show_lines=multiline)
    rich_table.add_column(row_header(table), style="bold", overflow="fold")
    for column in column_names(table):
        rich_table.add_column(column, justify="right", overflow="fold")
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
        rich_table.add_row(row_name(table, row), *values)
    parts: list[Any] = [Indented(header(table), 0, "bold")]
    if table.view.caption:
        parts.append(Indented(table.view.caption, 0))
    if has_grid(table):
        parts.append(rich_table)
    parts += [Indented(note, 0, "dim") for note in table_notes(table)]
    return Group(*parts)


def summary_rich(tables: list[Table]) -> Group:
    parts: list[Any] = [Text("Summary", style="bold")]
    for heading, lines in summary(tables) + claims_summary(tables):
        parts.append(Indented(heading, 2))
        parts += [Indented(line, 4) for line in lines]
    return Group(*parts)


def report_rich(tables: list[Table]) -> list[Any]:
    """The terminal report: the summary, each table after a blank line, then the legend once."""
    items: list[Any] = [summary_rich(tables)]
    for table in tables:
        items += [Text(""), to_rich(table)]
    lines = legend(tables)
    if lines:
        items += [Text(""), Group(Text("Legend", style="bold"), *(Indented(line, 2) for line in lines))]
    return items


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(table: Table) -> str:
    figure = table.view.figure
    lines = [f"### {header(table)}", ""]
    if table.view.caption:
        lines += [table.view.caption, ""]
    if has_grid(table):
        lines.append("| " + " | ".join(_escape(x) for x in [row_header(table), *column_names(table)]) + " |")
        lines.append("|" + "---|" * (len(table.columns) + 1))
        for row in table.rows:
            cells = [_escape(flat_cell(table.cells.get((row, c)), figure)) for c in table.columns]
            lines.append("| " + " | ".join([_escape(row_name(table, row)), *cells]) + " |")
        lines.append("")
    lines += [f"- {note}" for note in table_notes(table)]
    return "\n".join(lines) + "\n"


def report_markdown(tables: list[Table]) -> str:
    """The Markdown report: the summary, the tables, then the legend once."""
    out = ["### Summary", ""]
    for heading, lines in summary(tables) + claims_summary(tables):
        out.append(f"- {heading}")
        out += [f"  - {line}" for line in lines]
    body = "\n".join(out) + "\n"
    for table in tables:
        body += "\n" + to_markdown(table)
    lines = legend(tables)
    if lines:
        body += "\n### Legend\n\n" + "".join(f"- {line}\n" for line in lines)
    return body
