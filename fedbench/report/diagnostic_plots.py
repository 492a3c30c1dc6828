"""Figures of the per-round diagnostics, in the papers' layouts. ``DRAWERS`` maps a diagnostic's name to its drawer
(the ``Drawer`` signature of ``fedbench/report/diagnostic_series.py``); ``draw`` looks the view's diagnostic up there.

- ``weight_divergence``: FedImpro Fig. 2(b) (``layout`` "whole_model", its default): the whole-model divergence
  (1/|S^r|) Σ_{i∈S^r} ‖θ̄ − θ_i‖ per round, i.e. the mean over the sampled clients of √(Σ_ℓ distance²), methods
  overlaid, the mean over seeds with a min–max band; Figs. 3(a) and 9 ("per_layer"): a line per layer (ten of them,
  or the view's ``layers``), Fig. 3(b) ("per_stage"): a line per stage, each stage's distance √(Σ_{ℓ∈stage}
  distance²); each line is the mean over the sampled clients (and then over seeds), "normalized with its maximum
  value" (FedImpro §5.4), so it ends at its own maximum of 1. The normalisation also removes the authors' code's
  division by √(number of parameters) of each layer, a constant per line.
- ``personal_divergence``: LG-Mix Fig. 3: per layer, ‖w_c − u‖ of each client at the end of training (each run's
  last diagnosed round), one bar per client (named by the view's ``clients``, A–E), the mean over seeds.
- ``mixing_weights``: LG-Mix Fig. 2(a): each client's mixing weight per round (LG-Mix's λ_c, APFL's α), on a
  logarithmic axis as the spec reads the figure ("log λ_c per round"), a line per method and client.
- ``val_loss``: LG-Mix Fig. 4's validation-loss panel: the mean over clients of each client's validation loss per
  round, methods overlaid, the mean over seeds with a min–max band.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fedbench.errors import ConfigError
from fedbench.recipes.views import TableView
from fedbench.report.diagnostic_series import Drawer, RunDiagnostics, figure_and_line
from fedbench.report.feature_plots import FEATURE_DRAWERS, round_axis
from fedbench.report.projection_plots import PROJECTION_DRAWERS

BAND = "min–max over seeds"
CHOSEN_LAYERS = 10  # FedImpro Fig. 3(a): "We choose and show the divergence of 10 layers"
LINE_STYLES = ("-", "--", ":", "-.")

Series = dict[int, float]  # round → value


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


def seed_mean(series: Sequence[Series]) -> tuple[list[int], np.ndarray]:
    """(the rounds every seed recorded, the values as a seeds × rounds array)."""
    rounds = sorted(set.intersection(*(set(s) for s in series))) if series else []
    return rounds, np.array([[s[r] for r in rounds] for s in series], dtype=float).reshape(len(series), len(rounds))


# ------------------------------------------------------------------------------------------------ layouts
def _title(view: TableView, key: str) -> str:
    """The paper items the view reproduces (or its name), and the figure's key where it has one."""
    parts = [", ".join(view.reproduces) or view.name]
    return " · ".join(parts + ([key] if key not in ("", "all") else []))


def _figure_name(key: str, method: str, methods: int) -> str:
    """A figure of one method's runs: its key, with the method where the key alone does not tell it."""
    parts = [part for part in (key if key != "all" else "", method if methods > 1 or key == "all" else "") if part]
    return " / ".join(parts) or "all"


def _grouped(view: TableView, runs: list[RunDiagnostics]) -> dict[str, dict[str, list[RunDiagnostics]]]:
    """{figure: {line: runs (one per seed)}}, as the curve plots group runs (``figure_and_line``)."""
    out: dict[str, dict[str, list[RunDiagnostics]]] = {}
    for run in runs:
        key, line = figure_and_line(view, run.labels)
        out.setdefault(key, {}).setdefault(line, []).append(run)
    return out


def _overlay(
    view: TableView, runs: list[RunDiagnostics], scalar, ylabel: str, log: bool = False
) -> list[tuple[str, Figure]]:
    """A scalar per round (``scalar(value)``) of each run: a figure per value of the view's other keys, a line per
    method with its mean over seeds and a min–max band."""
    out = []
    for key, lines in _grouped(view, runs).items():
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        for line, members in lines.items():
            rounds, values = seed_mean([{r: scalar(v) for r, v in run.rounds.items()} for run in members])
            ax.plot(rounds, values.mean(0), label=f"{line} (n={len(members)})")
            ax.fill_between(rounds, values.min(0), values.max(0), alpha=0.2)
        if log:
            ax.set_yscale("log")
        round_axis(ax)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        ax.set_title(_title(view, key), fontsize=9)
        ax.legend(fontsize=8, title=f"mean; band: {BAND}", title_fontsize=7)
        fig.tight_layout()
        out.append((key, fig))
    return out


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


# ------------------------------------------------------------------------------------------------ the drawers
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


def draw_mixing_weights(view: TableView, runs: list[RunDiagnostics]) -> list[tuple[str, Figure]]:
    """LG-Mix Fig. 2(a): a figure per value of the view's other keys, a line per method and client (colour: the
    client; line style: the method), the mean over seeds with a min–max band, on a logarithmic axis."""
    out = []
    for key, lines in _grouped(view, runs).items():
        fig = Figure(figsize=(7, 4.5))
        ax = fig.subplots()
        for m, (method, members) in enumerate(lines.items()):
            symbol = next(iter(members[0].rounds.values()))["symbol"]
            clients = sorted({c for run in members for v in run.rounds.values() for c in v["clients"]})
            for client in clients:
                series = [
                    {
                        r: v["weight"][v["clients"].index(client)]
                        for r, v in run.rounds.items()
                        if client in v["clients"]
                    }
                    for run in members
                ]
                rounds, values = seed_mean(series)
                name = view.clients[client] if client < len(view.clients) else str(client)
                colour = f"C{client % 10}"
                style = LINE_STYLES[m % len(LINE_STYLES)]
                ax.plot(rounds, values.mean(0), style, color=colour, label=f"{method} {symbol} {name}")
                ax.fill_between(rounds, values.min(0), values.max(0), color=colour, alpha=0.12)
        ax.set_yscale("log")
        round_axis(ax)
        ax.set_xlabel("round")
        ax.set_ylabel("mixing weight (log scale)")
        ax.set_title(_title(view, key), fontsize=9)
        ax.legend(fontsize=7, ncol=2, title=f"mean; band: {BAND}", title_fontsize=7)
        fig.tight_layout()
        out.append((key, fig))
    return out


def draw_val_loss(view: TableView, runs: list[RunDiagnostics]) -> list[tuple[str, Figure]]:
    """LG-Mix Fig. 4's validation-loss panel: the mean over clients per round, methods overlaid."""
    return _overlay(view, runs, lambda value: value["mean"], "validation loss (mean over clients)")


DRAWERS: dict[str, Drawer] = {
    "weight_divergence": draw_weight_divergence,
    "personal_divergence": draw_personal_divergence,
    "mixing_weights": draw_mixing_weights,
    "val_loss": draw_val_loss,
    **PROJECTION_DRAWERS,  # feature_snapshot: FedTrip Fig. 2's t-SNE
    **FEATURE_DRAWERS,  # feature_stats: FedDr+ Figs. 2–5; activations: LG-Mix Fig. 2(b)
}


def draw(view: TableView, runs: list[RunDiagnostics], drawers: Mapping[str, Drawer] = DRAWERS):
    """The view's figures from its runs' diagnostics, by the drawer of its ``diagnostic``; none without runs."""
    drawer = drawers.get(view.diagnostic or "")
    if drawer is None:
        raise ConfigError(
            f"tables '{view.name}': no figure is drawn for diagnostic {view.diagnostic!r} yet "
            f"(drawn: {', '.join(sorted(drawers))})"
        )
    return drawer(view, runs) if runs else []
