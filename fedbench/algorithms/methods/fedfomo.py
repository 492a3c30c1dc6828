"""FedFomo (Zhang et al., ICLR 2021): first-order model optimisation for personalised FL.

The server keeps every client's latest model θ_j and an affinity matrix P. Before training, client i
receives the M models it has the highest affinity to (all when fewer are available), measures them on its
own validation split and weighs each by its first-order improvement (FedFomo Eq. 6–7):
    w_ij = max(0, (L_i(θ_i) − L_i(θ_j)) / ‖θ_j − θ_i‖),   normalised to sum 1 when any is positive,
    θ_i ← θ_i + Σ_j w_ij (θ_j − θ_i),
then trains θ_i locally and uploads it; the server stores it and adds w_ij to P_ij. The global model
(FedAvg of the uploads) is only a by-product.
M = 5 and the validation split (0.2 of the client's training data, fixed per client) follow LG-Mix spec
§3 [proposal, FL-bench]; FedFomo's ε-greedy exploration is not used [proposal]. A model θ_j is the whole model:
its BatchNorm running statistics score it and are mixed with the weights w_ij ([code] FL-bench loads and
averages every state_dict entry); the distance ‖θ_j − θ_i‖ is over the parameters.
"""

import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import load_weights
from fedbench.algorithms.losses import task_loss
from fedbench.algorithms.params import FedFomoParams
from fedbench.algorithms.partial import restore_model
from fedbench.seeding import torch_generator


class FedFomo(Algorithm):
    Params = FedFomoParams
    params: FedFomoParams

    def init_server(self, server):
        server.state["client_models"] = {}  # j -> (θ_j, buffers_j)
        server.state["affinity"] = {}  # (i, j) -> P_ij

    def payload(self, server, round_index):
        return {"client_models": server.state["client_models"], "affinity": server.state["affinity"]}

    def local_split(self, spec, client_id, indices):
        """The client's validation split D_i^val (``val_fraction`` of its training data, the same every round) is
        held out of local training: it scores the peer models (FedFomo Eq. 6)."""
        size = int(indices.numel())
        order = torch.randperm(size, generator=torch_generator(spec.seed, "fedfomo-val", client_id))
        shuffled = indices[order.to(indices.device)]
        n_val = max(1, round(self.params.val_fraction * size))
        return shuffled[n_val:].sort().values, shuffled[:n_val]

    def begin_local(self, ctx):
        restore_model(ctx, "personal", ctx.model)  # θ_i; w^t before the first participation
        own, own_buffers = ctx.current_params(), ctx.current_buffers()
        x, y = ctx.data.train_x[ctx.holdout], ctx.data.train_y[ctx.holdout]
        models = ctx.payload["client_models"]  # j -> (θ_j, buffers_j)

        def val_loss(params, buffers):
            """L_i of a whole model on D_i^val, its own BN running statistics included (eval mode)."""
            with torch.no_grad():
                return task_loss(ctx.task, ctx.frozen_model("fedfomo", params, buffers)(x), y).item()

        peers = sorted(
            (j for j in models if j != ctx.client_id),
            key=lambda j: (-ctx.payload["affinity"].get((ctx.client_id, j), 0.0), j),
        )[: self.params.m]
        own_loss = val_loss(own, own_buffers)
        weights = {}
        for j in peers:  # FedFomo Eq. 6; the distance over the parameters
            theta_j, buffers_j = models[j]
            distance = float(torch.linalg.vector_norm(theta_j - own))
            weights[j] = max(0.0, (own_loss - val_loss(theta_j, buffers_j)) / distance) if distance > 0 else 0.0
        total = sum(weights.values())
        if total > 0:  # FedFomo Eq. 7 with the normalised weights
            weights = {j: w / total for j, w in weights.items()}
            own = own + sum(w * (models[j][0] - own) for j, w in weights.items())
            # BN running statistics are mixed with the same weights (FL-bench [code] mixes every state_dict
            # entry); num_batches_tracked, a counter, stays the client's own
            own_buffers = {
                name: b + sum(w * (models[j][1][name] - b) for j, w in weights.items()) if b.is_floating_point() else b
                for name, b in own_buffers.items()
            }
            load_weights(ctx.model, own, own_buffers)
        ctx.scratch["fomo_weights"] = weights

    def end_local(self, ctx, update):
        ctx.state["personal_params"], ctx.state["personal_buffers"] = update.params, update.buffers
        update.extra["fomo_weights"] = ctx.scratch["fomo_weights"]

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        for u in updates:
            server.state["client_models"][u.client_id] = (u.params, u.buffers)
            for j, w in u.extra["fomo_weights"].items():
                key = (u.client_id, j)
                server.state["affinity"][key] = server.state["affinity"].get(key, 0.0) + w

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)
        return ctx.model
