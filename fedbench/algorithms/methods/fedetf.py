"""FedETF (Li et al., ICCV 2023): a fixed simplex-ETF classifier after a learnable projection.

Head (model_params.classifier = "fedetf", ``fedbench.models.heads.ETFProjectionHead``): the feature goes
through a trainable projection Linear(d → C), is L2-normalised, scaled by a learnable temperature τ
(init 1) and classified by a frozen C×C simplex ETF. All trainable parts, τ included, are aggregated.

Local loss, the "balanced" softmax of FedDr+'s [code] (FedETF's balanced loss): with the client's class counts
n_{i,c},

    p_c ∝ n_{i,c}^β · exp(z_c),     L = −log p_y = CE(z + β·log n_i, y),

so classes the client does not hold drop out of its softmax. FedDr+ Tables 6/7 give (β, τ) = (1, 1),
read as the count exponent and the initial temperature [proposal, ambiguity 7]. lr: 0.05 / 0.5.
FedETF's local personalisation stage is not part of the global-FL method.
"""

import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.fixed_classifier import require_classifier
from fedbench.algorithms.params import FedETFParams


class FedETF(Algorithm):
    Params = FedETFParams
    params: FedETFParams

    def check_model(self, model, setting):
        require_classifier(model, "fedetf", setting)

    def begin_local(self, ctx):
        num_classes = ctx.model.classifier.etf.weight.shape[0]
        counts = torch.bincount(ctx.data.train_y[ctx.indices], minlength=num_classes).float()
        # log n^β, with 0^0 = 1 so that β = 0 is the plain softmax and log 0 = −inf drops absent classes
        ctx.scratch["log_prior"] = counts.pow(self.params.beta).log()

    def loss(self, ctx, x, y, logits):
        return F.cross_entropy(logits + ctx.scratch["log_prior"], y)
