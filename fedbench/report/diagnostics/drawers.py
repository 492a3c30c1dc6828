"""The drawers of the per-round diagnostics, one per catalogue entry (``fedbench/vocab/diagnostics.py``), each in its
paper's layout (the ``Drawer`` signature of ``fedbench/report/diagnostics/series.py``); ``draw`` looks the view's
diagnostic up in ``DRAWERS``. The drawers live by family: ``divergence_plots`` (FedImpro Figs. 2(b), 3, 9; LG-Mix
Fig. 3), ``curve_plots`` (LG-Mix Figs. 2(a), 4), ``projection_plots`` (FedTrip Fig. 2's t-SNE) and
``feature_plots`` (FedDr+ Figs. 2–5, LG-Mix Fig. 2(b))."""

from __future__ import annotations

from collections.abc import Mapping

from fedbench.errors import ConfigError
from fedbench.recipes.views import TableView
from fedbench.report.diagnostics.curve_plots import draw_mixing_weights, draw_val_loss
from fedbench.report.diagnostics.divergence_plots import draw_personal_divergence, draw_weight_divergence
from fedbench.report.diagnostics.feature_plots import draw_activations, draw_feature_stats
from fedbench.report.diagnostics.projection_plots import draw_feature_snapshots
from fedbench.report.diagnostics.series import Drawer, RunDiagnostics
from fedbench.vocab.diagnostics import (
    ACTIVATIONS,
    FEATURE_SNAPSHOT,
    FEATURE_STATS,
    MIXING_WEIGHTS,
    PERSONAL_DIVERGENCE,
    VAL_LOSS,
    WEIGHT_DIVERGENCE,
)

DRAWERS: dict[str, Drawer] = {
    WEIGHT_DIVERGENCE: draw_weight_divergence,
    VAL_LOSS: draw_val_loss,
    PERSONAL_DIVERGENCE: draw_personal_divergence,
    MIXING_WEIGHTS: draw_mixing_weights,
    FEATURE_SNAPSHOT: draw_feature_snapshots,
    FEATURE_STATS: draw_feature_stats,
    ACTIVATIONS: draw_activations,
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


__all__ = ["DRAWERS", "draw"]
