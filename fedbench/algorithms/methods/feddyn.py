"""FedDyn (Acar et al., ICLR 2021): dynamic regularisation.

Client k keeps the linear-term state g_k = ∇L_k(θ_k^{t−1}) (starts at 0, persists in ``ctx.state``) and
minimises (FedDyn Alg. 1 line 5)

    L_k(θ) − ⟨g_k, θ⟩ + (α/2)·‖θ − θ^{t−1}‖²,

then updates g_k ← g_k − α(θ_k^t − θ^{t−1}) (line 6). The server keeps h (``server.state``, starts at 0):

    h^t = h^{t−1} − α·(1/N)·Σ_{k∈P_t} (θ_k^t − θ^{t−1})        (line 9)
    θ^t = mean_{k∈P_t} θ_k^t − (1/α)·h^t                      (line 10)

Spec choices: the mean over P_t uses the engine's sample-size weights p_k (FedTR spec: the same data-size
weighting for every baseline; uniform when the n_k are equal), and Σ_{k∈P_t}(θ_k − θ^{t−1}) is read as
|P_t|·Σ p_k(θ_k − θ^{t−1}). The standard rule throughout by default (FedTrip spec ambiguity 14);
``first_h = "unscaled"`` is FedTrip's authors' code instead (Plato ``examples/feddyn/FedDyn_server.py``: the first
aggregation sets h = −α·(θ̄ − θ^0), without the |P|/N factor, and every later one uses it).
α: FedTR [proposal] 0.01, FedTrip 1 (MNIST) / 0.1, FedImpro [proposal] 0.01 — recipes set it. Note that h^t/α
does not depend on α, so α → 0 recovers FedAvg's *clients* but not its server step.
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.context import param_views
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.params import FedDynParams


class FedDyn(Algorithm):
    Params = FedDynParams
    params: FedDynParams

    def init_server(self, server):
        server.state["h"] = torch.zeros_like(server.params)

    def begin_local(self, ctx):
        g_k = ctx.state.setdefault("linear", torch.zeros_like(ctx.global_params))
        ctx.scratch["linear"] = param_views(g_k, ctx.model)

    def loss(self, ctx, x, y, logits):
        alpha = self.params.alpha
        params = list(ctx.model.parameters())
        linear = sum((p * g).sum() for p, g in zip(params, ctx.scratch["linear"]))  # ⟨g_k, θ⟩
        term = proximal(params, ctx.global_tensors)  # ‖θ − θ^{t−1}‖²
        return super().loss(ctx, x, y, logits) - linear + 0.5 * alpha * term

    packed_step = True

    def packed_inputs(self, ctx):
        return {
            "linear": ctx.state.setdefault("linear", torch.zeros_like(ctx.global_params)),
            "global": ctx.global_params,
        }

    def packed_objective(self, call, params, inputs, x, y, mask):
        linear = (params * inputs["linear"]).sum()  # ⟨g_k, θ⟩
        term = proximal([params], [inputs["global"]])  # ‖θ − θ^{t−1}‖²
        base = super().packed_objective(call, params, inputs, x, y, mask)
        return base - linear + 0.5 * self.params.alpha * term

    def end_local(self, ctx, update):
        # Alg. 1 line 6: ∇L_k(θ_k^t) = ∇L_k(θ_k^{t−1}) − α(θ_k^t − θ^{t−1})
        ctx.state["linear"] = ctx.state["linear"] - self.params.alpha * (update.params - ctx.global_params)

    def aggregate(self, server, updates, round_index):
        alpha = self.params.alpha
        weights = self.aggregation_weights(updates)
        averaged = weighted_average([u.params for u in updates], weights)
        # line 9: h ← h − α (1/N) Σ_{k∈P}(θ_k − θ^{t−1}) = h − α (|P|/N) (θ̄ − θ^{t−1})
        assert self.spec is not None  # bound by bind_model before any server hook
        fraction = len(updates) / self.spec.num_clients
        if round_index == 1 and self.params.first_h == "unscaled":
            fraction = 1.0  # the authors' first h (module docstring)
        server.state["h"] = server.state["h"] - alpha * fraction * (averaged - server.params)
        # line 10: θ^t = θ̄ − h/α
        server.params = averaged - server.state["h"] / alpha
        server.buffers = average_buffers(updates, weights)

    def attach_flops_per_round(self, *, steps, num_params, **_):
        return 4.0 * steps * num_params  # FedTrip Table VIII: 4K|w| (linear term and proximal term)
