"""FedHKD (Chen et al., ICLR 2023): federated learning with data-free hyper-knowledge distillation.

After local training a client computes, per class c it holds, the mean representation h̄_c (plus Gaussian
noise of std σ, FedHKD's privacy mechanism) and the mean soft prediction q̄_c = softmax(z/T); the server
averages them per class, weighted by class counts, into the global hyper-knowledge (H̄_c, Q̄_c). The local
objective then is (FedHKD Eq. 8; [code] ``update_weights_HKD``)
    L = CE(f(x), y) + λ · KL(Q̄ ‖ softmax(g(H̄)/T)) + γ · ‖φ(x) − H̄_y‖²_mean
(g the head, φ the body; the KL over classes with knowledge, batch-mean; the feature term only for labels
with knowledge). The first round, without knowledge, is plain CE. The personalised model of a client is its
locally trained model (FedHKD reports "local" accuracy with it). Per-class averaging follows the paper:
the [code] keeps the last client's entry per class instead.
λ, γ, T, σ: LG-Mix gives none; [code] defaults λ = γ = 0.05, T = 0.5, σ = 2.
"""

import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm, model_outputs
from fedbench.algorithms.params import FedHKDParams
from fedbench.algorithms.partial import restore_model, store_model


class FedHKD(Algorithm):
    Params = FedHKDParams
    params: FedHKDParams

    def payload(self, server, round_index):
        return {"knowledge": server.state.get("knowledge")}

    def loss(self, ctx, x, y, logits):
        ce = super().loss(ctx, x, y, logits)
        knowledge = ctx.payload.get("knowledge")
        if knowledge is None:
            return ce
        features, soft, present = knowledge
        q_help = F.log_softmax(ctx.model.head(features[present]) / self.params.temperature, dim=1)
        kd = F.kl_div(q_help, soft[present], reduction="batchmean")
        z = ctx.scratch["features"].flatten(1)
        known = present[y]
        target = torch.where(known[:, None], features[y], z.detach())
        return ce + self.params.lam * kd + self.params.gamma * F.mse_loss(z, target)

    def end_local(self, ctx, update):
        store_model(ctx, "personal", update.params, update.buffers)
        # The client's hyper-knowledge from its trained model (eval mode), over its training data.
        ctx.model.eval()
        sums: torch.Tensor | int = 0
        soft_sums: torch.Tensor | int = 0
        counts: torch.Tensor | int = 0
        with torch.no_grad():
            # a client without training samples runs one empty batch: zero sums and counts of the right shapes, so
            # it adds nothing to the server's class means (``aggregate`` divides by the summed counts)
            for start in range(0, max(ctx.num_samples, 1), 1000):
                idx = ctx.indices[start : start + 1000]
                logits, z = model_outputs(ctx.model, ctx.data.train_x[idx])
                assert z is not None  # the hyper-knowledge is in features: every fedbench model has them
                onehot = F.one_hot(ctx.data.train_y[idx], logits.shape[1]).to(z.dtype)  # B × C
                sums = sums + onehot.T @ z.flatten(1)
                soft_sums = soft_sums + onehot.T @ F.softmax(logits / self.params.temperature, dim=1)
                counts = counts + onehot.sum(0)
        ctx.model.train()
        assert isinstance(sums, torch.Tensor) and isinstance(counts, torch.Tensor)  # one batch at least ran
        noise = self.params.noise_std * torch.randn(sums.shape[1], generator=ctx.generator, device=sums.device)
        means = sums / counts.clamp(min=1)[:, None] + noise  # one noise vector per client ([code])
        update.extra["knowledge"] = (means * counts[:, None], soft_sums, counts)

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        counts = sum(u.extra["knowledge"][2] for u in updates)
        weight = counts.clamp(min=1)[:, None]
        features = sum(u.extra["knowledge"][0] for u in updates) / weight
        soft = sum(u.extra["knowledge"][1] for u in updates) / weight
        server.state["knowledge"] = (features, soft, counts > 0)

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)
        return ctx.model
