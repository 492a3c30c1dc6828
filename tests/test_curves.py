"""A curve's figures (fedbench/curves.py): the summary a run stores keeps the curve's fractions and reaches the
recipe's targets in percent exactly as the report's figures do."""

from __future__ import annotations

import pytest

from fedbench import curves


def test_a_summary_keeps_fractions_and_reaches_targets_in_percent_as_the_report_does():
    from fedbench.recipes.views import TableView
    from fedbench.report.table import figure_of

    curve = [(1, 0.29), (2, 0.8), (3, 0.95), (5, 0.9)]  # round 4 not evaluated
    targets = [29, 80, 90, 95.5, 96]
    summary = curves.summarize(curve, targets)
    assert summary == {
        "best": 0.95,
        "best_round": 3,
        "final": 0.9,
        "last5_mean": pytest.approx((0.29 + 0.8 + 0.95 + 0.9) / 4, rel=1e-12),
        "last10_mean": pytest.approx((0.29 + 0.8 + 0.95 + 0.9) / 4, rel=1e-12),
        # 0.29 is 28.999999999999996 % (to_percent): the 29 % target is reached in round 2, in the report too
        "rounds_to_target": {"29": 2, "80": 2, "90": 3, "95.5": None, "96": None},
        "evaluated_rounds": 4,
    }
    for target in targets:
        view = TableView(name="t", figure="rounds_to_target", target=target)
        assert figure_of(view, curve) == summary["rounds_to_target"][f"{target:g}"]
    assert curves.summarize(curve)["rounds_to_target"] == {}
    assert curves.summarize([], [80]) == {
        "best": None,
        "best_round": None,
        "final": None,
        "last5_mean": None,
        "last10_mean": None,
        "rounds_to_target": {"80": None},
        "evaluated_rounds": 0,
    }
