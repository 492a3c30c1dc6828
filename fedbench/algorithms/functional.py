"""Tensor arithmetic the methods and the engine share: one flat vector of a model's parameters, and the mean over a
client's real samples when a packed round pads short batches."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def flat_parameters(parameters) -> torch.Tensor:
    """``nn.utils.parameters_to_vector`` for parameters in any memory format: ``reshape`` reads a channels-last
    tensor in logical (NCHW) order, where ``view`` would fail; for contiguous parameters it is the same vector."""
    return torch.cat([p.reshape(-1) for p in parameters])


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean over a client's real samples (mask 1), the padding of a short last batch left out."""
    return (values * mask).sum() / mask.sum()


def masked_cross_entropy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``task_loss`` of a classification batch (mean cross-entropy) over the real samples."""
    return masked_mean(F.cross_entropy(logits, y, reduction="none"), mask)
