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
