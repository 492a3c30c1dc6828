"""Prediction scores (fedbench/engine/scores.py) against independent computations: scikit-learn's AUC and balanced
accuracy (also as a run records them per client), and Dice, IoU and Hausdorff distance of masks counted by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.engine import scores
from personal_run_fixtures import train


def test_extra_metrics_match_scikit_learn(tmp_path):
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 50)
    probs = rng.random((50, 2))
    probs /= probs.sum(1, keepdims=True)
    assert scores.auc(labels, probs) == pytest.approx(roc_auc_score(labels, probs[:, 1]))
    assert scores.balanced_accuracy(labels, probs.argmax(1)) == pytest.approx(
        balanced_accuracy_score(labels, probs.argmax(1))
    )
    assert scores.auc(np.zeros(5, int), probs[:5]) is None
    _, records, _ = train(tmp_path, algorithm="fedavg", rounds=1, eval_metrics=["auc", "balanced_accuracy"])
    extra = records[-1].personal_metrics
    assert len(extra["auc"]) == 4 and all(0 <= v <= 1 for v in extra["balanced_accuracy"])


def test_segmentation_metrics_on_known_masks():
    truth = np.zeros((1, 1, 8, 8), bool)
    truth[0, 0, 2:6, 2:6] = True  # 16 pixels
    pred = np.zeros_like(truth)
    pred[0, 0, 2:6, 2:4] = True  # 8 of them
    assert scores.dice(pred, truth) == pytest.approx(2 * 8 / 24)
    assert scores.iou(pred, truth) == pytest.approx(8 / 16)
    assert scores.dice(truth, truth) == scores.iou(truth, truth) == 1.0
    assert scores.hausdorff(truth, truth) == 0.0
    assert scores.hausdorff(pred, truth, percentile=100) == pytest.approx(2.0)  # the far column is 2 px away
    assert scores.hausdorff(np.zeros_like(truth), truth) == 1000.0
