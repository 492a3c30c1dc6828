"""FedDecorr (Shi et al., ICLR 2023, "Towards Understanding and Mitigating Dimensional Collapse in Heterogeneous
Federated Learning"): FedAvg whose clients add a dimensional-decorrelation term to their loss.

For a mini-batch's penultimate features Z ∈ R^{B×d}, each dimension standardised over the batch
(ẑ_j = (z_j − mean_j) / std_j), the correlation matrix is K = ẐᵀẐ / B and (Shi et al. Eqs. 5–6)

    L = L_task + β·L_FedDecorr,        L_FedDecorr = ‖K‖_F² / d²,

which penalises the off-diagonal correlations (the diagonal of K is 1 up to the ε in std): it keeps the local
features from collapsing onto a few dimensions. std is the biased (1/B) standard deviation with ε = 1e-8 inside
the root, so that a constant dimension gives 0 rather than a division by 0 [proposal]; a batch of one sample adds
nothing (its correlations are undefined) [code]. β = 0.1 [paper]; β = 0 is FedAvg. Not packed yet: a short
batch's padding would have to be masked out of the batch statistics.
"""

import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.params import FedDecorrParams


def decorrelation(features: torch.Tensor) -> torch.Tensor:
    """‖K‖_F² / d² of the batch's standardised features (Eq. 6)."""
    batch, dim = features.shape
    if batch < 2:
        return features.sum() * 0.0
    centred = features - features.mean(dim=0, keepdim=True)
    standardised = centred / torch.sqrt(centred.pow(2).mean(dim=0, keepdim=True) + 1e-8)
    correlation = standardised.T @ standardised / batch
    return correlation.pow(2).sum() / dim**2


class FedDecorr(Algorithm):
    """FedDecorr (Shi et al., ICLR 2023): a dimensional-decorrelation local term."""

    Params = FedDecorrParams
    params: FedDecorrParams

    def loss(self, ctx, x, y, logits):
        features = ctx.scratch["features"]
        assert features is not None  # L_FedDecorr reads features: every fedbench model has a features/head split
        return super().loss(ctx, x, y, logits) + self.params.beta * decorrelation(features)
