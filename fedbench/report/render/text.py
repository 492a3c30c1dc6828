"""The text formats: the terminal (a rich table per view) and Markdown."""

from __future__ import annotations

from rich.table import Table as RichTable

from fedbench.report.cells import Table
from fedbench.report.render.notes import (
    baseline_mark,
    column_names,
    diff_text,
    flat_cell,
    header,
    notes,
    ours_text,
    paper_text,
    row_header,
    row_name,
    verdict_mark,
)


def to_rich(table: Table):
    rich_table = RichTable(title=header(table), caption="\n".join(notes(table)), show_lines=True)
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
        rich_table.add_row(row_name(table, row), *values)
    return rich_table


def to_markdown(table: Table) -> str:
    figure = table.view.figure
    lines = [f"### {header(table)}", ""]
    if table.view.caption:
        lines += [table.view.caption, ""]
    lines.append("| " + " | ".join([row_header(table), *column_names(table)]) + " |")
    lines.append("|" + "---|" * (len(table.columns) + 1))

    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    for row in table.rows:
        cells = [escape(flat_cell(table.cells.get((row, c)), figure)) for c in table.columns]
        lines.append("| " + " | ".join([escape(row_name(table, row)), *cells]) + " |")
    lines.append("")
    lines += [f"- {note}" for note in notes(table)]
    return "\n".join(lines) + "\n"
