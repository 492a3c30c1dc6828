"""SCAFFOLD (Karimireddy et al., ICML 2020), option II control variates.

Client i holds c_i (persistent across rounds, in ``ctx.state``), the server holds c (in ``server.state``);
both start at 0 (FedTR/FedDr+/FedImpro specs). Local steps use the corrected gradient g − c_i + c
(SCAFFOLD Alg. 1 line 10); after K steps (option II, Eq. 4):

    c_i⁺ = c_i − c + (x − y_i) / (K·η)

Server (Alg. 1 lines 16–17): x ← x + η_g·(Σ p_i y_i − x) (η_g = 1: the weighted average, as all specs
use) and c ← c + (|S|/N)·(1/|S|)·Σ (c_i⁺ − c_i).

Spec choices:
- FedDr+ [code] ``adaptive_division``: with client momentum ρ the divisor uses the effective number of
  steps K_eff = (K − ρ(1−ρ^K)/(1−ρ))/(1−ρ) (equals K for ρ = 0); ``momentum_corrected_steps``.
- FedImpro [code] updates c with the plain mean (no |S|/N factor): ``control_update = "mean"``; the
  paper's |S|/N is the default (``"paper"``).
- The correction is added to the gradient before the optimizer step, so it passes through momentum.
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.context import param_views
from fedbench.algorithms.methods.fednova import normalizing_factor as effective_steps
from fedbench.algorithms.params import ScaffoldParams


class Scaffold(Algorithm):
    Params = ScaffoldParams
    params: ScaffoldParams

    def init_server(self, server):
        server.state["control"] = torch.zeros_like(server.params)  # c = 0

    def payload(self, server, round_index):
        return {"control": server.state["control"]}

    def begin_local(self, ctx):
        c_i = ctx.state.setdefault("control", torch.zeros_like(ctx.global_params))
        # Alg. 1 line 10: y_i ← y_i − η (g_i(y_i) − c_i + c); the constant part c − c_i per parameter.
        ctx.scratch["correction"] = param_views(ctx.payload["control"] - c_i, ctx.model)

    def adjust_gradients(self, ctx):
        for p, correction in zip(ctx.model.parameters(), ctx.scratch["correction"]):
            if p.grad is not None:
                p.grad.add_(correction)

    packed_step = True

    def packed_inputs(self, ctx):
        c_i = ctx.state.setdefault("control", torch.zeros_like(ctx.global_params))
        return {"correction": ctx.payload["control"] - c_i}  # c − c_i, as ``begin_local``

    def packed_adjust_gradients(self, inputs, params, grad):
        return grad + inputs["correction"]

    def end_local(self, ctx, update):
        opt = ctx.spec.optimizer
        momentum = opt.momentum if (opt.name == "sgd" and self.params.momentum_corrected_steps) else 0.0
        steps = effective_steps(update.num_steps, momentum)
        c_i, c = ctx.state["control"], ctx.payload["control"]
        if steps == 0:  # a client without samples took no step: (x − y_i)/(Kη) is undefined, and it learned nothing
            update.extra["control_delta"] = torch.zeros_like(c_i)  # c_i stays; the server's mean counts a zero Δc
            return
        # Eq. (4), option II: c_i⁺ = c_i − c + (x − y_i)/(K η)
        new_control = c_i - c + (ctx.global_params - update.params) / (steps * ctx.lr)
        update.extra["control_delta"] = new_control - c_i
        ctx.state["control"] = new_control

    def aggregate(self, server, updates, round_index):
        weights = self.aggregation_weights(updates)
        averaged = weighted_average([u.params for u in updates], weights)
        eta_g = self.params.server_lr
        # Alg. 1 line 16: x ← x + η_g (ȳ − x); η_g = 1 is exactly the weighted average.
        server.params = averaged if eta_g == 1 else server.params + eta_g * (averaged - server.params)
        server.buffers = average_buffers(updates, weights)
        # Alg. 1 line 17: c ← c + (|S|/N) · mean_i Δc_i
        assert self.spec is not None  # bound by bind_model before any server hook
        fraction = len(updates) / self.spec.num_clients if self.params.control_update == "paper" else 1.0
        mean_delta = torch.stack([u.extra["control_delta"] for u in updates]).mean(0)
        server.state["control"] = server.state["control"] + fraction * mean_delta

    def extra_upload_floats(self, model_params):
        return model_params  # Δc_i

    def extra_download_floats(self, model_params):
        return model_params  # c

    def attach_flops_per_round(self, *, steps, num_params, **_):
        # FedTrip Table VIII counts 2(K+1)|w| + n(FP+BP); the n(FP+BP) full-batch gradient is option I's.
        # Option II (implemented) needs no extra gradient: the correction per step and the c_i update.
        return 2.0 * (steps + 1) * num_params
