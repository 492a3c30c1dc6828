"""Cheap evaluation: inference mode, moderate batches, one host sync per evaluation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


@torch.inference_mode()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1000) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``model`` on (x, y)."""
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=x.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=x.device)
    for start in range(0, len(y), batch_size):
        logits = model(x[start: start + batch_size])
        targets = y[start: start + batch_size]
        loss_sum += F.cross_entropy(logits, targets, reduction="sum").double()
        correct += (logits.argmax(1) == targets).sum()
    model.train(was_training)
    n = max(1, len(y))
    return correct.item() / n, loss_sum.item() / n
