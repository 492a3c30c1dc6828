"""Dot-Regression (FedDr+ Eq. 2; Yang et al. 2022's DR loss): a frozen simplex-ETF classifier V and

    L_DR = ½ · mean_b ( cos(f(x_b), v_{y_b}) − 1 )²,

on the L2-normalised feature (the logits of the ``etf`` head are exactly these cosines: unit-norm rows,
normalised features, no bias). This is FedDr+ with β = 1 (FedDr+ Table 1 "Dot-Regression", Fig. 6c);
FedDr+ itself is this method plus the ``fd`` regularizer with weight 1 − β = 0.1 (convex), i.e.
0.9·L_DR + 0.1·(1/d)‖f(x;θ) − f(x;θ_g)‖² (FedDr+ Eq. 4; ``params.FEDDR_PLUS_PARAMS``).

The loss itself (``dot_regression_loss``) is shared with the ``local`` method's ``loss = "dr"`` (FedDr+ Table 3
"Local only (L_DR)") and with fine-tuning's ``finetune.loss = "dr" | "dr_plus"`` (FedDr+ Table 8).

Model: build it with ``model_params.classifier = "etf"`` (checked when the run starts, ``check_model``).
lr: not given; FedDr+'s 0.35 / 5.0 [proposal, ambiguity 12].
"""

import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.fixed_classifier import require_classifier


def dot_regression_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """L_DR = ½·mean_b (cos_b − 1)², the cosines being the logits of an ``etf`` head: ⟨f/‖f‖, v_y⟩."""
    cosine = logits.gather(1, y[:, None]).squeeze(1)
    return 0.5 * ((cosine - 1) ** 2).mean()


class DotRegression(Algorithm):
    """Pull the normalised feature onto its class's ETF vector; the classifier never trains."""

    def check_model(self, model, setting):
        require_classifier(model, "etf", setting)

    def loss(self, ctx, x, y, logits):
        return dot_regression_loss(logits, y)
