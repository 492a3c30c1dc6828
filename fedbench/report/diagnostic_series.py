"""What a diagnostics view draws from: each selected run's recorded values of one per-round diagnostic
(``fedbench/vocab/diagnostics.py`` says each one's layout), and the signature every drawer of such a view has."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
