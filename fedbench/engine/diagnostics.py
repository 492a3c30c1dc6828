"""Per-round diagnostics (``fedbench/vocab/diagnostics.py``): computed on the rounds the spec diagnoses
(``RunSpec.diagnoses``), from what the round already holds, so recording them never changes training. The engine's
own (``weight_divergence``) read the round's client updates and the aggregated weights; the method's come through
``Algorithm.round_diagnostics``; ``val_loss`` and ``personal_divergence`` come from personal evaluation's forward
passes and models (``fedbench.engine.personal``); ``feature_snapshot`` runs a fixed sample of test points through
the round's global and local models (``fedbench.engine.snapshots``, its sample from a stream of its own). None draws
from a stream training draws from. Values are JSON, rounded to ``DIGITS`` significant digits (snapshots: float16): a
diagnostic is drawn, never compared to a published number, and the rounding bounds its size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import ClientContext, ClientUpdate, ServerState
from fedbench.errors import ConfigError
from fedbench.spec import RunSpec
from fedbench.vocab.diagnostics import DIAGNOSTICS

DIGITS = 6  # significant digits of every stored value


def rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def check_diagnostics(spec: RunSpec, algorithm: Algorithm) -> None:
    """A ConfigError, when the run starts, for a diagnostic of source "method" that the spec's method does not
    report (``Algorithm.reported_diagnostics``)."""
    for name in spec.diagnostics:
        if DIAGNOSTICS[name].source == "method" and name not in algorithm.reported_diagnostics:
            raise ConfigError(
                f"diagnostic {name!r} is reported by the method, and {spec.algorithm} does not report it "
                f"(methods that do: those whose reported_diagnostics names it, e.g. lgmix, apfl)"
            )


def diagnostics_of(spec: RunSpec) -> tuple[str, ...]:
    """Every diagnostic ``spec``'s method can record in ``spec``'s setting: the engine's, personal evaluation's where
    the setting has validation splits, and those the method reports."""
    reported = build_algorithm(spec.algorithm, spec.algorithm_params).reported_diagnostics
    has = {"personal_evaluation": spec.eval_mode != "global", "validation_split": spec.client_val_fraction > 0}
    return tuple(
        name
        for name, d in DIAGNOSTICS.items()
        if (d.source != "method" or name in reported) and all(has[need] for need in d.needs)
    )


def layer_slices(model: nn.Module) -> list[tuple[str, int, int]]:
    """(layer, start, stop) over the flat parameter vector (``parameters_to_vector`` order): a layer is a module
    that holds parameters directly (``fc1`` for ``fc1.weight`` and ``fc1.bias``), as FedImpro Fig. 3 and LG-Mix
    Fig. 3 count layers (a BatchNorm layer included)."""
    layers: list[tuple[str, int, int]] = []
    offset = 0
    for name, parameter in model.named_parameters():
        layer = name.rpartition(".")[0] or name
        stop = offset + parameter.numel()
        if layers and layers[-1][0] == layer and layers[-1][2] == offset:
            layers[-1] = (layer, layers[-1][1], stop)
        else:
            layers.append((layer, offset, stop))
        offset = stop
    return layers


def layer_distances(
    layers: Sequence[tuple[str, int, int]], params: torch.Tensor, reference: torch.Tensor
) -> list[float]:
    """‖params_ℓ − reference_ℓ‖ per layer ℓ of two flat parameter vectors (in float64)."""
    with torch.no_grad():
        return [float((params[start:stop] - reference[start:stop]).double().norm()) for _, start, stop in layers]


def divergence(
    layers: Sequence[tuple[str, int, int]], clients: Sequence[int], distance: Sequence[Sequence[float]], reference
) -> dict[str, Any]:
    """The per-layer divergence layout (``weight_divergence``, ``personal_divergence``): each client's distances,
    their mean over the clients and the reference's norm, per layer."""
    mean = [sum(column) / len(column) for column in zip(*distance)] if distance else []
    with torch.no_grad():
        norm = [float(reference[start:stop].double().norm()) for _, start, stop in layers]
    return {
        "layers": [name for name, _, _ in layers],
        "clients": list(clients),
        "distance": [[rounded(v) for v in row] for row in distance],
        "mean": [rounded(v) for v in mean],
        "global_norm": [rounded(v) for v in norm],
    }


def weight_divergence(
    layers: Sequence[tuple[str, int, int]], updates: Sequence[ClientUpdate], global_params: torch.Tensor
) -> dict[str, Any]:
    """Per layer ℓ and sampled client i: ‖θ_i,ℓ − θ̄_ℓ‖, θ̄ the aggregated weights of the round (FedImpro §5.1)."""
    distance = [layer_distances(layers, u.params, global_params) for u in updates]
    return divergence(layers, [u.client_id for u in updates], distance, global_params)


def round_diagnostics(
    spec: RunSpec,
    algorithm: Algorithm,
    layers: Sequence[tuple[str, int, int]],
    server: ServerState,
    updates: Sequence[ClientUpdate],
    contexts: Sequence[ClientContext],
) -> dict[str, Any]:
    """The diagnostics of an aggregated round that the engine and the method compute (personal evaluation adds
    ``val_loss`` later in the round)."""
    names = frozenset(spec.diagnostics)
    out: dict[str, Any] = {}
    if "weight_divergence" in names:
        out["weight_divergence"] = weight_divergence(layers, updates, server.params)
    method = names & algorithm.reported_diagnostics
    if method:
        out.update(algorithm.round_diagnostics(method, server, contexts))
    return out


def val_loss(losses: Sequence[float]) -> dict[str, Any]:
    """The ``val_loss`` diagnostic from every client's validation loss (client order)."""
    return {
        "clients": list(range(len(losses))),
        "loss": [rounded(v) for v in losses],
        "mean": rounded(sum(losses) / len(losses)) if losses else None,
    }


__all__ = [
    "check_diagnostics",
    "diagnostics_of",
    "divergence",
    "layer_distances",
    "layer_slices",
    "round_diagnostics",
    "val_loss",
    "weight_divergence",
    "DIGITS",
]
