"""Scores of a model's predictions beyond accuracy, computed in evaluation from one client's (or the test set's)
labels and predictions: AUC, balanced accuracy, sensitivity, specificity and macro F1 (Camelyon17 and BCI, LG-Mix
Tables 7 and 10), Dice, IoU and Hausdorff distance for segmentation (retinal, LG-Mix Table 3). Their names and units
are the metric catalogue's (``fedbench.vocab.metrics``).
"""

from __future__ import annotations

import warnings

import numpy as np


def auc(labels: np.ndarray, probabilities: np.ndarray) -> float | None:
    """ROC AUC: binary on p(class 1) (LG-Mix [code] ``roc_auc_score``), one-vs-rest macro for more classes, over
    the classes the labels hold (their probabilities renormalised; two of them: the binary AUC). None when the
    labels hold a single class (AUC is undefined)."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import roc_auc_score

    present = np.unique(labels)
    if len(present) < 2:
        return None
    if len(present) < probabilities.shape[1]:
        probabilities = probabilities[:, present] / probabilities[:, present].sum(1, keepdims=True)
    if len(present) == 2:  # one-vs-rest of two classes is the binary AUC of the second (and scikit-learn wants 1-D)
        return float(roc_auc_score(labels == present[1], probabilities[:, 1]))
    return float(roc_auc_score(labels, probabilities, multi_class="ovr", average="macro", labels=present))


def balanced_accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
    """Mean per-class recall over the classes present in ``labels``."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import balanced_accuracy_score

    with warnings.catch_warnings():  # a client's model may predict classes its test split lacks
        warnings.simplefilter("ignore", UserWarning)
        return float(balanced_accuracy_score(labels, predictions))


def _binary(labels: np.ndarray, num_classes: int, positive: int) -> bool:
    """A two-class task whose labels hold at least one sample of class ``positive``: where the recall of that
    class is defined."""
    return num_classes == 2 and bool((labels == positive).any())


def sensitivity(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> float | None:
    """Sensitivity = recall of class 1, TP / (TP + FN) (LG-Mix [code]: ``recall_score``); binary tasks only. None
    for more classes or a test split without positives."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import recall_score

    if not _binary(labels, num_classes, 1):
        return None
    return float(recall_score(labels, predictions, pos_label=1, average="binary"))


def specificity(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> float | None:
    """Specificity = TN / (TN + FP), the recall of class 0 (LG-Mix [code]: tn / (tn + fp)); binary tasks only.
    None for more classes or a test split without negatives."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import recall_score

    if not _binary(labels, num_classes, 0):
        return None
    return float(recall_score(labels, predictions, pos_label=0, average="binary"))


def f1_macro(labels: np.ndarray, predictions: np.ndarray) -> float:
    """Macro F1: the unweighted mean over classes of 2·precision·recall / (precision + recall), over the classes
    present in the labels or the predictions (scikit-learn's ``f1_score(average="macro")``, LG-Mix [code]); a
    class without true or predicted samples scores 0."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import f1_score

    return float(f1_score(labels, predictions, average="macro", zero_division=0))


def _overlap(pred: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per image and channel (N, C): |P ∩ T|, |P|, |T| of boolean masks (N, C, H, W)."""
    axes = tuple(range(2, pred.ndim))
    return (pred & truth).sum(axes), pred.sum(axes), truth.sum(axes)


def dice(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean over images and channels of 2|P∩T| / (|P| + |T|) (1 when both are empty)."""
    inter, p, t = _overlap(pred.astype(bool), truth.astype(bool))
    return float(np.mean(np.where(p + t > 0, 2 * inter / np.maximum(p + t, 1), 1.0)))


def iou(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean over images and channels of |P∩T| / |P∪T| (1 when both are empty)."""
    inter, p, t = _overlap(pred.astype(bool), truth.astype(bool))
    union = p + t - inter
    return float(np.mean(np.where(union > 0, inter / np.maximum(union, 1), 1.0)))


def _surface_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distances from the border pixels of mask ``a`` to the border of mask ``b`` (medpy's definition)."""
    # local: keeps scipy out of run's start-up
    from scipy import ndimage

    structure = ndimage.generate_binary_structure(a.ndim, 1)
    border_a = a ^ ndimage.binary_erosion(a, structure=structure, border_value=1)
    border_b = b ^ ndimage.binary_erosion(b, structure=structure, border_value=1)
    return ndimage.distance_transform_edt(~border_b)[border_a]


def hausdorff(pred: np.ndarray, truth: np.ndarray, percentile: float = 95.0, empty: float = 1000.0) -> float | None:
    """Mean over images and channels of the (95th-percentile) symmetric Hausdorff distance in pixels, as
    medpy's ``hd95`` (the percentile of both directed surface-distance sets pooled; LG-Mix [code] util).
    An empty prediction of a non-empty mask scores ``empty`` (1000, [code]); empty masks are skipped."""
    pred, truth = pred.astype(bool), truth.astype(bool)
    values = []
    for p_img, t_img in zip(pred.reshape(-1, *pred.shape[2:]), truth.reshape(-1, *truth.shape[2:])):
        if not t_img.any():
            continue
        if not p_img.any():
            values.append(empty)
            continue
        pooled = np.hstack([_surface_distances(p_img, t_img), _surface_distances(t_img, p_img)])
        values.append(float(np.percentile(pooled, percentile)))  # percentile 100: the maximum, exactly
    return float(np.mean(values)) if values else None
