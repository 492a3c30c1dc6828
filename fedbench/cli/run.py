"""``fedbench run``: compile recipes into runs and train those not done yet (library: ``fedbench.execution.selection``
compiles them, ``fedbench.execution.batch`` trains them)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from fedbench.cli.common import (
    RegistryOption,
    console,
    err_console,
    labels_lines,
    print_listing,
    user_errors,
)
from fedbench.cli.options import (
    Add,
    DataDir,
    Device,
    Jobs,
    Only,
    Overrides,
    Plugins,
    Recipes,
    Scale,
    Seeds,
    SetFor,
    Synthetic,
    Threads,
    compile_options,
    load_plugins,
)
from fedbench.errors import FedbenchError
from fedbench.vocab.metrics import to_percent
from fedbench.vocab.status import RunStatus

if TYPE_CHECKING:
    from rich.progress import TaskID

    from fedbench.execution.batch import Batch
    from fedbench.execution.events import Event
    from fedbench.execution.options import ExecutionOptions


@user_errors
def run(
    ctx: typer.Context,
    recipes: Recipes,
    scale: Scale = "full",
    seeds: Seeds = None,
    only: Only = [],  # noqa: B006 (a default Typer hands over; never mutated)
    set_: Overrides = [],  # noqa: B006
    add: Add = [],  # noqa: B006
    set_for: SetFor = [],  # noqa: B006
    synthetic: Synthetic = False,
    device: Device = "auto",
    jobs: Jobs = 1,
    gpus: str | None = typer.Option(
        None,
        "--gpus",
        help="With --device cuda: the GPUs the workers are spread over, round-robin, e.g. 0,2,3 [default: every "
        "visible GPU]. Several workers may share one.",
    ),
    threads: Threads = 1,
    packing: str = typer.Option(
        "auto",
        "--packing",
        help="How a run's clients train: packed (a round's clients at once, stacked), sequential, or auto (packed "
        "on CUDA where the method and model allow it). Not part of the spec; provenance records the path.",
    ),
    fast: bool = typer.Option(
        True,
        "--fast/--no-fast",
        help="On CUDA: conv models in channels-last memory format and fused optimizers (same results up to "
        "rounding; not part of the spec). No effect on a CPU.",
    ),
    compile: bool = typer.Option(
        False, "--compile", help="On CUDA: torch.compile the working model (the first rounds pay the compilation)."
    ),
    registry_url: str | None = RegistryOption,
    data_dir: DataDir = None,
    no_verify: bool = typer.Option(
        False, "--no-verify", help="Skip data checksum verification (recorded as unverified)."
    ),
    force: bool = typer.Option(False, "--force", help="Re-run specs that are already done."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the compiled runs and whether they are done; train nothing."
    ),
    checkpoints: str | None = typer.Option(
        None,
        "--checkpoints",
        help="Folder for run checkpoints on storage every worker sees, so any worker resumes any run "
        "[default: $FEDBENCH_CHECKPOINTS, else beside the registry].",
    ),
    client_state_memory: int | None = typer.Option(
        None,
        "--client-state-memory",
        min=0,
        help="MiB of per-client state (SCAFFOLD controls, personal models) a run keeps in memory; beyond it, states "
        "already in the run's checkpoint are read back from disk when needed [default: algorithms.client_states."
        "DEFAULT_MEMORY_BUDGET, 1 GiB]. Not part of the spec.",
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where the --jobs workers run: local (processes here), ray (Ray tasks) or slurm (a Slurm array job).",
    ),
    address: str | None = typer.Option(
        None, "--address", help="Ray: auto (the running cluster) or ray://HOST:10001 [default: a local Ray]."
    ),
    gpus_per_run: float = typer.Option(
        0.0, "--gpus-per-run", min=0.0, help="Ray: GPUs each worker (one run at a time) takes, e.g. 0.25."
    ),
    slurm_partition: str | None = typer.Option(None, "--slurm-partition", help="Slurm: partition of the jobs."),
    slurm_time: str | None = typer.Option(None, "--slurm-time", help="Slurm: time limit per job, HH:MM:SS."),
    slurm_gpus: int = typer.Option(0, "--slurm-gpus", min=0, help="Slurm: GPUs per worker job."),
    slurm_folder: Path | None = typer.Option(
        None, "--slurm-folder", help="Slurm: job scripts and logs, on shared storage [default: registry/slurm]."
    ),
    slurm_cluster: str = typer.Option(
        "slurm", "--slurm-cluster", help="Slurm: 'local' runs the array as processes here (a try without Slurm)."
    ),
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """Compile recipes into runs and train the ones not done yet.

    Example: `fedbench run recipes/quickstart.toml --jobs 2` ·
    `fedbench run recipes/quickstart.toml --scale smoke --only algorithm=fedavg --set rounds=5` ·
    `fedbench run recipes/quickstart.toml --add algorithm=scaffold --set-for algorithm=scaffold:optimizer.lr=0.02` ·
    `fedbench run recipes/fedtrip_*.toml --executor slurm --slurm-partition gpu --slurm-time 04:00:00 --jobs 8
    --registry postgresql+psycopg://me@dbhost/fedbench`
    """
    from fedbench.execution import selection

    load_plugins(plugin)  # every worker loads them too (ExecutionOptions.plugins)
    cluster = cluster_options(
        executor, address, gpus_per_run, slurm_partition, slurm_time, slurm_gpus, slurm_folder, slurm_cluster, threads
    )
    options = execution_options(ctx.params)
    planned = selection.plan_runs(
        recipes, **compile_options(scale, seeds, only, set_, synthetic, add, set_for), device=options.device
    )
    if not planned:  # e.g. fedtrip_costs.toml: analytic tables only
        names = " ".join(f"--recipe {r}" for r in recipes)
        console.print(
            f"nothing to train: these recipes define no runs; `fedbench report {names}` renders their tables",
            soft_wrap=True,
        )
        return
    if dry_run:
        rows = selection.dry_run(planned, options.registry_url)
        entries = [
            [row.spec_hash, escape(labels_lines(row.labels)), str(row.seed), str(row.rounds), str(row.status)]
            for row in rows
        ]
        # each label whole on its line; a narrow terminal or a pipe gets one wrapped line per run
        columns = ("spec_hash", "labels", "seed", "rounds", "status")
        print_listing(f"{len(rows)} runs", columns, entries, whole=(1,), one_line=True)
        return

    from fedbench.checkpoint.location import is_url
    from fedbench.execution import batch  # local: it imports torch, which a dry run never needs

    if is_url(options.checkpoints):  # an unreachable storage: one error now, not a batch of failed runs
        from fedbench.checkpoint.mirror import check_reachable

        check_reachable(str(options.checkpoints))
    work = batch.prepare_batch(planned, options, force=force)
    for warning in work.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
    if work.rerun:
        console.print(f"--force: re-running {len(work.rerun)} finished run(s)")
    elif work.skipped:
        console.print(f"{len(work.skipped)} of {len(planned)} runs already done (skipped; --force re-runs them)")
    if work.todo:
        train_with_progress(work, jobs, cluster)
    outcome = work.outcome()
    counts = ", ".join(f"{n} {status}" for status, n in outcome.counts.items())
    console.print(f"registry: {counts}  ({outcome.registry_url})")
    for failed in outcome.failed:
        err_console.print(f"[red]failed[/red] {failed.spec_hash} {escape(str(failed.labels))}: {escape(failed.error)}")
    if outcome.failed:
        raise typer.Exit(1)


def execution_options(parameters: dict[str, Any]) -> ExecutionOptions:
    """``fedbench run``'s ``ExecutionOptions``, built once: each field is the command's parameter of the same name
    (so a new option is a field and a parameter, nothing in between); the few that the command line gives in
    another form are converted here."""
    from fedbench.checkpoint.location import resolve_checkpoints
    from fedbench.execution.devices import parse_gpus
    from fedbench.execution.options import ExecutionOptions
    from fedbench.plugins import plugin_source

    same = {f.name: parameters[f.name] for f in fields(ExecutionOptions) if f.name in parameters}
    memory = parameters["client_state_memory"]
    return ExecutionOptions(
        **{
            **same,
            "data_root": str(parameters["data_dir"]) if parameters["data_dir"] is not None else None,
            "verify": not parameters["no_verify"],
            "gpus": parse_gpus(parameters["gpus"]),
            "checkpoints": resolve_checkpoints(parameters["checkpoints"]),
            "client_state_memory": None if memory is None else memory << 20,  # MiB on the command line
            "plugins": tuple(plugin_source(text) for text in parameters["plugin"]),  # as every worker loads them
        }
    )


def cluster_options(
    executor: str,
    address: str | None,
    gpus_per_run: float,
    slurm_partition: str | None,
    slurm_time: str | None,
    slurm_gpus: int,
    slurm_folder: Path | None,
    slurm_cluster: str,
    threads: int,
) -> Any:
    """``--executor`` and its options as ``fedbench.execution.options`` cluster options (None: local workers)."""
    from fedbench.execution.options import EXECUTORS, RayOptions, SlurmOptions, slurm_minutes

    if executor not in EXECUTORS:
        raise FedbenchError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    slurm_given = slurm_partition or slurm_time or slurm_gpus or slurm_folder or slurm_cluster != "slurm"
    if executor != "slurm" and slurm_given:
        raise FedbenchError("--slurm-* options need --executor slurm")
    if executor != "ray" and (address or gpus_per_run):
        raise FedbenchError("--address and --gpus-per-run need --executor ray")
    if executor == "slurm":
        if slurm_time is None:
            raise FedbenchError("--executor slurm needs --slurm-time HH:MM:SS (each worker job's time limit)")
        if slurm_cluster not in ("slurm", "local"):
            raise FedbenchError(f"--slurm-cluster {slurm_cluster!r}: expected slurm or local")
        slurm_minutes(slurm_time)  # checked before anything is registered
        return SlurmOptions(slurm_partition, slurm_time, slurm_folder, slurm_cluster, slurm_gpus, threads)
    if executor == "ray":
        return RayOptions(address, gpus_per_run, float(threads))
    return None


def train_with_progress(work: Batch, jobs: int, cluster: Any = None) -> None:
    """Train the batch with rich progress bars: one for all rounds (its status counts runs), one per run."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from fedbench.execution.events import Note, RoundDone, RunEnded, RunStarted, RunWarning

    todo = work.todo
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
    label_of = {p.spec_hash: ", ".join(f"{v}" for v in p.labels.values()) + f" seed {p.spec.seed}" for p in todo}
    rounds_of = {p.spec_hash: p.spec.rounds for p in todo}
    with progress:
        # The overall bar counts rounds (its time-left estimate follows the rounds actually trained); its
        # status counts runs.
        overall = progress.add_task("rounds", total=sum(rounds_of.values()), status=f"0/{len(todo)} runs")
        current: dict[str, TaskID] = {}
        counted: dict[str, int] = {}  # rounds of each run already added to the overall bar
        finished = 0

        def count_rounds(key: str, upto: int) -> None:
            progress.advance(overall, max(0, upto - counted.get(key, 0)))
            counted[key] = max(upto, counted.get(key, 0))

        def on_event(event: Event) -> None:
            nonlocal finished
            if isinstance(event, Note):  # from the executor: jobs submitted, a worker failed
                progress.console.print(f"  {escape(event.message)}")
            elif isinstance(event, RunStarted):
                current[event.spec_hash] = progress.add_task(
                    f"  {label_of.get(event.spec_hash, event.spec_hash)}", total=event.rounds, status=""
                )
            elif isinstance(event, RoundDone) and event.spec_hash in current:
                acc = event.test_acc
                status = (f"acc {to_percent(acc):5.2f}%  " if acc is not None else "") + f"{event.seconds:.2f} s/round"
                progress.update(current[event.spec_hash], completed=event.round, status=status)
                count_rounds(event.spec_hash, event.round)
            elif isinstance(event, RunWarning):  # e.g. a checkpoint not used (docs/security.md): one line
                progress.console.print(f"[yellow]warning:[/yellow] {escape(event.message)}", soft_wrap=True)
            elif isinstance(event, RunEnded):
                key = event.spec_hash
                if key in current:
                    progress.remove_task(current.pop(key))
                count_rounds(key, rounds_of.get(key, 0))
                finished += 1
                progress.update(overall, status=f"{finished}/{len(todo)} runs")
                if event.status != RunStatus.DONE:
                    error = event.error or ""
                    progress.console.print(f"  {escape(label_of.get(key, key))}: {event.status} {escape(error)}")

        work.train(jobs, on_event, cluster)
