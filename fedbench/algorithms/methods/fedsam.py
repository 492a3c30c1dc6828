"""FedSAM (Qu et al., ICML 2022, "Generalized Federated Learning via Sharpness Aware Minimization", Alg. 1;
Caldarola et al., ECCV 2022): FedAvg whose clients take sharpness-aware (SAM) local steps.

For each mini-batch the client computes the gradient g = ∇F_i(θ) of its objective, ascends to the worst point of
the ρ-ball around θ to first order and takes the gradient there (Qu et al. Eqs. 3–4, Alg. 1 lines 6–8):

    ε = ρ·g / ‖g‖,        g̃ = ∇F_i(θ + ε),        θ ← optimizer step with g̃ at θ,

‖·‖ the Euclidean norm over every trainable parameter. The second gradient is of the same batch and the same
objective (regularizers included); ε = 0 where g = 0 (SAM's code adds 1e-12 to the norm; fedbench skips the
ascent instead) [proposal]. The loss a step records is the one at θ. ρ = 0.05 [paper]; ρ = 0 is FedAvg bit for bit
(the ascent is skipped). Each step costs a second forward and backward pass. Not packed: the second pass needs the
batch, which the packed gradient hook does not see.
"""

import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.params import FedSAMParams


class FedSAM(Algorithm):
    """FedSAM (Qu et al., ICML 2022): sharpness-aware local steps of radius ρ."""

    Params = FedSAMParams
    params: FedSAMParams

    def objective(self, ctx, x, y, logits):
        ctx.scratch["sam_batch"] = (x, y)  # the batch the ascent re-evaluates in ``adjust_gradients``
        return super().objective(ctx, x, y, logits)

    def adjust_gradients(self, ctx):
        if self.params.rho > 0:
            self.sharpness_aware_gradient(ctx)

    def sharpness_aware_gradient(self, ctx) -> None:
        """Replace the gradients at θ by those at θ + ε (Eq. 4)."""
        trained = [p for p in ctx.model.parameters() if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in trained]))
        if float(norm) == 0:
            return
        with torch.no_grad():
            ascent = [self.params.rho * p.grad / norm for p in trained]  # ε = ρ g/‖g‖
            for p, e in zip(trained, ascent):
                p.add_(e)
        x, y = ctx.scratch["sam_batch"]
        for p in trained:
            p.grad = None
        super().objective(ctx, x, y, self.forward(ctx, x)).backward()  # g̃ = ∇F_i(θ + ε)
        with torch.no_grad():
            for p, e in zip(trained, ascent):
                p.sub_(e)  # back to θ: the step is taken there

    def attach_flops_per_round(self, *, steps, samples, batch_size, num_params, forward_flops, backward_flops):
        # a second forward and backward pass per step, plus ε (norm, scale) and its add and subtract
        return steps * (batch_size * (forward_flops + backward_flops) + 4.0 * num_params)
