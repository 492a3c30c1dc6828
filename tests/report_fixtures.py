"""A small report table built by hand (no registry, no runs), for the tests of the renderers and comparisons."""

from __future__ import annotations

from fedbench.recipes.views import TableView
from fedbench.report.cells import Cell, Table


def cell(row: str, column: str, values: list[float | None], expected: int = 3, **fields) -> Cell:
    """A cell of ``values`` per seed (seeds 0, 1, …), with their mean and sample std."""
    present = [v for v in values if v is not None]
    mean = sum(present) / len(present) if present else None
    std = (sum((v - mean) ** 2 for v in present) / (len(present) - 1)) ** 0.5 if len(present) > 1 else None
    return Cell(
        row=row,
        column=column,
        labels={"algorithm": row, "dataset": column},
        expected=expected,
        n=len(values),
        values=list(values),
        seeds=list(range(len(values))),
        mean=mean,
        std=std,
        **fields,
    )


def small_table(name: str = "acc", caption: str = "", **view_fields) -> Table:
    """Rows fedavg and fed_prox, columns mnist and cifar10; fed_prox has no cifar10 cell and one of its three seeds."""
    view = TableView(
        name=name,
        title="Best accuracy",
        caption=caption,
        rows=["algorithm"],
        columns=["dataset"],
        figure="best",
        published={"fedavg": {"mnist": 90.0}},
        **view_fields,
    )
    cells = {
        ("fedavg", "mnist"): cell("fedavg", "mnist", [91.0, 91.5, 92.0], published=90.0),
        ("fedavg", "cifar10"): cell("fedavg", "cifar10", [60.0, 62.0, 64.0]),
        ("fed_prox", "mnist"): cell("fed_prox", "mnist", [88.0]),
    }
    return Table(
        recipe="tiny",
        paper="testpaper",
        view=view,
        scale="smoke",
        synthetic=False,
        rows=["fedavg", "fed_prox"],
        columns=["mnist", "cifar10"],
        cells=cells,
        unit="%",
        baseline=None,
    )
