"""The LaTeX renderer (``fedbench/report/render/latex.py``): a booktabs table per view with escaped text, one row
per table row, the view's caption and notes as footnote-size lines; the report's summary as a list and the legend
once."""

from __future__ import annotations

from report_fixtures import small_table

from fedbench.report.render.latex import _latex_escape, report_latex, to_latex


def test_special_characters_are_escaped_and_the_backslash_first():
    assert _latex_escape(r"a_b & 50% #1 x^2 \ ") == r"a\_b \& 50\% \#1 x\^{}2 \textbackslash{} "
    assert _latex_escape("±Δ†‡⁺<>—–▲▼·✓↑↓≥≈") == (
        r"$\pm$$\Delta$$^\dagger$$^\ddagger$$^{+}$$<$$>$----$\blacktriangle$$\blacktriangledown$$\cdot$$\surd$"
        r"$\uparrow$$\downarrow$$\geq$$\approx$"
    )


def test_a_table_is_a_booktabs_tabular_with_a_line_per_row():
    lines = to_latex(small_table(caption="50% of runs")).splitlines()
    assert lines[:5] == [
        r"\begin{table}[t]",
        r"\centering",
        r"\caption{Best accuracy [scale=smoke]}",
        r"\begin{tabular}{lrr}",  # the row header, then one right-aligned column per column
        r"\toprule",
    ]
    assert lines[5] == r"algorithm & mnist & cifar10 \\"
    assert lines[6] == r"\midrule"
    assert lines[7].startswith(r"fedavg & 91.50 $\pm$ 0.50 (n=3) / paper 90.00 (+1.50) & 62.00")
    assert lines[8] == r"fed\_prox & 88.00 (n=1)* &  \\"  # the missing cell is empty
    assert lines[9:11] == [r"\bottomrule", r"\end{tabular}"]
    assert lines[11] == r"\par\footnotesize 50\% of runs"
    assert lines[-1] == r"\end{table}" and all(line.startswith(r"\par\footnotesize ") for line in lines[12:-1])


def test_without_a_caption_only_the_notes_follow_the_tabular():
    after = to_latex(small_table()).split(r"\end{tabular}")[1].strip().splitlines()
    assert after[-1] == r"\end{table}"
    assert not any("50" in line for line in after) and after[0].startswith(r"\par\footnotesize cell: best")


def test_the_report_has_the_summary_then_every_table_then_the_legend_once():
    text = report_latex([small_table("a"), small_table("b")])
    assert text.startswith("\\paragraph{Summary.}\n\\begin{itemize}\n\\item Reproduction\n\\begin{itemize}\n")
    assert text.count(r"\begin{table}[t]") == 2
    assert text.count(r"\paragraph{Legend.}") == 1
    legend = text.split(r"\paragraph{Legend.}")[1]
    assert r"* partial: fewer finished seeds than the recipe asks for.\par" in legend
    assert text.index(r"\paragraph{Summary.}") < text.index(r"\begin{table}") < text.index(r"\paragraph{Legend.}")
