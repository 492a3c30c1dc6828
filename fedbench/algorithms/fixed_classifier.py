"""Checks shared by the methods that train against a fixed classifier (SphereFed, FedETF, Dot-Regression).

The classifier itself is a model option (``fedbench.models.heads``, model parameter ``classifier``): it is
drawn once from the model-init seed, so every client holds the same frozen matrix, and it stays in the
flat parameter vector (averaging identical rows is exact, see ``weighted_average``). The methods only
verify when the run starts (``Algorithm.check_model``) that the model was built with the head they need, and
say which ``model_params`` to set otherwise.
"""

from __future__ import annotations

import torch
from torch import nn

from fedbench.errors import ConfigError
from fedbench.models.heads import ETFProjectionHead

# classifier kind -> the Gram matrix V·Vᵀ its C rows must have
_KINDS = {
    "orthonormal": lambda c: torch.eye(c),
    "etf": lambda c: (c / (c - 1)) * torch.eye(c) - torch.full((c, c), 1.0 / (c - 1)),
}


def require_classifier(model: nn.Module, kind: str, method: str) -> None:
    """Raise a ConfigError unless ``model`` has the frozen, feature-normalising head ``kind``
    (``orthonormal``, ``etf`` or ``fedetf``)."""
    hint = (
        f"{method} needs a fixed {kind} classifier: build the model with model_params.classifier = "
        f"{kind!r} (models with a 'classifier' option, e.g. vgg11, mobilenet)"
    )
    head = getattr(model, "classifier", None)
    if head is None:
        raise ConfigError(hint)
    if kind == "fedetf":
        if not isinstance(head, ETFProjectionHead) or head.etf.weight.requires_grad:
            raise ConfigError(hint)
        return
    weight = getattr(head, "weight", None)
    frozen = all(not p.requires_grad for p in head.parameters())
    if weight is None or not frozen or not getattr(head, "normalize_features", False):
        raise ConfigError(hint)
    with torch.no_grad():
        gram = weight.double() @ weight.double().T
        expected = _KINDS[kind](weight.shape[0]).to(gram)
    if not torch.allclose(gram, expected, atol=1e-4):
        raise ConfigError(hint + f" (the model's frozen classifier rows are not {kind})")
