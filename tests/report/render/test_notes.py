"""How a cell's missing values read: ">R" only where a target was not reached within R rounds; a value
missing at a round (its run diverged before it) is counted as missing, not as "not reached"."""

from fedbench.report.render.notes import ours_text
from fedbench.report.table import Cell


def cell(**fields) -> Cell:
    return Cell(row="r", column="c", labels={}, expected=3, n=3, rounds_limit=20, **fields)


def test_rounds_to_target_counts_seeds_beyond_the_limit():
    text = ours_text(cell(values=[12.0, 14.0, None], mean=13.0, std=1.0, not_reached=1), "rounds_to_target")
    assert text.startswith("13 ± 1 (1 >20) (n=3)")


def test_value_at_round_counts_missing_values_of_diverged_runs():
    text = ours_text(cell(values=[30.2, None, None], mean=30.2, not_reached=2, diverged=2), "value_at_round")
    assert text == "30.20 (2 of 3 missing) (n=3)†"
    assert ">" not in text


def summary_table(outcomes: dict[tuple[str, str], str | None]):
    """A table of ``algorithm`` rows against fedavg, a cell per (algorithm, case) with the given outcome (None:
    no comparison, e.g. no finished run)."""
    from fedbench.recipes.views import TableView
    from fedbench.report.cells import Comparison, Table

    cells = {}
    for (algorithm, case), outcome in outcomes.items():
        comparison = None if outcome is None else Comparison(baseline="fedavg", pairs=3, outcome=outcome)
        labels = {"algorithm": algorithm, "case": case}
        cells[(algorithm, case)] = Cell(row=algorithm, column=case, labels=labels, expected=3, comparison=comparison)
    view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="best")
    rows = list(dict.fromkeys(r for r, _ in outcomes))
    columns = list(dict.fromkeys(c for _, c in outcomes))
    return Table("r", "p", view, "full", False, rows, columns, cells, "%", baseline="fedavg")


def test_the_summary_says_per_method_which_way_it_differs_from_the_baseline():
    from fedbench.report.render.notes import comparison_summary

    table = summary_table(
        {
            ("fedavg", "a"): None,
            ("fedavg", "b"): None,
            ("fedprox", "a"): "better",
            ("fedprox", "b"): "same",
            ("moon", "a"): "worse",
            ("moon", "b"): "",  # fewer than two seed pairs
        }
    )
    assert comparison_summary(table) == [
        "fedprox: ▲ better than fedavg in 1, · no significant difference in 1 of 2 cells",
        "moon: ▼ worse than fedavg in 1, not tested in 1 of 2 cells",
    ]
    untested = summary_table({("fedavg", "a"): None, ("fedprox", "a"): None, ("moon", "a"): ""})
    assert comparison_summary(untested) == [
        "no method tested against fedavg yet (fewer than two seed pairs in every cell)"
    ]
