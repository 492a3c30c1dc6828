"""Cheap evaluation: inference mode, moderate batches, one host sync per evaluation.

The primary metric depends on the task (``DatasetMeta.task``): accuracy for classification; for segmentation
the mean Dice over images and mask channels (optic disc and cup, LG-Mix Table 3) of the prediction
sigmoid > 0.5 (LG-Mix [code] util), which equals ``fedbench.engine.scores.dice``. The loss is the task's training loss.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedbench.algorithms.losses import soft_dice_loss
from fedbench.settings import EVAL_BATCH_SIZE

# Segmentation outputs are per pixel: cap an evaluation batch at this many pixels (64 images of 256×256), so a
# U-Net's activations for a full evaluation batch do not exhaust memory.
SEGMENTATION_EVAL_PIXELS = 1 << 22


def eval_batch_size(batch_size: int, x: torch.Tensor, task: str = "classification") -> int:
    if task == "segmentation" and x.dim() > 2:
        pixels = math.prod(x.shape[2:])  # per image and channel; from the shape, so an empty split has a size too
        return max(1, min(batch_size, SEGMENTATION_EVAL_PIXELS // pixels))
    return batch_size


def dice_scores(logits: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Dice of the thresholded prediction per image and channel (N, C), float64: 2|P∩T| / (|P| + |T|), 1 when
    both are empty (as ``fedbench.engine.scores.dice``)."""
    pred, truth = torch.sigmoid(logits) > 0.5, masks > 0.5
    dims = tuple(range(2, logits.dim()))
    intersection = (pred & truth).sum(dims).double()
    total = (pred.sum(dims) + truth.sum(dims)).double()
    return torch.where(total > 0, 2 * intersection / total.clamp_min(1), torch.ones_like(total))


@torch.inference_mode()
def evaluate(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = EVAL_BATCH_SIZE, task: str = "classification"
) -> tuple[float, float]:
    """(primary metric, mean loss) of ``model`` on (x, y): (accuracy, cross-entropy) for classification,
    (mean Dice over images and channels, Dice loss) for segmentation."""
    was_training = model.training
    model.eval()
    batch_size = eval_batch_size(batch_size, x, task)
    score_sum = torch.zeros((), dtype=torch.float64, device=x.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=x.device)
    for start in range(0, len(y), batch_size):
        logits = model(x[start : start + batch_size])
        targets = y[start : start + batch_size]
        if task == "segmentation":
            loss_sum += soft_dice_loss(logits, targets).mean(1).sum().double()
            score_sum += dice_scores(logits, targets).mean(1).sum()
        else:
            loss_sum += F.cross_entropy(logits, targets, reduction="sum").double()
            score_sum += (logits.argmax(1) == targets).sum()
    model.train(was_training)
    n = max(1, len(y))
    return score_sum.item() / n, loss_sum.item() / n
