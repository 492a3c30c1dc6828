"""What a diagnostics view draws from: each selected run's recorded values of one per-round diagnostic
(``fedbench/vocab/diagnostics.py`` says each one's layout), and the signature every drawer of such a view has.
``diagnostic_runs`` reads them from the registry (one statement per 500 runs); ``diagnostic_table`` is what the
text, Markdown, LaTeX and JSON reports show of such a view: one line saying what it draws and how many runs recorded
it (the papers publish no numbers for these figures)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fedbench.recipes.schema import Recipe
from fedbench.report.cells import Table
from fedbench.report.table import planned_for_view
from fedbench.vocab.diagnostics import DIAGNOSTICS
from fedbench.vocab.status import FINISHED

if TYPE_CHECKING:  # matplotlib is imported only by the modules that draw
    from matplotlib.figure import Figure

    from fedbench.recipes.views import TableView


@dataclass(frozen=True)
class RunDiagnostics:
    """One finished run's values of one diagnostic: ``rounds`` maps each diagnosed round to the JSON value stored
    for it (the catalogue's ``layout``)."""

    labels: Mapping[str, str]  # the run's recipe labels (matrix axes → label)
    seed: int
    rounds: Mapping[int, Any]


# A drawer turns a view and its runs' diagnostics into figures: [(file-stem suffix, Figure)].
Drawer = Callable[["TableView", list[RunDiagnostics]], list[tuple[str, "Figure"]]]


def figure_and_line(view: TableView, labels: Mapping[str, str]) -> tuple[str, str]:
    """(figure, line) of a run's series: with the method axis (``baseline_axis``) among the view's keys, one figure
    per value of the other keys and a line per method; else one figure per row (or column) and a line per column
    (or row). The curve plots and the diagnostic drawers group runs alike."""
    keys = [k for k in view.rows + view.columns if k in labels]
    axis = view.baseline_axis
    if axis in keys:
        return " / ".join(labels[k] for k in keys if k != axis) or "all", labels[axis]
    row = " / ".join(labels[k] for k in view.rows if k in labels)
    column = " / ".join(labels[k] for k in view.columns if k in labels)
    return (column, row) if view.plot_by == "columns" else (row, column)


# Which runs of a recipe's view: its seeds (None: the recipe's) and the label filters of ``report --only``.
Seeds = list[int] | None
Only = Mapping[str, str | set[str]] | None


def _finished_runs(
    recipe: Recipe, view: TableView, registry: Any, scale: str, synthetic: bool, seeds: Seeds, only: Only
) -> tuple[int, list[RunDiagnostics]]:
    """(how many runs the view selects, one RunDiagnostics per finished one, in the recipe's order)."""
    planned = planned_for_view(recipe, view, scale, synthetic, seeds=seeds, only=only)
    found = {
        r.spec_hash: r
        for r in registry.run_states(list(dict.fromkeys(p.spec_hash for p in planned)))
        if r.status in FINISHED
    }
    values = registry.diagnostic_values([r.id for r in found.values()], view.diagnostic) if found else {}
    finished = [
        RunDiagnostics(p.labels, p.spec.seed, values.get(found[p.spec_hash].id, {}))
        for p in planned
        if p.spec_hash in found
    ]
    return len(planned), finished


def diagnostic_runs(
    recipe: Recipe,
    view: TableView,
    registry: Any,
    scale: str = "full",
    synthetic: bool = False,
    seeds: Seeds = None,
    only: Only = None,
) -> list[RunDiagnostics]:
    """The view's finished runs (of ``seeds``, matching ``only``) that recorded its diagnostic, with their values by
    round (``registry``: a ``Registry``, or anything with its ``run_states`` and ``diagnostic_values``)."""
    return [run for run in _finished_runs(recipe, view, registry, scale, synthetic, seeds, only)[1] if run.rounds]


def diagnostic_table(
    recipe: Recipe,
    view: TableView,
    registry: Any,
    scale: str = "full",
    synthetic: bool = False,
    seeds: Seeds = None,
    only: Only = None,
) -> Table:
    """A diagnostics view as a report table: no cells, one note saying what the view draws and how many of its
    runs recorded the diagnostic (``--plots`` and the HTML page draw it)."""
    name = view.diagnostic or ""
    planned, finished = _finished_runs(recipe, view, registry, scale, synthetic, seeds, only)
    recorded = sum(bool(run.rounds) for run in finished)
    layout = f", layout {view.layout}" if view.layout != "default" else ""
    line = (
        f"a figure of the per-round diagnostic {name!r}{layout} ({DIAGNOSTICS[name].shape.replace('_', ' ')}), "
        f"drawn by --plots and the HTML report: {recorded} of {planned} runs recorded it ({len(finished)} "
        "finished); the paper publishes no numbers for it."
    )
    notes = ["SYNTHETIC DATA: drawn from runs on generated stand-in data."] if synthetic else []
    return Table(recipe.name, recipe.paper, view, scale, synthetic, [], [], {}, "", [*notes, line])
