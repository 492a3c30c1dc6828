"""The interface every fedbench model provides.

A model is ``head ∘ features``: ``features(x)`` returns the penultimate representation the paper specs
name, ``head(z)`` maps it to logits. Methods that treat the classifier specially (FedRep, FedBABU,
MOON, FedNTD, FedTR, FedDr+, LG-Mix) use these two and the parameter-name helpers below, so they never
hard-code layer names.

Models whose encoder is an ``nn.Sequential`` can also name deeper cuts (FedImpro cuts ResNet-18 after
``layer2``): ``split_points()`` lists them, ``low(x, split)`` runs the encoder up to and including the
named child, ``high(h, split)`` runs the rest of the encoder and the head, so that
``high(low(x, s), s) == forward(x)`` for every ``s``.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from fedbench.errors import ConfigError

_BATCHNORM_TYPES = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


class FedModel(nn.Module):
    """Base class. Subclasses set ``self.encoder`` (x -> z), ``self.classifier`` (z -> logits) and
    ``self.feature_dim``; models with deeper named cuts set ``self.split_after`` (below)."""

    feature_dim: int
    encoder: nn.Module
    classifier: nn.Module
    #: split-point name -> name of the last child of ``self.encoder`` (an ``nn.Sequential``) that the
    #: low part ends with. Empty for models without named cuts.
    split_after: ClassVar[dict[str, str]] = {}

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def head(self, z: torch.Tensor) -> torch.Tensor:
        return self.classifier(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    # -- named split points -----------------------------------------------------------------------
    def split_points(self) -> list[str]:
        return list(self.split_after)

    def _split_index(self, split: str) -> int:
        if split not in self.split_after:
            known = ", ".join(self.split_after) or "none"
            raise ConfigError(f"{type(self).__name__} has no split point {split!r}; known split points: {known}")
        children = [name for name, _ in self.encoder.named_children()]
        return children.index(self.split_after[split])

    def low(self, x: torch.Tensor, split: str) -> torch.Tensor:
        """The low-level part: the encoder up to and including the split point."""
        index = self._split_index(split)
        assert isinstance(self.encoder, nn.Sequential)  # a model that names split points has a Sequential encoder
        return self.encoder[: index + 1](x)

    def high(self, h: torch.Tensor, split: str) -> torch.Tensor:
        """The high-level part: the rest of the encoder, then the head."""
        return self.head(self.high_features(h, split))

    def high_features(self, h: torch.Tensor, split: str) -> torch.Tensor:
        """The rest of the encoder only: the penultimate features ``features(x)`` of ``h = low(x, split)``."""
        index = self._split_index(split)
        assert isinstance(self.encoder, nn.Sequential)  # as in ``low``
        return self.encoder[index + 1 :](h)

    # -- parameter groups by name ---------------------------------------------------------------
    def head_parameter_names(self) -> list[str]:
        return [f"classifier.{n}" for n, _ in self.classifier.named_parameters()]

    def body_parameter_names(self) -> list[str]:
        head = set(self.head_parameter_names())
        return [n for n, _ in self.named_parameters() if n not in head]

    def batchnorm_module_names(self) -> list[str]:
        return [n for n, m in self.named_modules() if isinstance(m, _BATCHNORM_TYPES)]

    def batchnorm_parameter_names(self) -> list[str]:
        """Affine weights/biases of BatchNorm layers (FedBN keeps these and the buffers local)."""
        prefixes = tuple(f"{n}." for n in self.batchnorm_module_names())
        return [n for n, _ in self.named_parameters() if n.startswith(prefixes)]
