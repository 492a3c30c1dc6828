"""The producers of the per-round diagnostics, one per catalogue entry (``fedbench/vocab/diagnostics.py``), and what
the round loop and personal evaluation ask of them. Neither names a diagnostic: the loop calls ``round_diagnostics``
once a diagnosed round is aggregated, personal evaluation feeds every client to ``evaluation_collectors``' collectors,
and each goes over the names the spec asks for (catalogue order) and dispatches through ``PRODUCERS``. A run whose
diagnostics it cannot record is refused when it starts (``check_diagnostics``: the catalogue's needs)."""

from __future__ import annotations

from typing import Any

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.engine.diagnostics import divergence, features, method, snapshots, validation
from fedbench.engine.diagnostics.base import Aggregated, Collector, Producer
from fedbench.engine.state import RunState
from fedbench.errors import ConfigError
from fedbench.models.base import FedModel
from fedbench.spec import RunSpec
from fedbench.vocab.diagnostics import (
    ACTIVATIONS,
    DIAGNOSTIC_NAMES,
    FEATURE_SNAPSHOT,
    FEATURE_STATS,
    MIXING_WEIGHTS,
    PERSONAL_DIVERGENCE,
    VAL_LOSS,
    WEIGHT_DIVERGENCE,
    Need,
    unmet_need,
)

PRODUCERS: dict[str, Producer] = {
    WEIGHT_DIVERGENCE: Producer(after_aggregation=divergence.weight_divergence_of),
    VAL_LOSS: Producer(in_evaluation=validation.ValLosses),
    PERSONAL_DIVERGENCE: Producer(in_evaluation=divergence.PersonalDivergence),
    MIXING_WEIGHTS: Producer(after_aggregation=method.reported(MIXING_WEIGHTS)),
    FEATURE_SNAPSHOT: Producer(after_aggregation=snapshots.snapshot_of),
    FEATURE_STATS: Producer(after_aggregation=features.feature_stats_of),
    ACTIVATIONS: Producer(in_evaluation=features.Activations),
}


def check_diagnostics(spec: RunSpec, algorithm: Algorithm, task: str | None = None, model: Any = None) -> None:
    """A ConfigError, when the run starts, for a diagnostic the run cannot record (the catalogue's needs the spec
    does not decide): one its method does not report (``Algorithm.reported_diagnostics``), one that tells test points
    apart by class on a task without classes (``task``), one that reads ``FedModel.features`` of another model
    (``model``). ``task`` or ``model`` None: not judged."""
    has: dict[Need, bool] = {}
    if task is not None:
        has["classification"] = task == "classification"
    if model is not None:
        has["fed_model"] = isinstance(model, FedModel)
    facts = {"dataset": spec.dataset, "task": task, "model": spec.model, "algorithm": spec.algorithm}
    refused = unmet_need(spec.diagnostics, has, algorithm.reported_diagnostics, **facts)
    if refused is not None:
        raise ConfigError(refused)


def diagnostics_of(spec: RunSpec) -> tuple[str, ...]:
    """Every diagnostic ``spec``'s method can record in ``spec``'s setting: those whose needs the setting meets
    (personal evaluation, validation splits) and that the method reports where the method must."""
    reported = build_algorithm(spec.algorithm, spec.algorithm_params).reported_diagnostics
    has: dict[Need, bool] = {
        "personal_evaluation": spec.eval_mode != "global",
        "validation_split": spec.client_val_fraction > 0,
    }
    return tuple(
        name for name in DIAGNOSTIC_NAMES if unmet_need([name], has, reported, algorithm=spec.algorithm) is None
    )


def round_diagnostics(aggregated: Aggregated) -> dict[str, Any]:
    """{name: value} of the diagnostics the spec asks for that are produced once the round is aggregated (the engine's
    and the method's; personal evaluation adds its own later in the round)."""
    out: dict[str, Any] = {}
    for name in aggregated.spec.diagnostics:
        produce = PRODUCERS[name].after_aggregation
        value = None if produce is None else produce(aggregated)
        if value is not None:
            out[name] = value
    return out


def evaluation_collectors(run: RunState, round_index: int) -> dict[str, Collector]:
    """{name: collector} of the diagnostics personal evaluation records in round ``round_index``: those the spec asks
    for that are produced in evaluation, on the rounds it diagnoses; none on the others."""
    if not run.spec.diagnoses(round_index):
        return {}
    collectors = {}
    for name in run.spec.diagnostics:
        collect = PRODUCERS[name].in_evaluation
        if collect is not None:
            collectors[name] = collect(run)
    return collectors


__all__ = ["PRODUCERS", "check_diagnostics", "diagnostics_of", "evaluation_collectors", "round_diagnostics"]
