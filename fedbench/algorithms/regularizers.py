"""Composable local regularizers (FedDr+ Sec. 3.4, Table 1): ``prox``, ``kd``, ``ntd``, ``ld``, ``fd``.

Any method takes them through its ``algorithm_params`` (``params.RegularizerSpec``)::

    regularizers = [{ name = "kd", weight = 0.1, tau = 3 }, { name = "prox", weight = 1.0 }]

The base class adds them to the method's own loss L_base (``Algorithm.objective``), so every method gets
them. θ_g is the round's received global model, used as a frozen teacher. Two ways of combining
(FedDr+ spec §3.3 and ambiguity 11):

- ``convex`` (default for kd/ntd/ld/fd), "as suggested in Eq. (4)": L = (1 − Σ w_j)·L_base + Σ w_j·R_j,
  i.e. weight = 1 − β with the paper's β = 0.9 → weight 0.1 [proposal];
- ``add`` (default for prox): L = L_base + Σ w_j·R_j. Prox with μ = weight = 1 added unweighted reproduces
  the Table 1 collapse at lr 5–6.5 [proposal].

With weight 0 a regularizer leaves its base method unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def distillation(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    """KD (Hinton): τ²·KL(softmax(z_g/τ) ‖ softmax(z/τ)), summed over classes, mean over the batch."""
    return tau**2 * F.kl_div(
        F.log_softmax(student / tau, dim=1), F.softmax(teacher / tau, dim=1), reduction="batchmean"
    )


def not_true_logits(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The B×(C−1) logits with each row's true class y removed (FedNTD's ``refine_as_not_true``)."""
    keep = torch.ones_like(logits, dtype=torch.bool).scatter_(1, y[:, None], False)
    return logits[keep].view(logits.shape[0], logits.shape[1] - 1)


def not_true_distillation(student: torch.Tensor, teacher: torch.Tensor, y: torch.Tensor, tau: float) -> torch.Tensor:
    """FedNTD Eq. (5)/(6): KD over the not-true classes only; the true-class logit of neither model enters."""
    return distillation(not_true_logits(student, y), not_true_logits(teacher, y), tau)


def logit_matching(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """LD (Kim et al. 2021): (1/C)·‖z − z_g‖², mean over the batch."""
    return F.mse_loss(student, teacher)


def feature_distillation(features: torch.Tensor, teacher_features: torch.Tensor) -> torch.Tensor:
    """FD (FedDr+ Eq. 4): (1/d)·‖f(x;θ) − f(x;θ_g)‖² on the raw (un-normalised) penultimate features."""
    return F.mse_loss(features.flatten(1), teacher_features.flatten(1))
