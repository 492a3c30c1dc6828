"""FedTR (Chen et al.): global feature tracking with class centroids + client drift releasing.

Local objective per mini-batch (FedTR Eq. 5, concretised as spec §1.5):

    F = CE(head(z), y) + λ_R·R + G,   z = features(x) (the input of the final Linear)
    R = mean over the batch rows whose class has a global centroid of ||z_j − C_{y_j}||² / dim(z)   (Eq. 4)
    G = (α_i/2)·||d_i + w_i − w||²   over the trainable parameters                                 (Eq. 3)

d_i is the client's persistent drift (``ctx.state["drift"]``, initialised to 0 [proposal]); G's gradient
α_i(d_i + w_i − w) is added before the optimizer step. After local training the client

  * updates d_i — ``drift_update = "feddc"`` (default, spec §1.4 variant B: the appendix proof's
    h_i ← h_i + Δw_i and FedDC's code): d_i ← d_i + (w_i⁺ − w) once per round; or ``"grad"`` (variant A,
    Algorithm 1 line 11 literally): d_i ← d_i − η_g·α_i·(d_i + w_i − w) after every step, η_g = client lr;
  * computes its class centroids with w_i⁺ (Eq. 7): one no-grad pass over its whole training split in eval
    mode without augmentation, and uploads them with the class counts n_{i,j} (needed by Eq. 9);
  * uploads the drift-corrected model w_i⁺ + d_i⁺ (Algorithm 1 line 14).

The server averages the corrected models with λ_i = |D_i|/|D| over the sampled clients (Eq. 8; BatchNorm
buffers FedAvg-style) and the centroids count-weighted (Eq. 9). Classes no sampled client holds get no
centroid and are masked out of R; round 1 has no centroids, so R = 0 (spec A4).

Toolkit conventions: α_G = 0 switches drift releasing off entirely (d_i ≡ 0, so λ_R = α_G = 0 is FedAvg);
``adaptive_alpha`` uses FedDC's α_i = α_G·mean(n)/n_i with mean(n) = |D_train|/N (exact for covering,
disjoint partitions such as ``dirichlet``). Eq. 11 is a theory remark and is not a loss term (spec A9).
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import Algorithm, model_outputs
from fedbench.algorithms.context import param_views
from fedbench.algorithms.params import FedTRParams


class FedTR(Algorithm):
    Params = FedTRParams
    params: FedTRParams

    def bind_model(self, spec, model, input_shape, num_classes):
        super().bind_model(spec, model, input_shape, num_classes)
        self.num_classes, self.feature_dim = num_classes, int(getattr(model, "feature_dim", 0))

    def payload(self, server, round_index):
        if "centroids" not in server.state:  # round 1: no global centroids yet, R = 0
            return {}
        return {"centroids": server.state["centroids"], "centroid_defined": server.state["centroid_defined"]}

    # ---------------------------------------------------------------- client side
    def begin_local(self, ctx):
        ctx.scratch["alpha"] = self.client_alpha(ctx)
        if ctx.scratch["alpha"] > 0:
            drift = ctx.state.setdefault("drift", torch.zeros_like(ctx.global_params))
            ctx.scratch["drift"] = param_views(drift, ctx.model)

    def client_alpha(self, ctx) -> float:
        alpha = self.params.alpha_g
        if self.params.adaptive_alpha and alpha > 0:
            mean_size = ctx.data.train_x.shape[0] / ctx.spec.num_clients
            alpha *= mean_size / max(1, ctx.num_samples)
        return alpha

    def loss(self, ctx, x, y, logits):
        loss = super().loss(ctx, x, y, logits)
        if self.params.lambda_r == 0 or "centroids" not in ctx.payload:
            return loss
        defined = ctx.payload["centroid_defined"][y]  # mask samples whose class has no centroid
        if not bool(defined.any()):
            return loss
        z = ctx.scratch["features"][defined]
        target = ctx.payload["centroids"][y[defined]].to(z.dtype)  # constants (no gradient)
        squared = (z - target) ** 2
        # FedTR Eq. 4, normalised (spec A2): mean over rows and dims (MSELoss) or sum over dims, mean over rows
        r = squared.mean() if self.params.r_reduction == "mse" else squared.sum(dim=1).mean()
        return loss + self.params.lambda_r * r

    @torch.no_grad()
    def adjust_gradients(self, ctx):
        alpha = ctx.scratch["alpha"]
        if alpha == 0:
            return
        for w, w_global, d in zip(ctx.model.parameters(), ctx.global_tensors, ctx.scratch["drift"]):
            if w.grad is not None:
                w.grad.add_(w - w_global + d, alpha=alpha)  # FedTR Eq. 3: ∇_w (α/2)||d_i + w_i − w||²

    @torch.no_grad()
    def after_step(self, ctx):
        alpha = ctx.scratch["alpha"]
        if alpha == 0 or self.params.drift_update != "grad":
            return
        eta_g = self.params.drift_lr or ctx.lr
        for w, w_global, d in zip(ctx.model.parameters(), ctx.global_tensors, ctx.scratch["drift"]):
            if w.requires_grad:
                d.sub_(d + w - w_global, alpha=eta_g * alpha)  # Algorithm 1 line 11: d ← d − η_g ∇_d G

    def end_local(self, ctx, update):
        if self.params.lambda_r > 0:
            update.extra["centroids"], update.extra["class_counts"] = local_centroids(
                ctx.model, ctx.data.train_x, ctx.data.train_y, ctx.indices, self.params.centroid_batch_size
            )
        if ctx.scratch["alpha"] > 0:
            drift = ctx.state["drift"]
            if self.params.drift_update == "feddc":
                drift.add_(update.params - ctx.global_params)  # h_i ← h_i + (w_i⁺ − w) (appendix A, FedDC)
            update.params = update.params + drift  # upload w_i⁺ + d_i⁺ (Algorithm 1 line 14)

    # ---------------------------------------------------------------- server side
    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)  # FedTR Eq. 8 on the corrected models
        if self.params.lambda_r == 0:
            return
        counts = torch.stack([u.extra["class_counts"] for u in updates]).to(torch.float64)  # (K, M)
        centroids = torch.stack([u.extra["centroids"] for u in updates]).to(torch.float64)  # (K, M, dim)
        total = counts.sum(dim=0)
        defined = total > 0
        # FedTR Eq. 9: C_j = Σ_i n_ij c_ij / Σ_i n_ij (over the sampled clients, spec A4)
        merged = (counts.unsqueeze(-1) * centroids).sum(dim=0) / total.clamp(min=1).unsqueeze(-1)
        server.state["centroids"] = merged.to(torch.float32)
        server.state["centroid_defined"] = defined

    # ---------------------------------------------------------------- accounting
    def centroid_floats(self) -> int:
        return getattr(self, "num_classes", 0) * getattr(self, "feature_dim", 0) if self.params.lambda_r > 0 else 0

    def extra_upload_floats(self, model_params):
        return self.centroid_floats() + (getattr(self, "num_classes", 0) if self.params.lambda_r > 0 else 0)  # + n_ij

    def extra_download_floats(self, model_params):
        return self.centroid_floats()

    def attach_flops_per_round(self, *, steps, samples, num_params, forward_flops, **_):
        drift = 3.0 * steps * num_params if self.params.alpha_g > 0 else 0.0  # (w − w_g + d), scaled add
        centroids = samples * forward_flops if self.params.lambda_r > 0 else 0.0  # one forward pass (Eq. 7)
        return drift + centroids


@torch.no_grad()
def local_centroids(model, train_x, train_y, indices, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """FedTR Eq. 7: per-class mean features of the trained local model over the client's training split
    (eval mode: BN running statistics; no augmentation). Returns (M × dim means, M counts); classes the
    client lacks get a zero row and count 0, so Eq. 9 ignores them."""
    was_training = model.training
    model.eval()
    sums: torch.Tensor | None = None
    counts: torch.Tensor | None = None
    # a client without training samples runs one empty batch: zero sums and counts, which Eq. 9 ignores
    for start in range(0, max(int(indices.numel()), 1), batch_size):
        chosen = indices[start : start + batch_size]
        logits, z = model_outputs(model, train_x[chosen])
        assert z is not None  # Eq. 7 averages features: every fedbench model has a features/head split
        y = train_y[chosen]
        if sums is None or counts is None:
            sums = torch.zeros(logits.shape[1], z.shape[1], dtype=torch.float64, device=z.device)
            counts = torch.zeros(logits.shape[1], dtype=torch.float64, device=z.device)
        sums.index_add_(0, y, z.to(torch.float64))
        counts.index_add_(0, y, torch.ones_like(y, dtype=torch.float64))
    model.train(was_training)
    assert sums is not None and counts is not None  # one batch at least ran
    means = sums / counts.clamp(min=1).unsqueeze(-1)
    return means.to(torch.float32), counts
