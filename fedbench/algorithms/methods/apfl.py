"""APFL (Deng, Kamani & Mahdavi, 2020): adaptive personalised FL by mixing a local and the global model.

Each client holds a local model v_k and a mixing weight α_k; its personalised model is
    v̄_k = α_k v_k + (1 − α_k) w                                                  (APFL Eq. 3)
Per local step (APFL Alg. 1, in FL-bench [code] order: the global copy first):
    w   ← w − η ∇f_k(w)                      (the FedAvg local update, uploaded and averaged)
    v_k ← v_k − η ∇_v f_k(v̄_k)  = v_k − η α_k ∇f_k(v̄_k)
    α_k ← clip[0,1]( α_k − η_α ⟨v_k − w, ∇f_k(v̄_k)⟩ )                            (APFL Eq. 6)
α_k starts at ``alpha`` = 0.5 and adapts with η_α = the client lr unless ``alpha_lr`` is set (LG-Mix spec
§3 [proposal], FL-bench ``alpha=0.5, adaptive_alpha=1``). v_k starts from w^0; v_k, its buffers and α_k
persist in ``ctx.state``. Evaluation uses v̄_k with the current global model w^t.
"""

import torch
from torch.func import functional_call

from fedbench.algorithms.base import Algorithm, mixing_weights
from fedbench.algorithms.context import load_weights, param_views
from fedbench.algorithms.functional import flat_parameters
from fedbench.algorithms.losses import task_loss
from fedbench.algorithms.params import APFLParams
from fedbench.algorithms.partial import initial_model_payload, remember_initial_model
from fedbench.vocab.diagnostics import MIXING_WEIGHTS


class APFL(Algorithm):
    Params = APFLParams
    reported_diagnostics = frozenset({MIXING_WEIGHTS})
    params: APFLParams

    def init_server(self, server):
        remember_initial_model(server)

    def payload(self, server, round_index):
        return initial_model_payload(server)

    def begin_local(self, ctx):
        v = ctx.state.get("personal_params", ctx.payload["initial_params"])
        buffers = ctx.state.get("personal_buffers", ctx.payload["initial_buffers"])
        alpha = ctx.state.get("alpha", torch.tensor(self.params.alpha, device=ctx.device))
        ctx.scratch["v"] = v.detach().clone().requires_grad_(True)
        ctx.scratch["v_buffers"] = {name: b.clone() for name, b in buffers.items()}
        ctx.scratch["alpha"] = alpha.detach().clone().requires_grad_(self.params.adaptive_alpha)

    def loss(self, ctx, x, y, logits):
        ctx.scratch["batch"] = (x, y)  # the personal step below uses the same batch
        return super().loss(ctx, x, y, logits)

    def after_step(self, ctx):
        v, alpha = ctx.scratch["v"], ctx.scratch["alpha"]
        w = flat_parameters(ctx.model.parameters()).detach()
        mixed = alpha * v + (1 - alpha) * w  # v̄_k
        names = [name for name, _ in ctx.model.named_parameters()]
        tensors = dict(zip(names, param_views(mixed, ctx.model)), **ctx.scratch["v_buffers"])
        x, y = ctx.scratch["batch"]
        loss = task_loss(ctx.task, functional_call(ctx.model, tensors, (x,)), y)
        inputs = [v, alpha] if self.params.adaptive_alpha else [v]
        grads = torch.autograd.grad(loss, inputs)
        with torch.no_grad():
            v -= ctx.lr * grads[0]
            if self.params.adaptive_alpha:
                alpha -= (self.params.alpha_lr or ctx.lr) * grads[1]
                alpha.clamp_(0.0, 1.0)

    def end_local(self, ctx, update):
        ctx.state["personal_params"] = ctx.scratch["v"].detach().clone()
        ctx.state["personal_buffers"] = ctx.scratch["v_buffers"]
        ctx.state["alpha"] = ctx.scratch["alpha"].detach().clone()

    def round_diagnostics(self, names, server, contexts):
        """α_k of each client of the round after its local steps (APFL Eq. 6; LG-Mix Fig. 2(a))."""
        return {MIXING_WEIGHTS: mixing_weights(contexts, "alpha", "α")} if MIXING_WEIGHTS in names else {}

    def eval_model(self, ctx):
        if "personal_params" not in ctx.state:
            return ctx.model
        alpha = ctx.state["alpha"]
        mixed = alpha * ctx.state["personal_params"] + (1 - alpha) * ctx.global_params
        load_weights(ctx.model, mixed, ctx.state["personal_buffers"])
        return ctx.model
