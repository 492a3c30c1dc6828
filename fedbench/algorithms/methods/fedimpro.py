"""FedImpro (Tang et al., ICLR 2024): train the high-level part also on features sampled from a shared
per-class Gaussian estimate of the split-layer features.  Spec: shared/papers/fedimpro.md.

The model is cut at a named split point (ResNet-18: ``layer2``, the paper's "9th conv", spec §1.3):
h = φ_low(x), logits = high(h).  Every client holds, per class c, a diagonal Gaussian N(μ_c, σ_c²) over the
flattened h; the server averages the clients' estimates and broadcasts them with the weights.  Locally, each
mini-batch's real features are concatenated with a class-balanced batch ĥ ~ N(μ_ŷ, σ_ŷ²) (sampled tensors, so
no gradient reaches θ_low; App. B) and the high-level part (its BatchNorm too, spec §8 #8) sees both:

    L = CE(high(h), y) + λ(e)·CE(high(ĥ), ŷ)                 FedImpro Eq. 5, λ per the [code] schedule
    μ_c ← (1−w)·μ_c + w·mean(h_c),  σ_c ← (1−w)·σ_c + w·std(h_c)   FedImpro Eq. 6, w = 1 − β_m ([code] rule)
    μ_g ← β_g·μ_g + (1−β_g)·mean_{i∈S}(μ_i + ε_i), ε ~ N(0, σ_ε²)  FedImpro Eq. 7 (same for σ)

Everything else is FedAvg.  Defaults follow the official code (spec §1.10): σ init and upper clip σ0 = 0.1,
μ⁰ ~ U[0,1), w = min(1, D/5000) (→ 1 at layer2: the last batch's class statistics replace the estimate), β_g = 0,
sampling from the client's evolving copy, λ(e) = e/500 uncapped with e = (round − 1)·E, stds (not variances)
averaged uniformly over the sampled clients, no privacy noise.  Paper-literal variants are options.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.params import FedImproParams
from fedbench.errors import ConfigError
from fedbench.seeding import torch_generator


class FedImpro(Algorithm):
    Params = FedImproParams
    params: FedImproParams

    # set by bind_model
    split: str
    num_classes: int
    feature_shape: tuple[int, ...]
    seed: int

    def bind_model(self, spec, model, input_shape, num_classes):
        super().bind_model(spec, model, input_shape, num_classes)
        split = self.params.split or getattr(model, "default_split", None)
        points = model.split_points() if hasattr(model, "split_points") else []
        if split is None or split not in points:
            raise ConfigError(
                f"fedimpro: model {spec.model!r} has no split point {split!r}; "
                f"known split points: {', '.join(points) or 'none'} (set algorithm_params.split)"
            )
        was_training = model.training
        with torch.no_grad():
            device = next(model.parameters()).device
            h = model.eval().low(torch.zeros(1, *input_shape, device=device), split)
        model.train(was_training)
        self.split, self.num_classes, self.feature_shape = split, num_classes, tuple(h.shape[1:])
        self.seed = spec.seed

    @property
    def feature_dim(self) -> int:
        return math.prod(self.feature_shape)

    # ---------------------------------------------------------------- server
    def initial_statistics(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        """H⁰ [code]: μ ~ U[0,1)^{C×D}, σ = σ0 (spec §1.5, §8 #10); a function of the run seed."""
        generator = torch_generator(self.seed, "fedimpro-init", device=device)
        mu = torch.rand(self.num_classes, self.feature_dim, generator=generator, device=device)
        return mu, torch.full_like(mu, self.params.sigma0)

    def init_server(self, server):
        server.state["mu"], server.state["sigma"] = self.initial_statistics(server.params.device)

    def payload(self, server, round_index):
        return {"mu": server.state["mu"], "sigma": server.state["sigma"]}

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        beta = self.params.beta_g
        for key in ("mu", "sigma"):
            # FedImpro Eq. 7: uniform mean over the sampled clients ([code] estimate_weight = "uniform")
            mean = sum(u.extra[key] for u in updates) / len(updates)  # no K×C×D stack
            server.state[key] = beta * server.state[key] + (1 - beta) * mean

    # ---------------------------------------------------------------- client
    def begin_local(self, ctx):
        ctx.scratch["mu"] = ctx.payload["mu"].clone()  # the local estimate starts at H^r (§1.4)
        ctx.scratch["sigma"] = ctx.payload["sigma"].clone()
        ctx.scratch["sampler"] = torch_generator(
            ctx.spec.seed, "fedimpro", ctx.round_index, ctx.client_id, device=ctx.device
        )
        epoch = (ctx.round_index - 1) * max(1, ctx.spec.local_epochs)  # [code] global epoch at round start
        ctx.scratch["lambda"] = self.feature_weight(epoch)

    def feature_weight(self, epoch: int) -> float:
        p = self.params
        ramp = epoch / p.feature_weight_epochs
        factor = {"gradual": ramp, "capped": min(1.0, ramp), "constant": 1.0}[p.feature_weight_sched]
        return p.feature_weight * factor

    def sample_features(self, ctx, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Class-balanced ŷ = [0..C−1]·(⌊B/C⌋+1) and ĥ ~ N(μ_ŷ, σ_ŷ²) ([code] GaussianSynthesisLabel.sample)."""
        source = ctx.scratch if self.params.sample_from == "local" else ctx.payload
        labels = torch.arange(self.num_classes, device=ctx.device).repeat(batch_size // self.num_classes + 1)
        mean, std = source["mu"][labels], source["sigma"][labels].clamp_min(0)
        noise = torch.randn(mean.shape, generator=ctx.scratch["sampler"], device=ctx.device, dtype=mean.dtype)
        return (mean + std * noise).view(-1, *self.feature_shape), labels

    def forward(self, ctx, x):
        h = ctx.model.low(x, self.split)
        if self.params.feature_weight == 0:  # no synthetic branch: exactly FedAvg's step
            features = ctx.model.high_features(h, self.split)
            logits = ctx.model.head(features)
        else:
            fake, ctx.scratch["fake_labels"] = self.sample_features(ctx, x.shape[0])
            both = ctx.model.high_features(torch.cat([h, fake]), self.split)  # shared high-part BN ([code])
            features, logits_both = both[: x.shape[0]], ctx.model.head(both)
            logits, ctx.scratch["fake_logits"] = logits_both[: x.shape[0]], logits_both[x.shape[0] :]
        ctx.scratch["features"] = features  # the real batch's penultimate features, for the fd regularizer
        ctx.scratch["real_features"] = h.detach().flatten(1)  # the labels arrive in objective
        return logits

    def objective(self, ctx, x, y, logits):
        # Update the local estimate with this batch's real features, after sampling (spec §1.6 step 5).
        self.update_statistics(ctx, ctx.scratch.pop("real_features"), y)
        return super().objective(ctx, x, y, logits)

    def loss(self, ctx, x, y, logits):
        real = super().loss(ctx, x, y, logits)
        if self.params.feature_weight == 0:
            return real
        # FedImpro Eq. 5 with the [code] weighting: CE(real) + λ(e)·CE(synthetic)
        return real + ctx.scratch["lambda"] * F.cross_entropy(ctx.scratch["fake_logits"], ctx.scratch["fake_labels"])

    @torch.no_grad()
    def update_statistics(self, ctx, h: torch.Tensor, y: torch.Tensor) -> None:
        """FedImpro Eq. 6, per class and element, vectorised ([code] GaussianSynthesisLabel.update)."""
        p, classes = self.params, self.num_classes
        counts = torch.bincount(y, minlength=classes).to(h.dtype)
        sums = torch.zeros(classes, h.shape[1], device=h.device, dtype=h.dtype).index_add_(0, y, h)
        mean = sums / counts.clamp_min(1)[:, None]
        squares = torch.zeros_like(sums).index_add_(0, y, (h - mean[y]) ** 2)
        std = (squares / (counts - 1).clamp_min(1)[:, None]).sqrt()  # unbiased, as torch.std
        if p.stat_weight == "code":  # [code] m_c.size(0) is D, not the class count (spec §1.4)
            w = torch.full_like(counts, min(1.0, h.shape[1] / p.count_ref))
        elif p.stat_weight == "count":
            w = (counts / p.count_ref).clamp(max=1.0)
        else:
            w = torch.full_like(counts, 1.0 - p.beta_m)
        seen, spread = (counts > 0).to(h.dtype)[:, None] * w[:, None], (counts > 1).to(h.dtype)[:, None] * w[:, None]
        ctx.scratch["mu"].mul_(1 - seen).add_(seen * mean)
        ctx.scratch["sigma"].mul_(1 - spread).add_(spread * std)  # a single sample has no std: unchanged
        if p.clip_sigma:
            ctx.scratch["sigma"].clamp_(max=p.sigma0)

    def end_local(self, ctx, update):
        mu, sigma = ctx.scratch["mu"], ctx.scratch["sigma"]
        if self.params.noise_std > 0:  # privacy noise on the upload only (FedImpro Eq. 7, ε ~ N(0, σ_ε²))
            noise = torch_generator(ctx.spec.seed, "fedimpro-noise", ctx.round_index, ctx.client_id, device=ctx.device)
            mu = mu + self.params.noise_std * torch.randn(mu.shape, generator=noise, device=ctx.device)
            # spec §8 #9 [proposal]: σ + ε can be negative; clamp at 0
            sigma = (
                sigma + self.params.noise_std * torch.randn(sigma.shape, generator=noise, device=ctx.device)
            ).clamp_min(0)
        update.extra["mu"], update.extra["sigma"] = mu.clone(), sigma.clone()

    # ---------------------------------------------------------------- accounting (spec §1.11: 2·C·D floats)
    def extra_upload_floats(self, model_params):
        return 2 * self.num_classes * self.feature_dim if hasattr(self, "num_classes") else 0

    def extra_download_floats(self, model_params):
        return self.extra_upload_floats(model_params)
