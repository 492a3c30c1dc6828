"""The diagnostic catalogue: the one place that names the per-round diagnostics a spec may ask for.

A diagnostic shows *why* a method works rather than how well: a run records it only when its spec asks for it
(``RunSpec.diagnostics``, on the rounds ``RunSpec.diagnoses`` picks), in the round's ``diagnostics`` field
(``{name: value}``, a JSON object stored with the round). Computing one never changes training: the engine reads
the round's client updates and global weights (and runs a sample of test points through them), evaluation reuses
personal evaluation's forward passes, and a method reports its own values through ``Algorithm.round_diagnostics``.

Each entry says its shape, the type of the JSON value one round stores (``value``: a ``TypedDict`` below, whose keys
are the stored object's), where it is produced (``source``), what it needs of the run (``needs``: one table,
``NEEDS``, and one check, ``unmet_need``, that the spec, the engine and the method contract all ask), and what it
means, with the paper figures it serves. Other modules name a diagnostic by its constant here (``WEIGHT_DIVERGENCE``
…), never by a string of their own: the engine's producers (``fedbench/engine/diagnostics/``) and the report's
drawers (``fedbench/report/diagnostics/``) are tables keyed by these names. Plain data: no torch, no pydantic.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

Shape = Literal["scalar", "per_layer", "per_client", "per_class", "per_point"]
# aggregation: the round loop, once the round is aggregated, from the round's updates and weights; evaluation:
# personal evaluation, from its forward passes and each client's own model; method: the method's own hook
# (``Algorithm.round_diagnostics``), after aggregation
Source = Literal["aggregation", "evaluation", "method"]
Need = Literal["personal_evaluation", "validation_split", "classification", "fed_model", "method_report"]

WEIGHT_DIVERGENCE = "weight_divergence"
VAL_LOSS = "val_loss"
PERSONAL_DIVERGENCE = "personal_divergence"
MIXING_WEIGHTS = "mixing_weights"
FEATURE_SNAPSHOT = "feature_snapshot"
FEATURE_STATS = "feature_stats"
ACTIVATIONS = "activations"


# ------------------------------------------------------------------------------------------ the values
# Numbers are rounded to 6 significant digits (snapshots: float16), a client is its id, a layer its module's name.
class DivergenceValue(TypedDict):
    """``weight_divergence`` (θ_i: client i's uploaded weights, θ̄: the aggregated ones) and ``personal_divergence``
    (w_c: client c's own model, u: the round's global model)."""

    layers: list[str]  # each layer ℓ: a module holding parameters, in parameter order
    clients: list[int]
    distance: list[list[float]]  # per client, per layer: ‖θ_i,ℓ − θ̄_ℓ‖ (‖w_c,ℓ − u_ℓ‖)
    mean: list[float]  # per layer: the mean of ``distance`` over the clients
    global_norm: list[float]  # per layer: ‖θ̄_ℓ‖ (‖u_ℓ‖)


class ValLossValue(TypedDict):
    clients: list[int]
    loss: list[float]  # per client: its own model's mean loss on its validation split
    mean: float | None  # the plain mean over clients (None without clients)


class MixingWeightsValue(TypedDict):
    clients: list[int]  # the round's clients that hold a weight
    weight: list[float]  # per client
    symbol: str  # the method's name for it: "λ" (LG-Mix), "α" (APFL)


# "global" is a Python keyword: the functional form
FeatureSnapshotValue = TypedDict(
    "FeatureSnapshotValue",
    {
        "points": list[int],  # the test indices of the n points
        "labels": list[int],  # their classes
        "shape": list[int],  # [n, d]
        "dtype": str,  # "float16", little-endian
        "global": str,  # the global model's n × d features, row-major, base64
        "client": int,  # the client whose local model ``local`` is (0)
        "local": str | None,  # its features, null when it did not train in the round
        "note": NotRequired[str],  # why ``local`` is null
    },
)


# the eight quantities of FedDr+ §3, each per client: the mean over the split's test points (None: not defined)
class FeatureSplit(TypedDict):
    count: list[int]  # per client: the split's test points
    alignment: list[float | None]
    alignment_gap: list[float | None]
    accuracy: list[float | None]
    accuracy_gap: list[float | None]
    distance: list[float | None]
    angle: list[float | None]  # radians
    norm: list[float | None]
    norm_gap: list[float | None]


class FeatureMeans(TypedDict):
    observed: dict[str, float | None]  # quantity → its plain mean over the clients that have a value
    unobserved: dict[str, float | None]


class FeatureStatsValue(TypedDict):
    clients: list[int]  # the round's sampled clients
    test_points: int  # the fixed sample's size
    observed_classes: list[int]  # per client: |O^i|
    observed: FeatureSplit  # the test points of the classes O^i the client trained on
    unobserved: FeatureSplit  # those of the others, U^i
    mean: FeatureMeans


class ActivationsValue(TypedDict):
    clients: list[int]
    quantile_levels: list[float]  # p of each quantile (0 and 1: min and max)
    mean: list[float | None]  # per client, over every test point and unit (None: no test points)
    std: list[float | None]
    zero_fraction: list[float | None]
    quantiles: list[list[float] | None]  # per client: the value at each level


# ------------------------------------------------------------------------------------------ the entries
@dataclass(frozen=True)
class Diagnostic:
    name: str
    shape: Shape
    source: Source
    value: type  # the TypedDict of the JSON value stored for one round
    meaning: str
    figures: tuple[str, ...]  # the paper figures it serves
    # what the run must have (``NEEDS``); a diagnostic of personal evaluation is recorded on the rounds it evaluates
    needs: tuple[Need, ...] = ()
    # the view layouts (``TableView.layout``) its figure has besides "default"
    layouts: tuple[str, ...] = ()


# What each need asks of a run, as the sentence that refuses a run without it (after "diagnostic 'name' "); the
# fields in braces are the run's (``unmet_need``'s ``facts``).
NEEDS: dict[Need, str] = {
    "personal_evaluation": "is measured by personal evaluation: set eval_mode 'personal' or 'both'",
    "validation_split": "is measured on the clients' validation splits: set client_val_fraction > 0",
    "classification": "tells the test points apart by class: dataset {dataset!r} is a {task} task",
    "fed_model": "reads FedModel.features(x): model {model!r} is not a FedModel (fedbench.models)",
    "method_report": (
        "is reported by the method, and {algorithm} does not report it (methods that do: those whose "
        "reported_diagnostics names it, e.g. lgmix, apfl)"
    ),
}


DIAGNOSTICS: dict[str, Diagnostic] = {
    d.name: d
    for d in (
        Diagnostic(
            WEIGHT_DIVERGENCE,
            "per_layer",
            "aggregation",
            DivergenceValue,
            "layer-wise weight divergence after aggregation: for each sampled client i and each layer ℓ (a module "
            "with parameters, in parameter order), the L2 distance between the weights θ_i it uploads (its locally "
            "trained model) and the aggregated global weights θ̄ of the round; ``mean`` is (1/|S^r|) Σ_i over the "
            "sampled clients. FedImpro §5.1–5.2 measure (1/|S^r|) Σ_{i∈S^r} ‖θ̄ − θ_i‖ over the whole model (Fig. "
            "2(b): the mean over clients of √(Σ_ℓ distance²)) and §5.4 per layer (Figs. 3 and 9, each line "
            "normalised by its maximum); divide by ``global_norm`` for the relative divergence",
            ("FedImpro Fig. 2(b)", "FedImpro Fig. 3", "FedImpro Fig. 9"),
            layouts=("whole_model", "per_layer", "per_stage"),
        ),
        Diagnostic(
            VAL_LOSS,
            "per_client",
            "evaluation",
            ValLossValue,
            "each client's own model (``Algorithm.eval_model``) on its validation split: the mean loss (cross-entropy, "
            "or the task's loss), every client, and its plain mean over clients (LG-Mix Fig. 4's validation-loss "
            "panel). Recorded on the diagnosed rounds that are evaluated; needs client_val_fraction > 0 and "
            "eval_mode 'personal' or 'both'",
            ("LG-Mix Fig. 4",),
            needs=("personal_evaluation", "validation_split"),
        ),
        Diagnostic(
            PERSONAL_DIVERGENCE,
            "per_layer",
            "evaluation",
            DivergenceValue,
            "per layer ℓ, the L2 distance between each client's own model w_c (``Algorithm.eval_model``: its "
            "personalised model, the one personal evaluation scores) and the global model u of the round (LG-Mix "
            "§5.3, Fig. 3: 'the differences (i.e., w_c − u in layer-wise) of each layer'); zero for a method whose "
            "clients are evaluated with the global model. Recorded on the diagnosed rounds that are evaluated",
            ("LG-Mix Fig. 3",),
            needs=("personal_evaluation",),
        ),
        Diagnostic(
            MIXING_WEIGHTS,
            "per_client",
            "method",
            MixingWeightsValue,
            "the method's mixing weight of each client that trained in the round, after the round: LG-Mix's λ_c "
            "(Eq. 6, averaged over rounds as §3.3 proposes when the method does) and APFL's α_k; ``symbol`` names "
            "it (LG-Mix Fig. 2(a)). Only methods that mix report it (``Algorithm.round_diagnostics``)",
            ("LG-Mix Fig. 2(a)",),
            needs=("method_report",),
        ),
        Diagnostic(
            FEATURE_SNAPSHOT,
            "per_point",
            "aggregation",
            FeatureSnapshotValue,
            "the features FedModel.features(x) (the penultimate representation, FedTrip's 84-d CNN layer as the spec "
            "resolves Fig. 2's unnamed layer) of a fixed sample of n ≤ 500 test points (the same every round and for "
            "every method: its own random stream of the seed), of the global model after the round's aggregation "
            "(``global``) and of client 0's local model, the weights it uploaded that round (``local``; null with a "
            "``note`` when it did not train in the round); each n × d float16 little-endian, row-major, base64; at "
            "most 500 × 512 values per model (wider features keep fewer points). FedTrip Fig. 2: t-SNE of test-set "
            "features of (a) the global model at round 50, client 1's local model at rounds (b) 50 and (c) 30 "
            "(the paper's client 1 is client 0 here); fedbench/engine/diagnostics/snapshots.py",
            ("FedTrip Fig. 2(a)", "FedTrip Fig. 2(b)", "FedTrip Fig. 2(c)"),
            needs=("classification", "fed_model"),
        ),
        Diagnostic(
            FEATURE_STATS,
            "per_client",
            "aggregation",
            FeatureStatsValue,
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
            "test points (engine/diagnostics/features.py's FEATURE_SAMPLE, from a stream of its own); classification "
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
            needs=("classification", "fed_model"),
        ),
        Diagnostic(
            ACTIVATIONS,
            "per_client",
            "evaluation",
            ActivationsValue,
            "the distribution of the last-hidden-layer values (``FedModel.features``: after the model's last ReLU) "
            "of each client's own model (``Algorithm.eval_model``, FedAvg's global model, local-only training's "
            "local one) over its test set, every point and unit: mean, std, the fraction of zeros and the quantiles "
            "at ``quantile_levels`` (0 and 1: min and max), LG-Mix Fig. 2(b)'s 'feature values' per client. "
            "Recorded on the diagnosed rounds that are evaluated; needs eval_mode 'personal' or 'both'",
            ("LG-Mix Fig. 2(b)",),
            needs=("personal_evaluation", "fed_model"),
        ),
    )
}

# The names a spec may ask for, in catalogue order (``RunSpec.diagnostics``).
DIAGNOSTIC_NAMES: tuple[str, ...] = tuple(DIAGNOSTICS)


def unmet_need(
    names: Iterable[str],
    has: Mapping[Need, bool],
    reported: Collection[str] | None = None,
    **facts: object,
) -> str | None:
    """The sentence refusing the first of ``names`` (in their order) whose needs the run does not meet, or None.
    ``has``: what the run has, as far as the caller knows (a need it leaves out is not judged); ``reported``: the
    diagnostics the run's method reports (None: not known), which a ``method_report`` need asks for; ``facts``: the
    run's ``dataset``, ``task``, ``model`` and ``algorithm``, as the sentence names them."""
    for name in names:
        for need in DIAGNOSTICS[name].needs:
            met = (None if reported is None else name in reported) if need == "method_report" else has.get(need)
            if met is False:
                return f"diagnostic {name!r} " + NEEDS[need].format(**facts)
    return None
