"""Tensor arithmetic the methods and the engine share: one flat vector of a model's parameters, the proximal term,
and the mean over a client's real samples when a packed round pads short batches."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F


def flat_parameters(parameters) -> torch.Tensor:
    """``nn.utils.parameters_to_vector`` for parameters in any memory format: ``reshape`` reads a channels-last
    tensor in logical (NCHW) order, where ``view`` would fail; for contiguous parameters it is the same vector."""
    return torch.cat([p.reshape(-1) for p in parameters])


def proximal(params: Iterable[torch.Tensor], anchors: Iterable[torch.Tensor]) -> torch.Tensor | float:
    """‖w − w_a‖², summed tensor by tensor over the parameters being trained: the proximal term of FedProx Eq. 2 and
    Ditto Eq. 2, FedDyn's ‖θ − θ^{t−1}‖² and the ``prox`` regularizer, without their μ/2 (λ/2, α/2), the anchor w_a
    being the round's global model w^t. A parameter that does not require grad (a fixed ETF classifier, a part a
    phase freezes) is left out: its term has no gradient, so it would only shift the reported loss by a constant
    (FedRep's frozen head, trained earlier in the round, sits away from w^t). The packed step passes its flat vector
    as one tensor: packed models have no frozen parameter, and inside ``torch.func.grad`` the vector requires grad."""
    return sum(((p - a) ** 2).sum() for p, a in zip(params, anchors) if p.requires_grad)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean over a client's real samples (mask 1), the padding of a short last batch left out."""
    return (values * mask).sum() / mask.sum()


def masked_cross_entropy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``task_loss`` of a classification batch (mean cross-entropy) over the real samples."""
    return masked_mean(F.cross_entropy(logits, y, reduction="none"), mask)
