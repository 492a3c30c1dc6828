"""``fedbench plan``: what a batch of recipes will cost before it runs (library: ``fedbench.execution.planning``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from rich.markup import escape

from fedbench.cli.common import console, labels_lines, print_json, print_listing, user_errors
from fedbench.cli.options import (
    DATA_DIR,
    DEFAULT_LAUNCH,
    DEFAULTS,
    DEVICE,
    JOBS,
    ONLY,
    SCALE,
    SET,
    SYNTHETIC,
    THREADS,
    Add,
    AsJson,
    Plugins,
    Recipes,
    Seeds,
    SetFor,
    Throughput,
    compile_options,
    load_plugins,
    reworded,
)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


@user_errors
def plan(
    recipes: Recipes,
    scale: Annotated[str, reworded(SCALE, "Scale profile of the recipes (e.g. quick, smoke).")] = "full",
    seeds: Seeds = None,
    only: Annotated[list[str], reworded(ONLY, "Keep runs whose labels match KEY=VALUE (repeatable).")] = [],  # noqa: B006
    set_: Annotated[list[str], reworded(SET, "Override a setup key for every run (repeatable).")] = [],  # noqa: B006
    add: Add = [],  # noqa: B006
    set_for: SetFor = [],  # noqa: B006
    synthetic: Annotated[bool, reworded(SYNTHETIC, "Plan the runs on generated stand-in data.")] = False,
    device: Annotated[str, reworded(DEVICE, "Device the calibration times: auto, cpu, cuda or cuda:N.")] = "auto",
    jobs: Annotated[int, reworded(JOBS, "Workers the wall time is divided over.")] = DEFAULT_LAUNCH.jobs,
    threads: Annotated[int, reworded(THREADS, "CPU threads per run (as `fedbench run --threads`).")] = DEFAULTS.threads,
    throughput: Throughput = None,
    data_dir: Annotated[
        Path | None, reworded(DATA_DIR, "Data root, read for the sizes of data sets without registered ones.")
    ] = None,
    as_json: AsJson = False,
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """List the runs of recipes per table cell with their training/evaluation FLOPs and estimated wall time.

    Example: `fedbench plan recipes/fedtrip_table4.toml --scale quick --jobs 2` ·
    `fedbench plan recipes/fedimpro_table1.toml --throughput 8 --json` ·
    `fedbench plan recipes/fedtrip_table4.toml --scale quick --add algorithm=scaffold`
    """
    from fedbench.execution import planning

    load_plugins(plugin)
    result = planning.plan_recipes(
        recipes,
        **compile_options(scale, seeds, only, set_, synthetic, add, set_for),
        device=device,
        jobs=jobs,
        threads=threads,
        throughput_tflops=throughput,
        data_root=str(data_dir) if data_dir is not None else None,
    )
    if as_json:
        print_json(result.as_dict())
        return
    if not result.runs:  # e.g. fedtrip_costs.toml: analytic tables only
        console.print("nothing to plan: these recipes define no runs (analytic tables only)")
        return
    rows = []
    for cell in result.cells:
        known = cell.runs - cell.unknown
        rows.append(
            [
                escape(cell.recipe),
                escape(labels_lines(cell.labels)),
                str(cell.runs),
                f"{cell.train_flops / 1e12:.2f}" if known else "?",
                f"{cell.eval_flops / 1e12:.2f}" if known else "?",
                _hours(cell.seconds) if known else "?",
            ]
        )
    columns = ("recipe", "cell", "runs", "train TFLOP", "eval TFLOP", "hours (1 worker)")
    # the recipe and each label whole on a line: the plan of a paper table reads in a log or an 80-column terminal
    print_listing(f"{result.runs} runs in {len(result.cells)} table cells", columns, rows, whole=(1,))
    console.print(
        f"total: {result.train_flops / 1e12:.1f} TFLOP training + {result.eval_flops / 1e12:.1f} TFLOP evaluation; "
        f"estimated {_hours(result.wall_seconds)} h wall time with {result.jobs} worker(s) on {result.calibration.device} "
        f"({result.calibration.method}; workers assumed to scale perfectly)",
        soft_wrap=True,
    )
    if result.unknown:
        console.print(
            f"{result.unknown} run(s) without an estimate: no registered size for "
            f"{', '.join(result.unknown_datasets)} (plan them with --synthetic, or see docs/cli.md)",
            soft_wrap=True,
        )
