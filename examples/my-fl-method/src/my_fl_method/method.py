"""AdaProx: FedProx with a proximal weight of each client's own, adapted from one of its rounds to the next.

FedProx (Li et al., 2020) trains client k on F_k(w) + (μ/2)·‖w − w^t‖² (FedProx Eq. 2), one μ for every client, and
its authors suggest adapting μ to the loss (raise it when the loss rises, lower it when it falls). AdaProx does so
per client: client k trains with its own μ_k and, after each round it trains in,

    μ_k ← min(μ_max, μ_k·(1 + rate))   if its mean training loss rose since its previous round,
    μ_k ← μ_k / (1 + rate)             otherwise (and after its first round).

μ_k starts at ``mu``; with ``mu = 0`` every μ_k stays 0 and AdaProx is FedAvg, the setting it declares.

μ_k and the last loss are the client's persistent state: they live in ``ctx.state``, which the engine keeps per
client, checkpoints and restores when a run resumes. On the method object they would be lost on resume and carried
from one client to the next.
"""

import torch
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import ClientContext, ClientUpdate
from fedbench.algorithms.functional import proximal

from my_fl_method.params import AdaProxParams


class AdaProx(Algorithm):
    Params = AdaProxParams
    params: AdaProxParams

    def begin_local(self, ctx: ClientContext) -> None:
        ctx.state.setdefault("mu", self.params.mu)  # the client's first round: μ_k = mu

    def loss(self, ctx: ClientContext, x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        term = proximal(ctx.model.parameters(), ctx.global_tensors)  # ‖w − w^t‖² (FedProx Eq. 2)
        return super().loss(ctx, x, y, logits) + 0.5 * ctx.state["mu"] * term

    def end_local(self, ctx: ClientContext, update: ClientUpdate) -> None:
        if not update.num_steps:  # a client without a training sample learnt nothing about its loss
            return
        mu, last = ctx.state["mu"], ctx.state.get("last_loss")
        rose = last is not None and update.train_loss > last
        ctx.state["mu"] = min(self.params.mu_max, mu * (1 + self.params.rate)) if rose else mu / (1 + self.params.rate)
        ctx.state["last_loss"] = update.train_loss

    # The packed path (all clients of a round in one vmap, on CUDA): the same objective over the flat parameters.
    packed_step = True

    def packed_inputs(self, ctx: ClientContext) -> dict[str, torch.Tensor]:
        mu = ctx.state.setdefault("mu", self.params.mu)  # as begin_local
        weights = ctx.global_params
        return {"global": weights, "mu": torch.tensor(mu, dtype=weights.dtype, device=weights.device)}

    def packed_objective(self, call, params, inputs, x, y, mask):
        term = proximal([params], [inputs["global"]])  # Eq. 2 over the flat vector
        return super().packed_objective(call, params, inputs, x, y, mask) + 0.5 * inputs["mu"] * term

    def attach_flops_per_round(self, *, steps, num_params, **_):
        return 2.0 * steps * num_params  # w − w^t, then the scaled add, per step (as FedProx)
