"""Classifier heads shared by the model families.

``classifier`` (a model parameter of the FedDr+ backbones) picks one of:

- ``linear``: a trainable ``nn.Linear`` (FedAvg, FedBABU, SCAFFOLD, FedNTD, FedExP). Bias on by default.
- ``etf``: a frozen simplex ETF, FedDr+ Eq. 3 (FedDr+, Dot-Regression). No bias, features L2-normalised,
  so the logits are cosines.
- ``orthonormal``: frozen rows that are the Gram–Schmidt orthonormalisation of a random init (SphereFed).
  No bias, features L2-normalised.
- ``fedetf``: FedETF's head, a trainable projection ``Linear(d, C, bias=False)``, L2 normalisation, a learnable
  temperature τ (init 1), then a frozen C×C simplex ETF (FedDr+ spec §2.4, "FedETF model").

Frozen weights are ``nn.Parameter`` with ``requires_grad=False``: they stay in ``parameters()`` and the
state dict (so they are checkpointed and counted as head parameters), receive no gradient, and an optimizer
built over ``parameters()`` skips them (weight decay never touches them, as the spec requires). The frozen
matrices are drawn from the torch RNG, so they are identical on every client for one model-init seed.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedbench.errors import ConfigError

CLASSIFIER_KINDS = ("linear", "etf", "orthonormal", "fedetf")


def _default_linear_weight(rows: int, cols: int) -> torch.Tensor:
    """A weight drawn as ``nn.Linear(cols, rows)`` draws it (kaiming-uniform, a=√5)."""
    weight = torch.empty(rows, cols)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    return weight


def simplex_etf(num_classes: int, dim: int) -> torch.Tensor:
    """A random C×d simplex ETF: unit-norm rows, pairwise cosine −1/(C−1), rows summing to zero.

    FedDr+ Eq. 3 and [code] ``Server.etf``: U (d×C, orthonormal columns) from the reduced QR of a default
    ``nn.Linear(d, C)`` weight, then V = sqrt(C/(C−1))·U·(I − 11ᵀ/C), stored transposed (``Linear.weight`` layout).
    """
    if num_classes < 2:
        raise ConfigError(f"a simplex ETF needs at least 2 classes, got num_classes={num_classes}")
    if dim < num_classes:
        raise ConfigError(
            f"a simplex ETF for {num_classes} classes needs feature dimension >= {num_classes}, got {dim}"
        )
    u, _ = torch.linalg.qr(_default_linear_weight(num_classes, dim).T)  # d×C
    centering = torch.eye(num_classes) - torch.full((num_classes, num_classes), 1.0 / num_classes)
    etf = math.sqrt(num_classes / (num_classes - 1)) * u @ centering
    return etf.T.contiguous()


def orthonormal_rows(num_classes: int, dim: int) -> torch.Tensor:
    """C×d with orthonormal rows: Gram–Schmidt of the rows of a default ``nn.Linear`` init (SphereFed [code]).

    QR with the signs fixed so that R has a positive diagonal is exactly classical Gram–Schmidt.
    """
    if dim < num_classes:
        raise ConfigError(f"{num_classes} orthonormal class vectors need feature dimension >= {num_classes}, got {dim}")
    q, r = torch.linalg.qr(_default_linear_weight(num_classes, dim).T)  # d×C
    signs = torch.sign(torch.diagonal(r))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return (q * signs).T.contiguous()


class Classifier(nn.Linear):
    """``nn.Linear`` that optionally L2-normalises its input first (logits become cosines × ‖row‖)."""

    def __init__(self, in_features: int, num_classes: int, bias: bool = True, normalize_features: bool = False):
        super().__init__(in_features, num_classes, bias=bias)
        self.normalize_features = normalize_features

    def freeze_to(self, weight: torch.Tensor) -> Classifier:
        with torch.no_grad():
            self.weight.copy_(weight)
        self.weight.requires_grad_(False)
        return self

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        if self.normalize_features:
            z = F.normalize(z, dim=1)
        return super().forward(z)

    def extra_repr(self) -> str:
        frozen = ", frozen" if not self.weight.requires_grad else ""
        return f"{super().extra_repr()}, normalize_features={self.normalize_features}{frozen}"


class ETFProjectionHead(nn.Module):
    """FedETF: projection (trainable) → L2 normalise → × τ (learnable, init 1) → frozen C×C simplex ETF."""

    def __init__(self, in_features: int, num_classes: int, normalize_features: bool = True, temperature: float = 1.0):
        super().__init__()
        self.projection = nn.Linear(in_features, num_classes, bias=False)
        self.temperature = nn.Parameter(torch.tensor(float(temperature)))
        self.normalize_features = normalize_features
        self.etf = Classifier(num_classes, num_classes, bias=False).freeze_to(simplex_etf(num_classes, num_classes))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        projected = self.projection(z)
        if self.normalize_features:
            projected = F.normalize(projected, dim=1)
        return self.etf(self.temperature * projected)


def build_classifier(
    kind: str, in_features: int, num_classes: int, bias: bool | None = None, normalize_features: bool | None = None
) -> nn.Module:
    """The head named by ``kind``; ``bias``/``normalize_features`` of None take the kind's default."""
    if kind not in CLASSIFIER_KINDS:
        raise ConfigError(f"unknown classifier {kind!r}; choose one of {', '.join(CLASSIFIER_KINDS)}")
    trainable = kind == "linear"
    if bias is None:
        bias = trainable
    if normalize_features is None:
        normalize_features = not trainable
    if bias and not trainable:
        # A frozen head with a bias would either train a bias next to a fixed matrix or freeze it at zero;
        # no method in the specs does either (FedDr+ spec §2.4: the normalised methods have no bias).
        raise ConfigError(f"classifier {kind!r} is frozen and has no bias; set classifier_bias = false")
    if kind == "fedetf":
        return ETFProjectionHead(in_features, num_classes, normalize_features)
    head = Classifier(in_features, num_classes, bias=bias, normalize_features=normalize_features)
    if kind == "etf":
        head.freeze_to(simplex_etf(num_classes, in_features))
    elif kind == "orthonormal":
        head.freeze_to(orthonormal_rows(num_classes, in_features))
    return head
