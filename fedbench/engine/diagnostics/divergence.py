"""The per-layer divergences (``fedbench/vocab/diagnostics.py``): ``weight_divergence``, each sampled client's
uploaded weights to the aggregated ones after the round (FedImpro §5.1, Figs. 2(b), 3, 9), and
``personal_divergence``, each client's own model to the round's global model in personal evaluation (LG-Mix §5.3,
Fig. 3). Both read weights only."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from fedbench.algorithms.context import ClientUpdate
from fedbench.algorithms.functional import flat_parameters
from fedbench.engine.diagnostics.base import Aggregated, Evaluated, rounded
from fedbench.engine.state import RunState
from fedbench.vocab.diagnostics import DivergenceValue


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
) -> DivergenceValue:
    """The per-layer divergence value (``weight_divergence``, ``personal_divergence``): each client's distances,
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
) -> DivergenceValue:
    """Per layer ℓ and sampled client i: ‖θ_i,ℓ − θ̄_ℓ‖, θ̄ the aggregated weights of the round (FedImpro §5.1)."""
    distance = [layer_distances(layers, u.params, global_params) for u in updates]
    return divergence(layers, [u.client_id for u in updates], distance, global_params)


def weight_divergence_of(aggregated: Aggregated) -> DivergenceValue:
    """The ``weight_divergence`` producer: the round's uploads against its aggregated weights."""
    return weight_divergence(aggregated.layers, aggregated.updates, aggregated.server.params)


class PersonalDivergence:
    """``personal_divergence`` over one evaluated round: per client, per layer ‖w_c − u‖ of its own model to the
    round's global model u (LG-Mix Fig. 3)."""

    def __init__(self, run: RunState):
        self.run = run
        self.layers = layer_slices(run.model)
        self.distances: list[list[float]] = []

    def add(self, seen: Evaluated) -> None:
        self.distances.append(
            layer_distances(self.layers, flat_parameters(seen.model.parameters()), self.run.server.params)
        )

    def value(self) -> DivergenceValue:
        return divergence(self.layers, range(self.run.spec.num_clients), self.distances, self.run.server.params)


__all__ = [
    "PersonalDivergence",
    "divergence",
    "layer_distances",
    "layer_slices",
    "weight_divergence",
    "weight_divergence_of",
]
