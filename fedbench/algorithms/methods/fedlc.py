"""FedLC (Zhang et al., ICML 2022): federated learning with label-distribution-calibrated logits.

A client k with n_{k,c} training samples of class c calibrates every logit before the cross-entropy:
  L_cal(x, y) = −log softmax_y( f(x) − τ · n_k^{−1/4} )                                    (FedLC §4, the calibrated loss L_cal)
so rare local classes are pushed down less than frequent ones are pulled up, the margin growing as n_{k,c}^{−1/4}.
The softmax runs over all classes, as the authors' and the FL libraries' code computes it (the paper's printed
denominator leaves y out) [code]; a class the client does not hold has its count taken as 10⁻⁸ [code], i.e. a
margin τ·100 that keeps it out of the local softmax. τ = 1 is FL-bench's default [code] (the paper tunes τ).
The server is FedAvg; evaluation uses the plain logits (the calibration is a training loss only). τ = 0 is FedAvg.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from fedbench.algorithms.base import Algorithm, model_outputs
from fedbench.algorithms.functional import masked_cross_entropy
from fedbench.algorithms.params import FedLCParams

ABSENT_COUNT = 1e-8  # [code] the count of a class the client does not hold


def calibration(labels: torch.Tensor, classes: int, tau: float, dtype: torch.dtype) -> torch.Tensor:
    """τ · n_{k,c}^{−1/4} for every class c of a client's training labels (the term L_cal subtracts)."""
    counts = torch.bincount(labels, minlength=classes).to(dtype)
    return tau * counts.clamp(min=ABSENT_COUNT).pow(-0.25)


class FedLC(Algorithm):
    Params = FedLCParams
    params: FedLCParams

    def bind_model(self, spec, model, input_shape, num_classes):
        super().bind_model(spec, model, input_shape, num_classes)
        self._classes = num_classes

    def begin_local(self, ctx):
        ctx.scratch["calibration"] = self._calibration(ctx)

    def _calibration(self, ctx) -> torch.Tensor:
        return calibration(ctx.data.train_y[ctx.indices], self._classes, self.params.tau, ctx.global_params.dtype)

    def loss(self, ctx, x, y, logits):
        return F.cross_entropy(logits - ctx.scratch["calibration"].to(logits.dtype), y)  # L_cal

    packed_step = True

    def packed_inputs(self, ctx):
        return {"calibration": self._calibration(ctx)}

    def packed_objective(self, call, params, inputs, x, y, mask):
        logits = call(lambda model, x: model_outputs(model, x)[0], params, x)
        return masked_cross_entropy(logits - inputs["calibration"].to(logits.dtype), y, mask)  # L_cal
