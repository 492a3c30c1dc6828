"""Metrics (fedbench/metrics.py) against independent computations: scikit-learn's AUC and balanced accuracy (also
as a run records them per client), and Dice, IoU and Hausdorff distance of masks counted by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench import metrics
from personal_run_fixtures import train


def test_extra_metrics_match_scikit_learn(tmp_path):
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 50)
    probs = rng.random((50, 2))
    probs /= probs.sum(1, keepdims=True)
    assert metrics.auc(labels, probs) == pytest.approx(roc_auc_score(labels, probs[:, 1]))
    assert metrics.balanced_accuracy(labels, probs.argmax(1)) == pytest.approx(
        balanced_accuracy_score(labels, probs.argmax(1))
    )
    assert metrics.auc(np.zeros(5, int), probs[:5]) is None
    _, records, _ = train(tmp_path, algorithm="fedavg", rounds=1, eval_metrics=["auc", "balanced_accuracy"])
    extra = records[-1].personal_metrics
    assert len(extra["auc"]) == 4 and all(0 <= v <= 1 for v in extra["balanced_accuracy"])


def test_segmentation_metrics_on_known_masks():
    truth = np.zeros((1, 1, 8, 8), bool)
    truth[0, 0, 2:6, 2:6] = True  # 16 pixels
    pred = np.zeros_like(truth)
    pred[0, 0, 2:6, 2:4] = True  # 8 of them
    assert metrics.dice(pred, truth) == pytest.approx(2 * 8 / 24)
    assert metrics.iou(pred, truth) == pytest.approx(8 / 16)
    assert metrics.dice(truth, truth) == metrics.iou(truth, truth) == 1.0
    assert metrics.hausdorff(truth, truth) == 0.0
    assert metrics.hausdorff(pred, truth, percentile=100) == pytest.approx(2.0)  # the far column is 2 px away
    assert metrics.hausdorff(np.zeros_like(truth), truth) == 1000.0


def test_a_summary_keeps_fractions_and_reaches_targets_in_percent_as_the_report_does():
    from fedbench.recipes.views import TableView
    from fedbench.report.table import figure_of

    curve = [(1, 0.29), (2, 0.8), (3, 0.95), (5, 0.9)]  # round 4 not evaluated
    targets = [29, 80, 90, 95.5, 96]
    summary = metrics.summarize(curve, targets)
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
    assert metrics.summarize(curve)["rounds_to_target"] == {}
    assert metrics.summarize([], [80]) == {
        "best": None,
        "best_round": None,
        "final": None,
        "last5_mean": None,
        "last10_mean": None,
        "rounds_to_target": {"80": None},
        "evaluated_rounds": 0,
    }
