"""The figures of per-round curves of the diagnostics (``fedbench/vocab/diagnostics.py``), in the papers' layouts,
and what the diagnostic drawers share: how runs are grouped into figures and lines, the mean over seeds with a
min–max band.

- ``mixing_weights``: LG-Mix Fig. 2(a): each client's mixing weight per round (LG-Mix's λ_c, APFL's α), on a
  logarithmic axis as the spec reads the figure ("log λ_c per round"), a line per method and client.
- ``val_loss``: LG-Mix Fig. 4's validation-loss panel: the mean over clients of each client's validation loss per
  round, methods overlaid, the mean over seeds with a min–max band.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from fedbench.recipes.views import TableView
from fedbench.report.diagnostics.feature_plots import round_axis
from fedbench.report.diagnostics.series import RunDiagnostics, figure_and_line

BAND = "min–max over seeds"
LINE_STYLES = ("-", "--", ":", "-.")

Series = dict[int, float]  # round → value


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


# ------------------------------------------------------------------------------------------------ the drawers
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


__all__ = ["BAND", "draw_mixing_weights", "draw_val_loss", "seed_mean"]
