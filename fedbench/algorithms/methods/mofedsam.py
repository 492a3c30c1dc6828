"""MoFedSAM (Qu et al., ICML 2022, Alg. 2): FedSAM's local steps (``fedsam.py``) with client-level momentum.

The server sends the round's global direction Δ^t (gradient units, 0 in round 1); every local step mixes it into
the sharpness-aware gradient g̃ (Alg. 2, after FedCM, Xu et al. 2021):

    v = α·g̃ + (1 − α)·Δ^t,        θ ← optimizer step with v,

and the server, with w̄ the sample-weighted average of the clients' models and K̄ = Σ p_i K_i their mean step count,

    Δ^{t+1} = (w^t − w̄) / (η_l·K̄),        w^{t+1} = w^t − η_g·η_l·K̄·Δ^{t+1} = w^t + η_g·(w̄ − w^t),

η_l the round's client learning rate. (The paper's clients take K steps each; K̄ is the mean for unequal step
counts [proposal].) α = 0.1 and ρ = 0.05 [paper], η_g = 1. This momentum lives on the clients' steps, not on the
server: α = 1 with ρ = 0 is FedAvg (η_g = 1 returns the average itself).
"""

import torch

from fedbench.algorithms.base import average_buffers, weighted_average
from fedbench.algorithms.context import param_views
from fedbench.algorithms.methods.fedsam import FedSAM
from fedbench.algorithms.params import MoFedSAMParams


class MoFedSAM(FedSAM):
    """MoFedSAM (Qu et al., ICML 2022): FedSAM with client-level momentum."""

    Params = MoFedSAMParams
    params: MoFedSAMParams

    def init_server(self, server):
        server.state["direction"] = torch.zeros_like(server.params)  # Δ^0 = 0

    def payload(self, server, round_index):
        return {"direction": server.state["direction"]}

    def begin_local(self, ctx):
        ctx.scratch["direction"] = param_views(ctx.payload["direction"], ctx.model)

    def adjust_gradients(self, ctx):
        super().adjust_gradients(ctx)  # g̃
        alpha = self.params.alpha
        if alpha == 1:
            return
        with torch.no_grad():
            for p, d in zip(ctx.model.parameters(), ctx.scratch["direction"]):
                if p.grad is not None:
                    p.grad.mul_(alpha).add_(d, alpha=1 - alpha)  # v = α g̃ + (1 − α) Δ^t

    def aggregate(self, server, updates, round_index):
        assert self.spec is not None  # bound by bind_model before any server hook
        weights = self.aggregation_weights(updates)
        averaged = weighted_average([u.params for u in updates], weights)
        mean_steps = float((weights * torch.tensor([float(u.num_steps) for u in updates], dtype=torch.float64)).sum())
        client_lr = self.spec.optimizer.lr * self.spec.lr_schedule.factor(round_index)  # η_l
        if mean_steps > 0:
            server.state["direction"] = (server.params - averaged) / (client_lr * mean_steps)
        eta_g = self.params.server_lr
        server.params = averaged if eta_g == 1 else server.params + eta_g * (averaged - server.params)
        server.buffers = average_buffers(updates, weights)

    def extra_download_floats(self, model_params):
        return model_params  # Δ^t
