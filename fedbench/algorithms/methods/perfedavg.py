"""Per-FedAvg (Fallah, Mokhtari & Ozdaglar, NeurIPS 2020), first-order (FO) version.

Local meta-step on two independent mini-batches D, D' (Per-FedAvg Alg. 1, FO approximation):
    w̃ = w − α ∇f_k(w; D)                  (inner step, α = the client lr)
    w ← w − β ∇f_k(w̃; D')                 (outer step: the gradient at w̃ applied to w)
so a local epoch takes half as many meta-steps as it has mini-batches. The server averages as FedAvg.
Evaluation adapts the global meta-model with ``adapt_steps`` SGD step(s) of size α on the client's own
training data (one step: LG-Mix and FedDr+ specs), then evaluates it.
β: LG-Mix spec [proposal] 1e-3 (FL-bench default); FedDr+ spec [proposal] 0.1 (FedBABU repo).
"""

import torch

from fedbench.algorithms.base import Algorithm, LocalPhase
from fedbench.algorithms.params import PerFedAvgParams


class PerFedAvg(Algorithm):
    Params = PerFedAvgParams
    params: PerFedAvgParams

    def local_phases(self, ctx):
        return [LocalPhase(ctx.batches(), step=self.meta_steps)]

    def meta_steps(self, ctx, batches):
        """Per-FedAvg Alg. 1 (FO): one meta-step per pair (D, D') of consecutive mini-batches."""
        params = [p for p in ctx.model.parameters() if p.requires_grad]
        inner = torch.optim.SGD(params, lr=ctx.lr)
        outer = torch.optim.SGD(params, lr=self.params.beta)
        batches = iter(batches)
        for first, second in zip(batches, batches):  # (D, D') pairs
            start = [p.detach().clone() for p in params]
            self.train_steps(ctx, inner, [first])  # w̃ = w − α∇f(w; D)
            outer.zero_grad(set_to_none=True)
            x, y = second
            self.objective(ctx, x, y, self.forward(ctx, x)).backward()  # ∇f(w̃; D')
            ctx.clip_gradients()
            with torch.no_grad():
                for p, p0 in zip(params, start):
                    p.copy_(p0)
            outer.step()  # w ← w − β∇f(w̃; D')

    def eval_model(self, ctx):
        if self.params.adapt_steps:
            ctx.model.train()
            optimizer = torch.optim.SGD([p for p in ctx.model.parameters() if p.requires_grad], lr=ctx.lr)
            self.train_steps(ctx, optimizer, ctx.batches(steps=self.params.adapt_steps))
        return ctx.model
