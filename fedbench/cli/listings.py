"""``fedbench algorithms`` and ``fedbench models``: the plug-in catalogues (library: ``fedbench.report.plugin_listing``)."""

from __future__ import annotations

import typer

from fedbench.cli import completion
from fedbench.cli.common import parse_assignments, print_json, print_listing, user_errors
from fedbench.cli.options import Plugins, load_plugins
from fedbench.errors import FedbenchError


@user_errors
def algorithms(
    kind: str | None = typer.Option(None, "--kind", help="Only the methods of this kind: global or personal."),
    paper: str | None = typer.Option(None, "--paper", help="Only the methods a paper's recipes train (e.g. fedtrip)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """List the registered FL methods: kind (global or personal), papers, description and hyperparameters with
    their defaults (every method also takes `regularizers`, shown in --json).

    Example: `fedbench algorithms --kind global` · `fedbench algorithms --paper fedtrip --json` ·
    `fedbench algorithms --plugin my_methods.py`
    """
    from fedbench.report.plugin_listing import algorithm_entries

    load_plugins(plugin)
    entries = algorithm_entries(kind, paper)
    if as_json:
        print_json(entries)
        return
    rows = [
        [
            f"{e['name']}\n{e['kind']}",
            "\n".join(e["papers"]),
            # the description, then the parameters other than the regularizers every method shares
            "\n".join([e["description"], ", ".join(f"{k}={v}" for k, v in e["params"].items() if k != "regularizers")]),
        ]
        for e in entries
    ]
    print_listing("algorithms", ("name, kind", "papers", "description; params (defaults)"), rows, whole=(0, 1))


@user_errors
def models(
    name: str | None = typer.Argument(None, help="Show one model.", autocompletion=completion.models),
    set_: list[str] = typer.Option(
        [], "--set", help="Model configuration KEY=VALUE (num_classes, input_shape, or a model parameter)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """List registered models: parameters, FLOPs per sample, input shape, classes, papers.

    Example: `fedbench models` · `fedbench models lenet5 --set num_classes=10 --json`
    """
    from fedbench.report.plugin_listing import model_entries

    load_plugins(plugin)
    overrides = parse_assignments(set_, "--set")
    if set_ and not name:
        raise FedbenchError("--set needs a model NAME, e.g. fedbench models lenet5 --set num_classes=10")
    cards = model_entries(name, overrides)
    if as_json:
        print_json(cards[0] if name else cards)
        return
    columns = ("name", "params", "MFLOPs/sample (fwd)", "input", "classes", "papers")
    rows = [
        [
            c["name"],
            f"{c['params']:,}",
            f"{c['flops_forward'] / 1e6:.2f}",
            "×".join(map(str, c["input_shape"])),
            str(c["num_classes"]),
            ", ".join(c.get("papers", ())),
        ]
        for c in cards
    ]
    print_listing("models", columns, rows)
