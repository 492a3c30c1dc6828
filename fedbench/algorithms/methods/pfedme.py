"""pFedMe (T. Dinh et al., NeurIPS 2020): personalised models through Moreau envelopes.

Client i's objective is the Moreau envelope F_i(w) = min_θ f_i(θ) + (λ/2)‖θ − w‖² (§3); its personal model is the
minimiser θ̂_i(w). Per local step r (one mini-batch D, Alg. 1):
  inner solver   θ ← θ − η_p (∇f_i(θ; D) + λ (θ − w_{i,r}))     K times, from the previous step's θ    (Alg. 1)
  outer update   w_{i,r+1} = w_{i,r} − η λ (w_{i,r} − θ̂_i)                                            (Alg. 1)
with η the run's client learning rate and η_p ``personal_lr``; θ starts as the received w^t, then continues from
one local step to the next, as in the authors' code [code]. The client uploads w_{i,R}; the server moves by β:
  w^{t+1} = (1 − β) w^t + β Σ_i p_i w_{i,R}                                                                (Alg. 1)
with p_i = n_i / Σ n (the code's sample weights; the paper averages the sampled clients uniformly) [code].
Defaults: λ = 15, η_p = 0.1, K = 5, β = 1 (the paper's MNIST setting; K from the authors' code) [paper/code].
The personal model evaluated is the last θ̂_i a client computed (the code's ``persionalized_model_bar``); a client
that never trained is evaluated with the global model. The inner steps are plain gradient steps, not the run's
optimizer (the code's ``pFedMeOptimizer``); the outer update is Alg. 1's exactly, whatever the run's optimizer.
No packed path: the inner solver is a loop of K steps per outer step.
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import Algorithm, LocalPhase, weighted_average
from fedbench.algorithms.context import load_weights, param_views
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.params import PFedMeParams
from fedbench.algorithms.partial import restore_model, store_model


class PFedMe(Algorithm):
    Params = PFedMeParams
    params: PFedMeParams

    def local_phases(self, ctx):
        return [LocalPhase(ctx.batches(), step=self._moreau_steps)]

    def _moreau_steps(self, ctx, batches):
        """Alg. 1's local rounds: for each batch, K inner steps on θ (held in ``ctx.model``), then the outer update of w."""
        w = ctx.current_params()  # w_{i,0} = w^t
        anchor = param_views(w, ctx.model)
        inner = torch.optim.SGD([p for p in ctx.model.parameters() if p.requires_grad], lr=self.params.personal_lr)
        for x, y in batches:
            for _ in range(self.params.inner_steps):  # the inner solver (Alg. 1)
                logits = self.forward(ctx, x)
                loss = self.objective(ctx, x, y, logits)
                inner.zero_grad(set_to_none=True)
                (loss + 0.5 * self.params.lam * proximal(ctx.model.parameters(), anchor)).backward()
                ctx.clip_gradients()
                inner.step()
            ctx.record_step(loss)
            w.sub_(ctx.current_params() - w, alpha=-ctx.lr * self.params.lam)  # w − ηλ(w − θ̂)
        ctx.scratch["personal"] = ctx.current_params(), ctx.current_buffers()
        load_weights(ctx.model, w)  # the client uploads w_{i,R}

    def end_local(self, ctx, update):
        if "personal" in ctx.scratch:
            store_model(ctx, "personal", *ctx.scratch["personal"])

    def aggregate(self, server, updates, round_index):
        previous = server.params
        super().aggregate(server, updates, round_index)  # Σ p_i w_{i,R} and the buffers
        beta = self.params.beta
        if beta != 1.0:  # (1 − β) w^t + β Σ p_i w_i; β = 1 keeps FedAvg's average bit for bit
            server.params = weighted_average(
                [previous, server.params], torch.tensor([1.0 - beta, beta], dtype=torch.float64)
            )

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)  # θ̂_i; the global model for a client that never trained
        return ctx.model
