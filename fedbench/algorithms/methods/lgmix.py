"""LG-Mix (Jiang, Le, Li & Dou, ICLR 2024): personalised FL by mixing local and global updates with a
coefficient derived from the convergence rate (spec: shared/papers/lgmix.md).

Every client keeps a personal model w_c and trains from it (not from u) each round (LG-Mix Alg. 1):
    Δw_c(t) = w_c(t, K) − w_c(t, 0)                                          (LG-Mix Eq. 1)
    Δu(t)   = Σ_c p_c Δw_c(t),   u(t+1) = u(t) + Δu(t)    (p_c = n_c/n, η_g = 1: Alg. 1 line 8)
    w_c(t+1) = w_c(t) + λ_c(t) Δw_c(t) + (1 − λ_c(t)) Δu(t)                   (LG-Mix Eq. 2)
λ = 0 is FedAvg (every w_c stays u), λ = 1 local training. One scalar per client mixes *every* tensor,
BatchNorm running statistics included (spec §1.2 [code]); num_batches_tracked is the client's own.

The mixing ratio compares the convergence rates of the local and the global model through the traces of
their last-layer feature Gram matrices on the client's own training batches (LG-Mix Eq. 4–6):
    λ_c(t) = tr(Σ_c) / (tr(Σ_c) + tr(Σ_g)),    Σ = Σ_i h(x_i) h(x_i)ᵀ                   (LG-Mix Eq. 5–6)
h_c: the penultimate features of the client model in train mode, accumulated during local SGD (the forward
pass of each batch, before its step); h_g: those of the round's global model u(t), fixed, in eval mode
(spec §8 #2–#4 [code]); both reset every round. Defaults follow the official code (spec §1.5, §8 #1):
Σ centred and averaged (a covariance) and its smallest singular value dropped; ``center = false,
drop_smallest = false`` is the paper-literal uncentred trace. Spatial features (U-Net) are average-pooled
[proposal, §8 #15].
History stabilisation (LG-Mix §3.3): λ̄_c(t) = mean of λ_c(1..t), the current round included ([code]; the
paper's 1/(t−1) Σ_{i<t} is undefined at t = 1, §8 #5); ``history = false`` is Table 4's "w/o history".
``fixed_lambda`` replaces Eq. 6 by a constant (the fixed-λ comparison reviewers asked for; tests).

Engine mapping: a client uploads u(t) + Δw_c (so FedAvg's averaging yields u(t) + Δu exactly as Eq. 1–2's
server step); ``end_local`` keeps w_c(t) + λ̄Δw_c − (1 − λ̄)u(t) in the round's scratch and ``after_aggregation``
adds (1 − λ̄)·u(t+1) once the server has aggregated, completing Eq. 2 before the round ends. Evaluation only
reads the personal model. The paper trains every client every round; under partial participation a client
applies Eq. 2 in the rounds it trains, with that round's Δu(t), and keeps w_c in the others [proposal].
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import Algorithm, mixing_weights
from fedbench.algorithms.params import LGMixParams
from fedbench.algorithms.partial import restore_model
from fedbench.errors import ConfigError, FedbenchError
from fedbench.vocab.diagnostics import MIXING_WEIGHTS


def feature_moments(h: torch.Tensor, moments: list | None) -> list:
    """Accumulate (Σ h hᵀ, Σ h, n) in float64; spatial feature maps are average-pooled first."""
    h = h.detach().flatten(2).mean(2) if h.dim() > 2 else h.detach()
    h = h.double()
    if moments is None:
        moments = [
            torch.zeros(h.shape[1], h.shape[1], dtype=torch.float64, device=h.device),
            torch.zeros(h.shape[1], dtype=torch.float64, device=h.device),
            0,
        ]
    moments[0] += h.T @ h
    moments[1] += h.sum(0)
    moments[2] += h.shape[0]
    return moments


def gram_trace(moments: list, center: bool = True, drop_smallest: bool = True) -> float:
    """tr(Σ) of LG-Mix Eq. 5 (up to the factor 1/m, which cancels in Eq. 6), optionally as the [code] computes
    it: Σ = (1/n) Σ_i (h_i − h̄)(h_i − h̄)ᵀ and the sum of its singular values without the smallest."""
    outer, total, n = moments
    sigma = (outer - torch.outer(total, total) / n) / n if center else outer / n
    if not drop_smallest:
        return float(torch.trace(sigma))
    values = torch.linalg.eigvalsh(sigma).abs()  # Σ is symmetric PSD: its singular values
    return float(values.sum() - values.min())


def complete_mix(
    state: dict, mix_params: torch.Tensor, share: float, mix_buffers: dict[str, torch.Tensor], server
) -> None:
    """Store w_c(t+1) = mix + (1 − λ̄)·u(t+1) (LG-Mix Eq. 2), ``mix`` = w_c(t) + λ̄Δw_c − (1 − λ̄)u(t), for the
    parameters and the floating BN buffers; num_batches_tracked stays the client's own."""
    params = mix_params + share * server.params
    buffers = {
        name: b + share * server.buffers[name] if b.is_floating_point() else b for name, b in mix_buffers.items()
    }
    state["personal_params"] = params.detach().clone()
    state["personal_buffers"] = {name: b.detach().clone() for name, b in buffers.items()}


def mixing_ratio(local_trace: float, global_trace: float) -> float:
    """λ_c = tr(Σ_c) / (tr(Σ_c) + tr(Σ_g)) (LG-Mix Eq. 6); 1/2 when both traces vanish [proposal]."""
    denominator = local_trace + global_trace
    return min(1.0, max(0.0, local_trace / denominator)) if denominator > 0 else 0.5


class LGMix(Algorithm):
    Params = LGMixParams
    reported_diagnostics = frozenset({MIXING_WEIGHTS})
    params: LGMixParams

    # ---------------------------------------------------------------- the personal model w_c
    def begin_local(self, ctx):
        # else u(t): all w_c(0) = u(0) when every client trains in round 1; under partial participation a
        # client's first round starts from the current u [proposal]
        restore_model(ctx, "personal", ctx.model)
        ctx.scratch["start_params"] = ctx.current_params()
        ctx.scratch["start_buffers"] = ctx.current_buffers()

    def forward(self, ctx, x):
        logits = super().forward(ctx, x)
        if self.params.fixed_lambda is None:
            local_features = ctx.scratch["features"]
            if local_features is None:
                raise ConfigError("lgmix needs a model with a features/head split (penultimate features h)")
            _, global_features = self.teacher_outputs(ctx, x)  # u(t), eval mode, no grad
            assert global_features is not None  # u(t) has the architecture of the local model (checked above)
            ctx.scratch["local_moments"] = feature_moments(local_features, ctx.scratch.get("local_moments"))
            ctx.scratch["global_moments"] = feature_moments(global_features, ctx.scratch.get("global_moments"))
        return logits

    def round_lambda(self, ctx) -> float:
        """λ_c(t) of LG-Mix Eq. 6 for this round's local training."""
        if self.params.fixed_lambda is not None:
            return self.params.fixed_lambda
        if "local_moments" not in ctx.scratch:  # no local step (empty client): keep the global update
            return 0.0
        p = self.params
        return mixing_ratio(
            gram_trace(ctx.scratch["local_moments"], p.center, p.drop_smallest),
            gram_trace(ctx.scratch["global_moments"], p.center, p.drop_smallest),
        )

    def end_local(self, ctx, update):
        lam = self.round_lambda(ctx)
        if self.params.history:  # LG-Mix §3.3, [code]: cumulative mean including the current round
            ctx.state["lambda_sum"] = ctx.state.get("lambda_sum", torch.tensor(0.0, dtype=torch.float64)) + lam
            ctx.state["lambda_count"] = ctx.state.get("lambda_count", torch.tensor(0)) + 1
            lam = float(ctx.state["lambda_sum"] / ctx.state["lambda_count"])
        ctx.state["lambda"] = torch.tensor(lam, dtype=torch.float64)  # λ̄_c(t), e.g. for Fig. 2a
        share = 1.0 - lam
        start, start_buffers = ctx.scratch["start_params"], ctx.scratch["start_buffers"]
        delta = update.params - start  # Δw_c, LG-Mix Eq. 1
        # Eq. 2 without its last term (1 − λ̄)u(t+1), which after_aggregation adds
        ctx.scratch["mix_params"] = start + lam * delta - share * ctx.global_params
        ctx.scratch["mix_global_share"] = share
        mixed_buffers, uploaded = {}, {}
        for name, b in update.buffers.items():
            if b.is_floating_point():  # BN running statistics are mixed and aggregated like weights [code]
                delta_b = b - start_buffers[name]
                mixed_buffers[name] = start_buffers[name] + lam * delta_b - share * ctx.global_buffers[name]
                uploaded[name] = ctx.global_buffers[name] + delta_b
            else:  # num_batches_tracked: the client's own count
                mixed_buffers[name] = b.clone()
                uploaded[name] = b
        ctx.scratch["mix_buffers"] = mixed_buffers
        update.params = ctx.global_params + delta  # so that Σ p_c (u + Δw_c) = u(t) + Δu(t)
        update.buffers = uploaded

    def round_diagnostics(self, names, server, contexts):
        """λ̄_c(t) of each client of the round (LG-Mix Fig. 2(a))."""
        return {MIXING_WEIGHTS: mixing_weights(contexts, "lambda", "λ")} if MIXING_WEIGHTS in names else {}

    def after_aggregation(self, ctx, server):
        """LG-Mix Eq. 2 once u(t+1) is known: w_c(t+1) = [w_c(t) + λ̄Δw_c − (1 − λ̄)u(t)] + (1 − λ̄)u(t+1)."""
        complete_mix(
            ctx.state, ctx.scratch["mix_params"], ctx.scratch["mix_global_share"], ctx.scratch["mix_buffers"], server
        )

    def resume_states(self, server, client_states, round_index, last_clients):
        """Checkpoints written before ``after_aggregation`` existed (an earlier fedbench) keep Eq. 2 pending in the
        client state (``mix_params``, ``mix_global_share``, ``mix_buffers``) until the client's next use. A client
        of the checkpoint's round is completed with the checkpoint's u, its u(t+1), exactly as ``after_aggregation``
        does; a mix pending since an earlier round (partial participation, not evaluated since) was meant for a
        u(t+1) the checkpoint no longer holds, so that checkpoint is rejected."""
        pending = sorted(client for client, state in client_states.items() if "mix_params" in state)
        stale = [client for client in pending if client not in last_clients]
        if stale:
            raise FedbenchError(
                f"LG-Mix client {stale[0]} holds a personal model left incomplete (Eq. 2) since before round "
                f"{round_index}, by an earlier fedbench under partial participation; it cannot be completed "
                "exactly. Delete the checkpoint (or re-run with --force) to train this run again from round 1"
            )
        for client in pending:
            state = client_states[client]
            complete_mix(
                state, state.pop("mix_params"), float(state.pop("mix_global_share")), state.pop("mix_buffers"), server
            )

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)  # a client that never trained is evaluated with u
        return ctx.model

    def attach_flops_per_round(self, *, samples, forward_flops, steps, batch_size, **_):
        """The global model's forward pass on every local batch (the features h_g of Eq. 6)."""
        return float(steps * batch_size * forward_flops)
