"""Default training losses per task (``DatasetMeta.task``): cross-entropy for classification, Dice loss for
segmentation. Shared by ``Algorithm.loss`` and the engine's evaluation, so the test loss is the training objective."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def soft_dice_loss(logits: torch.Tensor, masks: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    """1 − soft Dice per image and channel, (N, C): 1 − (2 Σ p·g + s) / (Σ p + Σ g + s) with p = sigmoid(logits).

    LG-Mix trains the U-Net with "dice loss (Milletari et al., 2016)" [paper §5.1, App. D; lgmix.md §2.2]; the
    channels (disc, cup) are independent sigmoids, 2 output channels with sigmoid being the spec's [proposal].
    [proposal] plain (not squared) sums in the denominator and smoothing s = 1 as in the med-air U-Net code bases:
    a perfect prediction, and an empty channel predicted empty, cost 0."""
    probabilities = torch.sigmoid(logits)
    masks = masks.to(probabilities.dtype)
    dims = tuple(range(2, logits.dim()))
    intersection = (probabilities * masks).sum(dims)
    total = probabilities.sum(dims) + masks.sum(dims)
    return 1.0 - (2.0 * intersection + smooth) / (total + smooth)


def task_loss(task: str, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean default loss of a batch: cross-entropy (classification) or Dice loss (segmentation)."""
    if task == "segmentation":
        return soft_dice_loss(logits, targets).mean()
    return F.cross_entropy(logits, targets)
