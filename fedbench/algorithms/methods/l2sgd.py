"""L2SGD (Hanzely & Richtárik 2020; Hanzely et al., NeurIPS 2020): a mixture of global and local models,

    min_{x_1..x_N}  (1/N) Σ_k f_k(x_k) + λ (1/2N) Σ_k ‖x_k − x̄‖²,     x̄ = the average of the x_k,

solved by randomised steps: with probability 1 − p a local gradient step on f_k, with probability p an
averaging step that pulls every x_k toward x̄:   x_k ← x_k − (ηλ/p)(x_k − x̄).

Round form [proposal; LG-Mix spec §3 leaves λ and p open]: the coin is flipped once per round, shared by all
clients (derived from the run seed and round). On heads a participating client first pulls its model toward
the received x̄ = w^t with θ = min(1, ηλ/p); then it takes the round's local SGD steps on f_k and uploads x_k;
the server's average is the next x̄. θ = 1 every round is FedAvg, λ = 0 is local training.
x_k starts from w^0 and persists in ``ctx.state``; evaluation uses x_k.
"""

import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import load_weights
from fedbench.algorithms.params import L2SGDParams
from fedbench.algorithms.partial import (
    initial_model_payload,
    remember_initial_model,
    restore_model,
    restore_or_initial,
    store_model,
)
from fedbench.seeding import torch_generator


class L2SGD(Algorithm):
    Params = L2SGDParams
    params: L2SGDParams

    def init_server(self, server):
        remember_initial_model(server)

    def payload(self, server, round_index):
        return initial_model_payload(server)

    def begin_local(self, ctx):
        restore_or_initial(ctx, "personal", ctx.model)
        coin = torch.rand((), generator=torch_generator(ctx.spec.seed, "l2sgd-coin", ctx.round_index))
        if ctx.round_index > 1 and coin < self.params.p:
            theta = min(1.0, ctx.lr * self.params.lam / self.params.p)
            x = ctx.current_params()
            x -= theta * (x - ctx.global_params)  # x_k ← x_k − (ηλ/p)(x_k − x̄)
            load_weights(ctx.model, x)

    def end_local(self, ctx, update):
        store_model(ctx, "personal", update.params, update.buffers)

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)
        return ctx.model
