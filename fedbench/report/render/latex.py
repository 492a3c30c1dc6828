"""LaTeX: the summary as a list, a booktabs ``table`` per view with its own notes as footnote-size lines, then the
legend of the marks once as a footnote-size note (the marks need amssymb)."""

from __future__ import annotations

from fedbench.report.cells import Table
from fedbench.report.render.claim_lines import claims_summary
from fedbench.report.render.notes import (
    column_names,
    flat_cell,
    has_grid,
    header,
    legend,
    row_header,
    row_name,
    summary,
    table_notes,
)


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
        ("τ", r"$\tau$"),
        ("†", r"$^\dagger$"),
        ("‡", r"$^\ddagger$"),
        ("⁺", r"$^{+}$"),
        (">", r"$>$"),
        ("<", r"$<$"),
        ("—", "--"),
        ("–", "--"),
        ("▲", r"$\blacktriangle$"),  # amssymb
        ("▼", r"$\blacktriangledown$"),
        ("·", r"$\cdot$"),
        ("✓", r"$\surd$"),
        ("↑", r"$\uparrow$"),
        ("↓", r"$\downarrow$"),
        ("≥", r"$\geq$"),
        ("≈", r"$\approx$"),
    ):
        text = text.replace(a, b)
    return text


def to_latex(table: Table) -> str:
    figure = table.view.figure
    spec = "l" + "r" * len(table.columns)
    lines = [r"\begin{table}[t]", r"\centering", f"\\caption{{{_latex_escape(header(table))}}}"]
    if has_grid(table):
        lines += [
            f"\\begin{{tabular}}{{{spec}}}",
            r"\toprule",
            " & ".join(_latex_escape(x) for x in [row_header(table), *column_names(table)]) + r" \\",
            r"\midrule",
        ]
        for row in table.rows:
            cells = [_latex_escape(flat_cell(table.cells.get((row, c)), figure)) for c in table.columns]
            lines.append(" & ".join([_latex_escape(row_name(table, row)), *cells]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}"]
    if table.view.caption:
        lines.append(f"\\par\\footnotesize {_latex_escape(table.view.caption)}")
    lines += [f"\\par\\footnotesize {_latex_escape(note)}" for note in table_notes(table)]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def report_latex(tables: list[Table]) -> str:
    """The LaTeX report: the summary as an itemized list, the tables, then the legend once as a note."""
    lines = [r"\paragraph{Summary.}", r"\begin{itemize}"]
    for heading, items in summary(tables) + claims_summary(tables):
        lines += [f"\\item {_latex_escape(heading)}", r"\begin{itemize}"]
        lines += [f"\\item {_latex_escape(item)}" for item in items]
        lines.append(r"\end{itemize}")
    lines.append(r"\end{itemize}")
    body = "\n".join(lines) + "\n" + "".join(to_latex(table) for table in tables)
    notes = legend(tables)
    if notes:
        body += "\\paragraph{Legend.}\n{\\footnotesize\n" + "".join(f"{_latex_escape(n)}\\par\n" for n in notes) + "}\n"
    return body
