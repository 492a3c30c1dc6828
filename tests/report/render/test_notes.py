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


def reach_table(pairs: int, tests: int, trials: int | None = None, added: int = 0):
    """``tests`` compared cells of ``pairs`` seed pairs each (p set, so each was tested), ``added`` more of them
    added with --add, in a table whose recipe says the paper ran ``trials``."""
    from fedbench.recipes.views import TableView
    from fedbench.report.cells import Comparison, Table

    cells = {}
    for i in range(tests + added):
        name = f"m{i}"
        comparison = Comparison(baseline="fedavg", pairs=pairs, p_value=0.5, outcome="same")
        cells[(name, "c")] = Cell(
            row=name, column="c", labels={"algorithm": name}, expected=pairs, comparison=comparison, added=i >= tests
        )
    view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="best")
    rows = [r for r, _ in cells]
    return Table("r", "p", view, "full", False, rows, ["c"], cells, "%", baseline="fedavg", trials=trials)


def test_a_table_says_when_its_seed_count_cannot_reach_significance():
    from fedbench.report.render.notes import significance_reach, significance_reach_summary

    three = reach_table(3, 2, trials=10)
    assert significance_reach(three) == [
        "3 seeds: the smallest possible p is 0.25; no cell can be marked (7 seeds could); the paper ran 10 trials."
    ]
    assert significance_reach_summary(three) == ["3 seeds: p ≥ 0.25, no cell can be marked"]
    # 6 pairs reach 0.031 alone, but Holm over 4 tests multiplies it past 0.05
    six = reach_table(6, 4, trials=1)
    assert significance_reach(six) == [
        "6 seeds: the smallest possible p is 0.031, 0.12 after Holm over 4 tests; no cell can be marked (8 seeds "
        "could); the paper ran 1 trial."
    ]
    assert significance_reach_summary(six) == ["6 seeds: p ≥ 0.031 (≥ 0.12 after Holm), no cell can be marked"]
    assert significance_reach(reach_table(10, 3)) == [] and significance_reach_summary(reach_table(10, 3)) == []
    # the added cells are a family of their own: one line each
    both = reach_table(2, 1, added=1)
    assert significance_reach(both) == [
        "2 seeds: the smallest possible p is 0.5; no cell can be marked (6 seeds could).",
        "2 seeds: the smallest possible p is 0.5; no added cell can be marked (6 seeds could).",
    ]
    assert significance_reach_summary(both)[1] == "2 seeds: p ≥ 0.5, no added cell can be marked"


def test_an_inconclusive_verdict_reads_with_the_seeds_that_would_decide_it():
    from fedbench.report.cells import Verdict
    from fedbench.report.render.notes import verdict_detail, verdict_mark

    assert verdict_mark(cell(verdict=Verdict("inconclusive", seeds_needed=8))) == " ? (≈8 seeds)"
    assert verdict_mark(cell(verdict=Verdict("inconclusive"))) == " ? (no seed count decides it)"
    assert verdict_mark(cell(verdict=Verdict("reproduced"))) == " ✓"
    assert verdict_mark(cell(verdict=Verdict("not_comparable", reason="one seed"))) == ""
    assert verdict_mark(cell()) == ""
    detail = Verdict(
        "lower", difference=-1.55, ci90_low=-1.73, ci90_high=-1.37, ci_low=-1.77, ci_high=-1.33, margin=1.0
    )
    detail.interval = "t, ours minus the paper's value"
    assert verdict_detail(detail) == (
        "ours − paper -1.55, 90% [-1.73, -1.37], 95% [-1.77, -1.33] vs ±1 (t, ours minus the paper's value): lower"
    )
