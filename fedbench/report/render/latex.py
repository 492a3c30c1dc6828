"""LaTeX: a booktabs ``table`` per view, its notes as footnote-size lines (the marks need amssymb)."""

from __future__ import annotations

from fedbench.report.cells import Table
from fedbench.report.render.notes import column_names, flat_cell, header, notes, row_header, row_name


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
        ("⁺", r"$^{+}$"),
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
        f"\\caption{{{_latex_escape(header(table))}}}",
        f"\\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(_latex_escape(x) for x in [row_header(table), *column_names(table)]) + r" \\",
        r"\midrule",
    ]
    for row in table.rows:
        cells = [_latex_escape(flat_cell(table.cells.get((row, c)), figure)) for c in table.columns]
        lines.append(" & ".join([_latex_escape(row_name(table, row)), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    lines += [f"\\par\\footnotesize {_latex_escape(note)}" for note in notes(table)]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
