"""The diagnostic catalogue: the one place that names the per-round diagnostics a spec may ask for.

A diagnostic shows *why* a method works rather than how well: a run records it only when its spec asks for it
(``RunSpec.diagnostics``, on the rounds ``RunSpec.diagnoses`` picks), in the round's ``diagnostics`` field
(``{name: value}``, a JSON object stored with the round). Computing one never changes training: the engine reads
the round's client updates and global weights (and runs a sample of test points through them), evaluation reuses
personal evaluation's forward passes, and a method reports its own values through ``Algorithm.round_diagnostics``.

Each entry says its shape (how its value is laid out), who computes it (``source``: the engine, personal
evaluation, or the method), what it needs of the spec, and what it means, with the paper figure it serves.
Plain data: no torch, no pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Shape = Literal["scalar", "per_layer", "per_client", "per_class", "per_point"]
Source = Literal["engine", "evaluation", "method"]
Need = Literal["personal_evaluation", "validation_split"]


@dataclass(frozen=True)
class Diagnostic:
    name: str
    shape: Shape  # per_layer values come per sampled client too (``layout`` says how)
    source: Source  # engine: from the round's updates and weights; evaluation: personal evaluation; method: its hook
    layout: str  # the JSON value stored for one round
    meaning: str
    figures: tuple[str, ...]  # the paper figures it serves
    # what the spec must have: personal evaluation (eval_mode 'personal' or 'both'), a validation split
    # (client_val_fraction > 0); a diagnostic of personal evaluation is recorded on the rounds it evaluates
    needs: tuple[Need, ...] = ()


DIAGNOSTICS: dict[str, Diagnostic] = {
    d.name: d
    for d in (
        Diagnostic(
            "weight_divergence",
            "per_layer",
            "engine",
            '{"layers": [name], "clients": [id], "distance": [[‖θ_i,ℓ − θ̄_ℓ‖ per layer] per client], '
            '"mean": [per layer], "global_norm": [‖θ̄_ℓ‖ per layer]}',
            "layer-wise weight divergence after aggregation: for each sampled client i and each layer ℓ (a module "
            "with parameters, in parameter order), the L2 distance between the weights θ_i it uploads (its locally "
            "trained model) and the aggregated global weights θ̄ of the round; ``mean`` is (1/|S^r|) Σ_i over the "
            "sampled clients. FedImpro §5.1–5.2 measure (1/|S^r|) Σ_{i∈S^r} ‖θ̄ − θ_i‖ over the whole model (Fig. "
            "2(b): the mean over clients of √(Σ_ℓ distance²)) and §5.4 per layer (Figs. 3 and 9, each line "
            "normalised by its maximum); divide by ``global_norm`` for the relative divergence",
            ("FedImpro Fig. 2(b)", "FedImpro Fig. 3", "FedImpro Fig. 9"),
        ),
        Diagnostic(
            "val_loss",
            "per_client",
            "evaluation",
            '{"clients": [id], "loss": [per client], "mean": float}',
            "each client's own model (``Algorithm.eval_model``) on its validation split: the mean loss (cross-entropy, "
            "or the task's loss), every client, and its plain mean over clients (LG-Mix Fig. 4's validation-loss "
            "panel). Recorded on the diagnosed rounds that are evaluated; needs client_val_fraction > 0 and "
            "eval_mode 'personal' or 'both'",
            ("LG-Mix Fig. 4",),
            needs=("personal_evaluation", "validation_split"),
        ),
        Diagnostic(
            "personal_divergence",
            "per_layer",
            "evaluation",
            '{"layers": [name], "clients": [id], "distance": [[‖w_c,ℓ − u_ℓ‖ per layer] per client], '
            '"mean": [per layer], "global_norm": [‖u_ℓ‖ per layer]}',
            "per layer ℓ, the L2 distance between each client's own model w_c (``Algorithm.eval_model``: its "
            "personalised model, the one personal evaluation scores) and the global model u of the round (LG-Mix "
            "§5.3, Fig. 3: 'the differences (i.e., w_c − u in layer-wise) of each layer'); zero for a method whose "
            "clients are evaluated with the global model. Recorded on the diagnosed rounds that are evaluated",
            ("LG-Mix Fig. 3",),
            needs=("personal_evaluation",),
        ),
        Diagnostic(
            "mixing_weights",
            "per_client",
            "method",
            '{"clients": [id], "weight": [per client], "symbol": str}',
            "the method's mixing weight of each client that trained in the round, after the round: LG-Mix's λ_c "
            "(Eq. 6, averaged over rounds as §3.3 proposes when the method does) and APFL's α_k; ``symbol`` names "
            "it (LG-Mix Fig. 2(a)). Only methods that mix report it (``Algorithm.round_diagnostics``)",
            ("LG-Mix Fig. 2(a)",),
        ),
        Diagnostic(
            "feature_snapshot",
            "per_point",
            "engine",
            '{"points": [test index], "labels": [class], "shape": [n, d], "dtype": "float16", "global": base64, '
            '"client": 0, "local": base64 | null, "note": str (when local is null)}',
            "the features FedModel.features(x) (the penultimate representation, FedTrip's 84-d CNN layer as the spec "
            "resolves Fig. 2's unnamed layer) of a fixed sample of n ≤ 500 test points (the same every round and for "
            "every method: its own random stream of the seed), of the global model after the round's aggregation "
            "(``global``) and of client 0's local model, the weights it uploaded that round (``local``; null with a "
            "``note`` when it did not train in the round); each n × d float16 little-endian, row-major, base64; at "
            "most 500 × 512 values per model (wider features keep fewer points). FedTrip Fig. 2: t-SNE of test-set "
            "features of (a) the global model at round 50, client 1's local model at rounds (b) 50 and (c) 30 "
            "(the paper's client 1 is client 0 here); fedbench/engine/snapshots.py",
            ("FedTrip Fig. 2(a)", "FedTrip Fig. 2(b)", "FedTrip Fig. 2(c)"),
        ),
        Diagnostic(
            "feature_stats",
            "per_client",
            "engine",
            '{"clients": [id], "test_points": int, "observed_classes": [|O^i| per client], "observed": {"count": '
            '[per client], q: [per client]}, "unobserved": {same}, "mean": {"observed": {q: float}, "unobserved": '
            "{q: float}}}, q ∈ alignment, alignment_gap, accuracy, accuracy_gap, distance, angle, norm, norm_gap",
            "FedDr+ §3's analysis of each sampled client's locally trained model θ_r^i (the weights it uploads) "
            "against the global model θ_{r−1}^g it started from, on the test points of the classes it observed "
            "(O^i: present in the samples it trained on; the spec's resolution of 'rarely existing' classes, #29: a "
            "zero count) and of the others (U^i), each averaged over those points: alignment cos(f(x;θ_r^i), v_y) "
            "(Figs. 2(a), 5) and its gap to the global model's (Fig. 3(a)); accuracy (Figs. 2(b), 5) and its gap "
            "(Fig. 3(b)); feature distance ‖f(x;θ_r^i) − f(x;θ_{r−1}^g)‖₂ (Fig. 4(a)); feature angle "
            "∠(f(x;θ_r^i), f(x;θ_{r−1}^g)) in radians (Fig. 4(b); the spec's resolution #30: logged in radians, "
            "plots convert to degrees); feature norm ‖f(x;θ_r^i)‖₂ and its difference ‖f(x;θ_r^i)‖₂ − "
            "‖f(x;θ_{r−1}^g)‖₂ (Fig. 4(c)). f: the penultimate features; v_y: row y of each model's own linear "
            "classifier (FedDr+'s frozen ETF: the same for both), null for a head that is not one linear map "
            "(FedETF). ``mean`` is the plain mean over the sampled clients that have test points of the split "
            "(FedDr+: 'averaged over the clients in S_r'); null where none has. On a fixed sample of at most 2,000 "
            "test points (engine/feature_diagnostics.py's FEATURE_SAMPLE, from a stream of its own); classification "
            "only",
            (
                "FedDr+ Fig. 2(a)",
                "FedDr+ Fig. 2(b)",
                "FedDr+ Fig. 3(a)",
                "FedDr+ Fig. 3(b)",
                "FedDr+ Fig. 4(a)",
                "FedDr+ Fig. 4(b)",
                "FedDr+ Fig. 4(c)",
                "FedDr+ Fig. 5",
            ),
        ),
        Diagnostic(
            "activations",
            "per_client",
            "evaluation",
            '{"clients": [id], "quantile_levels": [p], "mean": [per client], "std": [per client], '
            '"zero_fraction": [per client], "quantiles": [[value at each level] per client]}',
            "the distribution of the last-hidden-layer values (``FedModel.features``: after the model's last ReLU) "
            "of each client's own model (``Algorithm.eval_model``, FedAvg's global model, local-only training's "
            "local one) over its test set, every point and unit: mean, std, the fraction of zeros and the quantiles "
            "at ``quantile_levels`` (0 and 1: min and max), LG-Mix Fig. 2(b)'s 'feature values' per client. "
            "Recorded on the diagnosed rounds that are evaluated; needs eval_mode 'personal' or 'both'",
            ("LG-Mix Fig. 2(b)",),
            needs=("personal_evaluation",),
        ),
    )
}

# The names a spec may ask for, in catalogue order (``RunSpec.diagnostics``).
DIAGNOSTIC_NAMES: tuple[str, ...] = tuple(DIAGNOSTICS)
