"""Prediction scores (fedbench/engine/scores.py) against independent computations: scikit-learn's AUC and balanced
accuracy (also as a run records them per client), and Dice, IoU and Hausdorff distance of masks counted by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from fedbench.engine import scores
from personal_run_fixtures import train


def test_extra_metrics_match_scikit_learn(tmp_path):
    from sklearn.metrics import balanced_accuracy_score

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


def test_sensitivity_and_specificity_are_the_recalls_of_class_one_and_zero_on_binary_tasks_only():
    labels, predictions = np.array([0, 0, 0, 1, 1]), np.array([0, 1, 0, 1, 0])
    assert scores.sensitivity(labels, predictions, 2) == pytest.approx(1 / 2)  # TP 1, FN 1
    assert scores.specificity(labels, predictions, 2) == pytest.approx(2 / 3)  # TN 2, FP 1
    positives = np.array([1, 1, 1])  # a split without negatives: sensitivity only
    assert scores.sensitivity(positives, np.array([1, 0, 1]), 2) == pytest.approx(2 / 3)
    assert scores.specificity(positives, np.array([1, 0, 1]), 2) is None
    negatives = np.array([0, 0, 0, 0])  # without positives: specificity only
    assert scores.sensitivity(negatives, np.array([0, 1, 0, 0]), 2) is None
    assert scores.specificity(negatives, np.array([0, 1, 0, 0]), 2) == pytest.approx(3 / 4)
    three = np.array([0, 1, 2, 1])  # more classes: neither is defined
    assert scores.sensitivity(three, three, 3) is None and scores.specificity(three, three, 3) is None


def test_macro_f1_averages_each_present_class_f1_counting_a_predicted_only_class_as_zero():
    # class 0: F1 1; class 1: TP 1, FN 1 → 2·1/(2·1 + 0 + 1) = 2/3; class 2 (predicted, never true): 0
    assert scores.f1_macro(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 2])) == pytest.approx((1 + 2 / 3 + 0) / 3)


def test_dice_and_iou_average_per_image_and_channel_and_score_two_empty_masks_one():
    truth = np.zeros((2, 2, 4, 4), bool)
    pred = np.zeros_like(truth)
    truth[0, 0, 0, 0:2] = pred[0, 0, 0, 0] = True  # |P∩T| 1, |P| 1, |T| 2: Dice 2/3, IoU 1/2
    pred[0, 1, 3, 3] = True  # one predicted pixel, empty truth: 0 and 0
    truth[1, 0, 2, 2] = pred[1, 0, 2, 2] = True  # one pixel matched exactly: 1 and 1
    # image 1, channel 1: both empty: 1 and 1
    assert scores.dice(pred, truth) == pytest.approx((2 / 3 + 0 + 1 + 1) / 4)
    assert scores.iou(pred, truth) == pytest.approx((1 / 2 + 0 + 1 + 1) / 4)
    empty = np.zeros((1, 1, 3, 3), bool)
    assert scores.dice(empty, empty) == scores.iou(empty, empty) == 1.0


def _hd_by_hand(pred: np.ndarray, truth: np.ndarray, percentile: float) -> float:
    """medpy's hd95 of two 2-D masks, counted pixel by pixel: a border pixel is a mask pixel with a 4-neighbour
    outside the mask (beyond the image counts as inside), each border pixel's distance is the Euclidean distance to
    the nearest border pixel of the other mask, both directions pooled."""

    def border(mask):
        rows, cols = mask.shape
        out = []
        for r in range(rows):
            for c in range(cols):
                neighbours = [(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)]
                inside = [mask[i, j] for i, j in neighbours if 0 <= i < rows and 0 <= j < cols]
                if mask[r, c] and not all(inside):
                    out.append((r, c))
        return np.array(out, float)

    a, b = border(pred), border(truth)
    gaps = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    return float(np.percentile(np.hstack([gaps.min(1), gaps.min(0)]), percentile))


def test_hausdorff_is_medpys_hd95_per_image_and_channel_skipping_empty_truths():
    rng = np.random.default_rng(3)
    pred, truth = rng.random((2, 2, 9, 9)) > 0.5, rng.random((2, 2, 9, 9)) > 0.6
    truth[0, 0] = False  # an empty truth first: skipped, the others still count
    pred[1, 0] = False  # an empty prediction of a non-empty truth: 1000, and the next cell still counts
    truth[0, 1], pred[0, 1] = False, False  # a square, and the same square with a stray pixel 4√2 px off its corner:
    truth[0, 1, 1:5, 1:5] = pred[0, 1, 1:5, 1:5] = pred[0, 1, 8, 8] = True  # 24 distances 0, one 4√2
    cells = [(0, 1), (1, 1)]
    expected = (sum(_hd_by_hand(pred[i, j], truth[i, j], 95) for i, j in cells) + 1000.0) / 3
    assert scores.hausdorff(pred, truth) == pytest.approx(expected)
    assert _hd_by_hand(pred[0, 1], truth[0, 1], 95) == 0.0  # the 95th percentile of 24 zeros and one outlier
    assert _hd_by_hand(pred[0, 1], truth[0, 1], 96) == pytest.approx(0.04 * 4 * 2**0.5)
    # medpy's 4-connected borders: the centre of a plus is inside it, one pixel from its border
    plus, centre = np.zeros((1, 1, 5, 5), bool), np.zeros((1, 1, 5, 5), bool)
    plus[0, 0, 2, 1:4] = plus[0, 0, 1:4, 2] = centre[0, 0, 2, 2] = True
    assert scores.hausdorff(centre, plus, percentile=0) == 1.0
    assert scores.hausdorff(pred[:1, :1], truth[:1, :1]) is None  # nothing to measure


def test_auc_with_every_class_present_is_scikit_learns_on_the_probabilities_as_given():
    labels = np.array([0, 1, 2, 0, 1, 2])
    probs = np.array(
        [[0.5, 0.3, 0.2], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6], [0.3, 0.4, 0.3], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]
    )
    probs[1] *= 1 + 1e-7  # a row summing to 1 within rounding: renormalising it would break its tie with row 0
    expected = roc_auc_score(labels, probs, multi_class="ovr", average="macro", labels=[0, 1, 2])
    assert scores.auc(labels, probs) == expected
    # a split holding two of three classes: the binary AUC on the probabilities renormalised over those two
    present = probs[:4, :2] / probs[:4, :2].sum(1, keepdims=True)
    assert scores.auc(np.array([0, 1, 0, 0]), np.hstack([present * 0.9, np.full((4, 1), 0.1)])) == pytest.approx(
        roc_auc_score([0, 1, 0, 0], present[:, 1])
    )
    # four classes, three of them present: one-vs-rest over those three, renormalised over them
    labels4, probs4 = np.array([0, 1, 3, 0, 3, 1]), np.hstack([probs * 0.8, np.full((6, 1), 0.2)])[:, [0, 1, 3, 2]]
    kept = probs4[:, [0, 1, 3]] / probs4[:, [0, 1, 3]].sum(1, keepdims=True)
    assert scores.auc(labels4, probs4) == pytest.approx(
        roc_auc_score(labels4, kept, multi_class="ovr", average="macro", labels=[0, 1, 3])
    )
