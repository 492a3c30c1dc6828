"""``fedbench algorithms`` and ``fedbench models``: the plug-in catalogues (library: ``fedbench.catalog``)."""

from __future__ import annotations

import typer
from rich.table import Table as RichTable

from fedbench.cli.common import console, parse_assignments, print_json, user_errors
from fedbench.errors import FedbenchError


@user_errors
def algorithms(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the registered FL methods with their hyperparameters and defaults.

    Example: `fedbench algorithms --json`
    """
    from fedbench.catalog import algorithm_entries

    entries = algorithm_entries()
    if as_json:
        print_json(entries)
        return
    table = RichTable(title="algorithms")
    for column in ("name", "params (defaults)", "papers", "description"):
        table.add_column(column)
    for e in entries:
        params = ", ".join(f"{k}={v}" for k, v in e["params"].items())
        table.add_row(e["name"], params, ", ".join(e["papers"]), e["description"])
    console.print(table)


@user_errors
def models(
    name: str | None = typer.Argument(None, help="Show one model."),
    set_: list[str] = typer.Option(
        [], "--set", help="Model configuration KEY=VALUE (num_classes, input_shape, or a model parameter)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List registered models: parameters, FLOPs per sample, input shape, classes, papers.

    Example: `fedbench models` · `fedbench models lenet5 --set num_classes=10 --json`
    """
    from fedbench.catalog import model_entries

    overrides = parse_assignments(set_, "--set")
    if set_ and not name:
        raise FedbenchError("--set needs a model NAME, e.g. fedbench models lenet5 --set num_classes=10")
    cards = model_entries(name, overrides)
    if as_json:
        print_json(cards[0] if name else cards)
        return
    table = RichTable(title="models")
    for column in ("name", "params", "MFLOPs/sample (fwd)", "input", "classes", "papers"):
        table.add_column(column)
    for c in cards:
        table.add_row(
            c["name"],
            f"{c['params']:,}",
            f"{c['flops_forward'] / 1e6:.2f}",
            "×".join(map(str, c["input_shape"])),
            str(c["num_classes"]),
            ", ".join(c.get("papers", ())),
        )
    console.print(table)
