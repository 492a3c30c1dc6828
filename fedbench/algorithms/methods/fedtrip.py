"""FedTrip (Li et al., IPDPS 2023): triplet regularisation with the client's historical model.

Local objective (FedTrip Eq. 5):
    L(w) = F(w) + (μ/2)·[ ||w − w_global||² − ξ·||w − w_hist||² ]
whose gradient, added to the mini-batch gradient *before* the SGD-momentum step as the authors' code
does (spec §1.2), is  ∇F(w) + μ(w − w_global) − μξ(w − w_hist).

ξ (spec §1.3, resolved): ξ = 1/gap with gap = t − τ_k, τ_k the client's last training round [code,
theory: E[ξ] = p·ln p/(p−1)]; the paper's literal wording (ξ = gap) and a constant ξ = 1 are options.
A never-selected client has τ_k = 0 and w_hist = w^0, the initial global model (fedcrac behaviour), so
at round 1 the regulariser vanishes. Only the most recent local model is kept; nothing extra is sent.
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import param_views
from fedbench.algorithms.params import FedTripParams


class FedTrip(Algorithm):
    Params = FedTripParams
    params: FedTripParams

    def init_server(self, server):
        server.state["initial_params"] = server.params.clone()  # w^0: history of never-selected clients

    def payload(self, server, round_index):
        return {"initial_params": server.state["initial_params"]}

    def xi(self, gap: int) -> float:
        return {"inverse_gap": 1.0 / gap, "gap": float(gap), "const": 1.0}[self.params.xi_rule]

    def begin_local(self, ctx):
        last_round = int(ctx.state.get("last_round", torch.tensor(0)))
        historical = ctx.state.get("historical", ctx.payload["initial_params"])
        scale = 1.0 / max(1, ctx.spec.local_epochs) if self.params.epoch_scaled else 1.0
        ctx.scratch["xi"] = self.xi(ctx.round_index - last_round)
        ctx.scratch["mu"] = self.params.mu * scale
        ctx.scratch["historical_tensors"] = param_views(historical, ctx.model)

    @torch.no_grad()
    def adjust_gradients(self, ctx):
        mu, xi = ctx.scratch["mu"], ctx.scratch["xi"]
        if mu == 0:
            return
        for w, w_global, w_hist in zip(ctx.model.parameters(), ctx.global_tensors, ctx.scratch["historical_tensors"]):
            if w.grad is not None:
                # FedTrip Eq. 5 gradient: + μ(w − w_g) − μξ(w − w_hist)
                w.grad.add_(w - w_global, alpha=mu).add_(w - w_hist, alpha=-mu * xi)

    packed_step = True

    def packed_inputs(self, ctx):
        self.begin_local(ctx)
        dtype = ctx.global_params.dtype
        return {
            "historical": ctx.state.get("historical", ctx.payload["initial_params"]),
            "mu_xi": torch.tensor(ctx.scratch["mu"] * ctx.scratch["xi"], dtype=dtype, device=ctx.device),
            "global": ctx.global_params,
        }

    def packed_adjust_gradients(self, inputs, params, grad):
        if self.params.mu == 0:
            return grad
        assert self.spec is not None  # bound by bind_model before any client trains
        mu = self.params.mu * (1.0 / max(1, self.spec.local_epochs) if self.params.epoch_scaled else 1.0)
        # FedTrip Eq. 5 gradient, as ``adjust_gradients``: + μ(w − w_g) − μξ(w − w_hist)
        return grad.add(params - inputs["global"], alpha=mu) - inputs["mu_xi"] * (params - inputs["historical"])

    def end_local(self, ctx, update):
        ctx.state["historical"] = update.params.clone()  # w̃_k ← w_k^t
        ctx.state["last_round"] = torch.tensor(ctx.round_index)

    def attach_flops_per_round(self, *, steps, num_params, **_):
        return 4.0 * steps * num_params  # FedTrip Table VIII: 4K|w| (two differences, two scaled adds)
