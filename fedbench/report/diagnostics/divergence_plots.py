"""The figures of the per-layer divergences (``fedbench/vocab/diagnostics.py``), in the papers' layouts (the
``Drawer`` signature of ``fedbench/report/diagnostics/series.py``).

- ``weight_divergence``: FedImpro Fig. 2(b) (``layout`` "whole_model", its default): the whole-model divergence
  (1/|S^r|) Σ_{i∈S^r} ‖θ̄ − θ_i‖ per round, i.e. the mean over the sampled clients of √(Σ_ℓ distance²), methods
  overlaid, the mean over seeds with a min–max band; Figs. 3(a) and 9 ("per_layer"): a line per layer (ten of them,
  or the view's ``layers``), Fig. 3(b) ("per_stage"): a line per stage, each stage's distance √(Σ_{ℓ∈stage}
  distance²); each line is the mean over the sampled clients (and then over seeds), "normalized with its maximum
  value" (FedImpro §5.4), so it ends at its own maximum of 1. The normalisation also removes the authors' code's
  division by √(number of parameters) of each layer, a constant per line.
- ``personal_divergence``: LG-Mix Fig. 3: per layer, ‖w_c − u‖ of each client at the end of training (each run's
  last diagnosed round), one bar per client (named by the view's ``clients``, A–E), the mean over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fedbench.errors import ConfigError
from fedbench.recipes.views import TableView
from fedbench.report.diagnostics.curve_plots import _figure_name, _grouped, _overlay, _title, seed_mean
from fedbench.report.diagnostics.feature_plots import round_axis
from fedbench.report.diagnostics.series import RunDiagnostics

CHOSEN_LAYERS = 10  # FedImpro Fig. 3(a): "We choose and show the divergence of 10 layers"


# ------------------------------------------------------------------------------------------------ the formulas
def whole_model_divergence(value: Mapping[str, Any]) -> float:
    """(1/|S^r|) Σ_i ‖θ̄ − θ_i‖ over the whole model from a stored ``weight_divergence`` value: the whole model's
    distance is √(Σ_ℓ distance_ℓ²), the layers' parameters being disjoint parts of one vector."""
    rows = value["distance"]
    return sum(math.sqrt(sum(d * d for d in row)) for row in rows) / len(rows)


def stage_of(layer: str) -> str:
    """The stage a layer belongs to: the block right below the model's top-level part ("encoder.layer2.0.conv1" →
    "layer2"), or the layer itself when it sits directly in that part ("encoder.conv1" → "conv1", "classifier")."""
    parts = layer.split(".")
    return parts[1] if len(parts) > 2 else parts[-1]


def stage_divergence(value: Mapping[str, Any]) -> dict[str, float]:
    """{stage: the mean over the sampled clients of the stage's distance √(Σ_{ℓ∈stage} distance_ℓ²)}, stages in
    model order."""
    stages = [stage_of(layer) for layer in value["layers"]]
    rows = value["distance"]
    out = {}
    for stage in dict.fromkeys(stages):
        members = [i for i, s in enumerate(stages) if s == stage]
        out[stage] = sum(math.sqrt(sum(row[i] ** 2 for i in members)) for row in rows) / len(rows)
    return out


def layer_divergence(value: Mapping[str, Any]) -> dict[str, float]:
    """{layer: the mean over the sampled clients of its distance} (the stored ``mean``)."""
    return dict(zip(value["layers"], value["mean"]))


def chosen_layers(layers: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The layers a per-layer figure draws: ``wanted`` (in model order; a name that is not a layer is an error), or
    ``CHOSEN_LAYERS`` spread evenly over the model, the first and the last included."""
    if wanted:
        unknown = [name for name in wanted if name not in layers]
        if unknown:
            raise ConfigError(f"layers: {unknown[0]!r} is not a layer of the model (layers: {', '.join(layers)})")
        return [layer for layer in layers if layer in wanted]
    if len(layers) <= CHOSEN_LAYERS:
        return list(layers)
    picks = np.linspace(0, len(layers) - 1, CHOSEN_LAYERS).round().astype(int)
    return [layers[i] for i in dict.fromkeys(picks.tolist())]


def normalised(values: np.ndarray) -> np.ndarray:
    """A line divided by its maximum (FedImpro §5.4: "we normalize each line with its maximum value"); an all-zero
    line stays zero."""
    top = values.max() if values.size else 0.0
    return values / top if top > 0 else values


# ------------------------------------------------------------------------------------------------ layouts
def _normalised_parts(view: TableView, runs: list[RunDiagnostics], per_stage: bool) -> list[tuple[str, Figure]]:
    """FedImpro Figs. 3 and 9: a figure per value of the view's keys and method, a line per layer (or stage): its
    mean over the clients, then over the seeds, divided by the line's maximum."""
    out = []
    for key, lines in _grouped(view, runs).items():
        for method, members in lines.items():
            first = members[0].rounds[min(members[0].rounds)]
            parts = list(stage_divergence(first)) if per_stage else chosen_layers(first["layers"], view.layers)
            fig = Figure(figsize=(6, 4))
            ax = fig.subplots()
            for part in parts:
                series = [
                    {
                        r: (stage_divergence(v) if per_stage else layer_divergence(v))[part]
                        for r, v in run.rounds.items()
                    }
                    for run in members
                ]
                rounds, values = seed_mean(series)
                ax.plot(rounds, normalised(values.mean(0)), label=part)
            round_axis(ax)
            ax.set_xlabel("round")
            ax.set_ylabel("weight divergence / its maximum")
            name = _figure_name(key, method, len(lines))
            ax.set_title(_title(view, name), fontsize=9)
            what = "stage" if per_stage else "layer"
            ax.legend(fontsize=7, title=f"{what}; mean over clients, {len(members)} seed(s)", title_fontsize=7)
            fig.tight_layout()
            out.append((name, fig))
    return out


def draw_weight_divergence(view: TableView, runs: list[RunDiagnostics]) -> list[tuple[str, Figure]]:
    """FedImpro Fig. 2(b) (the whole model, the default), or Figs. 3 and 9 (per layer, per stage)."""
    if view.layout in ("per_layer", "per_stage"):
        return _normalised_parts(view, runs, per_stage=view.layout == "per_stage")
    return _overlay(view, runs, whole_model_divergence, "weight divergence (1/|S|) Σ_i ‖θ̄ − θ_i‖")


def last_round(run: RunDiagnostics) -> int:
    """The run's last diagnosed round: the end of training that LG-Mix Fig. 3 shows."""
    return max(run.rounds)


def draw_personal_divergence(view: TableView, runs: list[RunDiagnostics]) -> list[tuple[str, Figure]]:
    """LG-Mix Fig. 3: a figure per value of the view's keys and method, bars of ‖w_c − u‖ per layer (numbered from
    1, as the paper's "layers 2, 4, 6, 8 are batch normalization layers"), one per client."""
    out = []
    for key, lines in _grouped(view, runs).items():
        for method, members in lines.items():
            finals = [run.rounds[last_round(run)] for run in members]
            layers, clients = finals[0]["layers"], finals[0]["clients"]
            distance = np.array([value["distance"] for value in finals], dtype=float).mean(0)  # clients × layers
            fig = Figure(figsize=(min(16, max(6, 0.06 * len(layers) * len(clients) + 2)), 4))  # U-Net: 41 layers
            ax = fig.subplots()
            width = 0.8 / max(len(clients), 1)
            positions = np.arange(1, len(layers) + 1)
            for i, client in enumerate(clients):
                name = view.clients[client] if client < len(view.clients) else str(client)
                ax.bar(positions - 0.4 + width * (i + 0.5), distance[i], width, label=name)
            ax.set_xticks(positions)
            ax.tick_params(axis="x", labelsize=7 if len(layers) > 20 else 9)
            ax.set_xlabel("layer")
            ax.set_ylabel("‖w_c − u‖ per layer")
            rounds = sorted({last_round(run) for run in members})
            name = _figure_name(key, method, len(lines))
            ax.set_title(f"{_title(view, name)} · round {', '.join(map(str, rounds))} (last diagnosed)", fontsize=9)
            ax.legend(fontsize=7, title=f"client; mean over {len(members)} seed(s)", title_fontsize=7)
            fig.tight_layout()
            out.append((name, fig))
    return out


__all__ = [
    "chosen_layers",
    "draw_personal_divergence",
    "draw_weight_divergence",
    "layer_divergence",
    "normalised",
    "stage_divergence",
    "stage_of",
    "whole_model_divergence",
]
