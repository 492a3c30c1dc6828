"""Ditto (Li et al., ICML 2021): a global FedAvg model plus a proximally regularised personal model.

Per participating client k (Ditto Alg. 1):
  global:   w_k ← local SGD on F_k from w^t, uploaded and averaged as in FedAvg;
  personal: v_k ← v_k − η (∇F_k(v_k) + λ (v_k − w^t))     for ``personal_epochs`` epochs   (Ditto Eq. 2),
the personal objective being F_k(v) + (λ/2)‖v − w^t‖². λ → 0 gives local training, λ → ∞ pins v_k to w^t.
The personal step is the plain gradient step of the paper and [code] (stable while η·λ < 2).

v_k starts from w^0 (Ditto and FedBABU [code] copy the initial model per client) and lives in ``ctx.state``.
λ: FedDr+ spec §3.2 uses the FedBABU repo default 0.75 [proposal]; LG-Mix does not compare Ditto.
"""

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.params import DittoParams
from fedbench.algorithms.partial import (
    initial_model_payload,
    remember_initial_model,
    restore_model,
    restore_or_initial,
    store_model,
)


class Ditto(Algorithm):
    Params = DittoParams
    params: DittoParams

    def init_server(self, server):
        remember_initial_model(server)

    def payload(self, server, round_index):
        return initial_model_payload(server)

    def local_train(self, ctx):
        update = super().local_train(ctx)  # the global model's update, from w^t
        restore_or_initial(ctx, "personal", ctx.model)
        ctx.scratch["personal"] = True
        optimizer = ctx.make_optimizer(ctx.model.parameters())
        self.train_steps(ctx, optimizer, ctx.batches(epochs=self.params.personal_epochs))
        store_model(ctx, "personal", ctx.current_params(), ctx.current_buffers())
        return update

    def loss(self, ctx, x, y, logits):
        loss = super().loss(ctx, x, y, logits)
        if not ctx.scratch.get("personal"):
            return loss
        # Ditto Eq. 2: + (λ/2)‖v_k − w^t‖², w^t the round's received global model
        return loss + 0.5 * self.params.lam * proximal(ctx.model.parameters(), ctx.global_tensors)

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)  # a client that never trained is evaluated with w^t
        return ctx.model
