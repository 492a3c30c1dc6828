"""``fedbench check-method``: the engine contract's checks on one method, a built-in or a plug-in's (library:
``fedbench.execution.contract``). One line per property; exit 0 when none fails, 1 when one does, 2 for bad input."""

from __future__ import annotations

from typing import Annotated

import typer

from fedbench.cli import completion
from fedbench.cli.common import console, print_json, user_errors
from fedbench.cli.options import SET, THREADS, DataDir, Plugins, Synthetic, load_plugins, reworded

STYLES = {"pass": "green", "fail": "bold red", "skip": "yellow"}
CheckThreads = Annotated[
    int, reworded(THREADS, "CPU threads of the checks' runs (one is fastest for their tiny models).")
]
Settings = Annotated[
    list[str],
    reworded(
        SET, "Change a setting of the check's runs, dotted for nested keys (repeatable): algorithm_params.mu=0.1."
    ),
]


@user_errors
def check_method(
    name: str = typer.Argument(
        ..., help="The method to check: a built-in or one a --plugin registers.", autocompletion=completion.algorithms
    ),
    plugin: Plugins = [],  # noqa: B006 (a default Typer hands over; never mutated)
    dataset: str = typer.Option(
        "digits", "--dataset", help="Data set the checks train on.", autocompletion=completion.datasets
    ),
    model: str = typer.Option(
        "digits_mlp",
        "--model",
        help="Model the checks train (digits_mlp: 16 hidden units).",
        autocompletion=completion.models,
    ),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Rounds of each check's runs (resume stops one before)."),
    clients: int = typer.Option(4, "--clients", min=1, help="Clients (all but one train each round)."),
    set_: Settings = [],  # noqa: B006
    properties: list[str] = typer.Option(
        [], "--property", help="Check only this property (repeatable); default all.", show_default=False
    ),
    synthetic: Synthetic = False,
    data_dir: DataDir = None,
    threads: CheckThreads = 1,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output: one object per property."),
) -> None:
    """Check a method against the engine contract, as fedbench's own methods are checked: evaluation leaves training
    unchanged, results do not depend on client order or on the process (keyed random streams), kill and resume
    gives the same curve, packed == sequential (if it declares packed_step), its declared FedAvg setting is FedAvg
    bit for bit in float32 over 8 rounds at least (if it declares one), and a client with no training sample is
    harmless. A few small runs on the CPU (3 rounds of
    4 clients on digits by default); a failure says what differed and how to fix it.

    Example: `fedbench check-method myprox --plugin my_methods.py` · `fedbench check-method fedprox --set
    algorithm_params.mu=0.1 --property resume`
    """
    from fedbench.execution.contract import check_method as check
    from fedbench.execution.contract import contract_spec
    from fedbench.recipes.assignments import nested_assignments
    from fedbench.spec import SETUP_KEYS

    load_plugins(plugin)
    keys = [key for key in SETUP_KEYS if key != "algorithm"]
    setup = nested_assignments(set_, "--set", allowed=keys, what="setup key")
    params = setup.pop("algorithm_params", {})
    spec = contract_spec(
        name,
        params,
        **{"dataset": dataset, "model": model, "rounds": rounds, "num_clients": clients, "synthetic": synthetic},
        **setup,
    )

    def show(result) -> None:
        if as_json:
            return
        style = STYLES[result.status]
        console.print(
            f"[{style}]{result.status.upper():4}[/{style}] {result.name}: {result.title} — {result.detail} "
            f"({result.seconds:.1f} s)",
            highlight=False,
            soft_wrap=True,
        )

    results = check(spec, properties or None, data_root=data_dir, threads=threads, on_result=show)
    if as_json:
        print_json([r.as_dict() for r in results])
    failed = [r.name for r in results if r.failed]
    if not as_json:
        summary = f"{name}: {len(failed)} of {len(results)} properties failed ({', '.join(failed)})" if failed else ""
        console.print(summary or f"{name}: every property checked holds", highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)
