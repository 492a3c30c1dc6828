"""``fedbench run``: compile recipes into runs and train those not done yet (library: ``fedbench.execution.selection``
compiles them, ``fedbench.execution.batch`` trains them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from fedbench.cli.common import (
    console,
    err_console,
    labels_lines,
    print_listing,
    user_errors,
)
from fedbench.cli.options import (
    DEFAULT_CLIENT_STATE_MIB,
    DEFAULT_LAUNCH,
    DEFAULTS,
    Add,
    Address,
    Checkpoints,
    ClientStateMemory,
    Compile,
    DataDir,
    Device,
    DryRun,
    EvalBatchSize,
    Fast,
    Force,
    Gpus,
    GpusPerRun,
    Jobs,
    LauncherChoice,
    LogTo,
    NoVerify,
    Only,
    Overrides,
    PackingChoice,
    Plugins,
    Recipes,
    RegistryUrl,
    Scale,
    Seeds,
    SetFor,
    SlurmClusterChoice,
    SlurmFolder,
    SlurmGpus,
    SlurmPartition,
    SlurmTime,
    Synthetic,
    Threads,
    compile_options,
    load_plugins,
)
from fedbench.execution.options import ExecutionOptions, Launch, RayOptions, SlurmOptions
from fedbench.settings import Settings
from fedbench.vocab.metrics import to_percent
from fedbench.vocab.status import FINISHED, TAKEN_OVER, RunStatus

# `fedbench run`'s exit status when it ends with runs of the batch neither finished nor failed: interrupted (a Slurm
# job's time limit or scancel, a lost node) or left pending, so that a script can tell and re-run to resume them.
UNFINISHED_EXIT = 3

if TYPE_CHECKING:
    from rich.progress import TaskID

    from fedbench.execution.batch import Batch
    from fedbench.execution.events import Event
    from fedbench.registry.tracking import Tracker


@user_errors
def run(
    recipes: Recipes,
    scale: Scale = "full",
    seeds: Seeds = None,
    only: Only = [],  # noqa: B006 (a default Typer hands over; never mutated)
    set_: Overrides = [],  # noqa: B006
    add: Add = [],  # noqa: B006
    set_for: SetFor = [],  # noqa: B006
    synthetic: Synthetic = False,
    device: Device = "auto",
    jobs: Jobs = DEFAULT_LAUNCH.jobs,
    gpus: Gpus = None,
    threads: Threads = DEFAULTS.threads,
    packing: PackingChoice = DEFAULTS.packing,
    fast: Fast = DEFAULTS.fast,
    compile: Compile = DEFAULTS.compile,
    registry_url: RegistryUrl = None,
    data_dir: DataDir = None,
    no_verify: NoVerify = not DEFAULTS.verify,
    force: Force = False,
    dry_run: DryRun = False,
    checkpoints: Checkpoints = None,
    client_state_memory: ClientStateMemory = DEFAULT_CLIENT_STATE_MIB,
    eval_batch_size: EvalBatchSize = DEFAULTS.eval_batch_size,
    launcher: LauncherChoice = DEFAULT_LAUNCH.launcher,
    address: Address = None,
    gpus_per_run: GpusPerRun = DEFAULT_LAUNCH.ray.gpus_per_run,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = None,
    slurm_gpus: SlurmGpus = DEFAULT_LAUNCH.slurm.gpus_per_job,
    slurm_folder: SlurmFolder = None,
    slurm_cluster: SlurmClusterChoice = DEFAULT_LAUNCH.slurm.cluster,
    plugin: Plugins = [],  # noqa: B006
    log_to: LogTo = None,
) -> None:
    """Compile recipes into runs and train the ones not done yet.

    Example: `fedbench run recipes/quickstart.toml --jobs 2` ·
    `fedbench run recipes/quickstart.toml --scale smoke --only algorithm=fedavg --set rounds=5` ·
    `fedbench run recipes/quickstart.toml --add algorithm=scaffold --set-for algorithm=scaffold:optimizer.lr=0.02` ·
    `fedbench run recipes/quickstart.toml --log-to mlflow:sqlite:///mlflow.db` ·
    `fedbench run recipes/fedtrip_*.toml --executor slurm --slurm-partition gpu --slurm-time 04:00:00 --jobs 8
    --registry postgresql+psycopg://me@dbhost/fedbench`
    """
    from fedbench.execution import selection

    load_plugins(plugin)  # every worker loads them too (ExecutionOptions.plugins)
    settings = Settings(
        data_root=str(data_dir) if data_dir is not None else None,
        verify=not no_verify,
        threads=threads,
        packing=packing,
        fast=fast,
        compile=compile,
        client_state_memory=client_state_memory << 20,  # MiB on the command line
        eval_batch_size=eval_batch_size,
    )
    launch = Launch(  # checked now: a launcher's options without it are refused before anything is registered
        launcher=launcher,
        jobs=jobs,
        slurm=SlurmOptions(
            partition=slurm_partition,
            time=slurm_time,
            folder=slurm_folder,
            cluster=slurm_cluster,
            gpus_per_job=slurm_gpus,
        ),
        ray=RayOptions(address=address, gpus_per_run=gpus_per_run),
    )
    options = execution_options(registry_url, device, gpus, checkpoints, plugin, settings, launch)
    planned = selection.select_runs(
        recipes,
        **compile_options(scale, seeds, only, set_, synthetic, add, set_for),
        device=options.device,
        registry_url=options.registry_url,
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
    tracker = None
    if log_to is not None:  # a wrong --log-to is refused before anything is registered
        from fedbench.registry.tracking import open_tracker

        tracker = open_tracker(log_to)
    work = batch.prepare_batch(planned, options, force=force)
    for warning in work.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
    if work.rerun:
        console.print(f"--force: re-running {len(work.rerun)} finished run(s)")
    elif work.skipped:
        console.print(f"{len(work.skipped)} of {len(planned)} runs already done (skipped; --force re-runs them)")
    if work.todo:
        train_with_progress(work, tracker)
    outcome = work.outcome()
    counts = ", ".join(f"{n} {status}" for status, n in outcome.counts.items())
    console.print(f"registry: {counts}  ({outcome.registry_url})")
    for failed in outcome.failed:
        err_console.print(f"[red]failed[/red] {failed.spec_hash} {escape(str(failed.labels))}: {escape(failed.error)}")
    if outcome.failed:
        raise typer.Exit(1)
    # interrupted (a job's time limit, scancel, a lost node), still pending, or running under a worker that is gone
    # (killed outright): a re-run resumes them. A run another live `fedbench run` is training at the same time is
    # that one's to finish (concurrent batches both exit 0).
    unfinished = outcome.abandoned + sum(
        n for status, n in outcome.counts.items() if status not in FINISHED and status != RunStatus.RUNNING
    )
    if unfinished:
        err_console.print(f"{unfinished} run(s) not finished: re-run the same command to resume them")
        raise typer.Exit(UNFINISHED_EXIT)


def execution_options(
    registry_url: str | None,
    device: str,
    gpus: str | None,
    checkpoints: str | None,
    plugins: list[str],
    settings: Settings,
    launch: Launch,
) -> ExecutionOptions:
    """``fedbench run``'s ``ExecutionOptions``, built once from the flags that the command line gives in another
    form than the workers read them: GPU indices, the checkpoints' resolved location, the plug-ins as every worker
    loads them."""
    from fedbench.checkpoint.location import resolve_checkpoints
    from fedbench.execution.devices import parse_gpus
    from fedbench.plugins import plugin_source  # local: the CLI's start-up imports no library (cli/__init__.py)

    return ExecutionOptions(
        registry_url=registry_url,
        device=device,
        gpus=parse_gpus(gpus),
        checkpoints=resolve_checkpoints(checkpoints),
        plugins=tuple(plugin_source(text) for text in plugins),
        settings=settings,
        launch=launch,
    )


def train_with_progress(work: Batch, tracker: Tracker | None = None) -> None:
    """Train the batch with rich progress bars: one for all rounds (its status counts runs), one per run; each run
    that finishes is copied into ``tracker`` (``--log-to``) from the registry, where the event says it ended."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from fedbench.errors import FedbenchError
    from fedbench.execution.events import Note, RoundDone, RunEnded, RunStarted, RunWarning
    from fedbench.registry.tracking import export_run

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
        ended: set[str] = set()  # runs whose last news is their end (a run taken over and resumed starts again)

        def count_rounds(key: str, upto: int) -> None:
            progress.advance(overall, max(0, upto - counted.get(key, 0)))
            counted[key] = max(upto, counted.get(key, 0))

        def on_event(event: Event) -> None:
            if isinstance(event, Note):  # from the launcher: jobs submitted, a worker failed
                progress.console.print(f"  {escape(event.message)}")
            elif isinstance(event, RunStarted):
                ended.discard(event.spec_hash)
                progress.update(overall, status=f"{len(ended)}/{len(todo)} runs")
                if event.spec_hash in current:  # claimed again before its end was seen
                    progress.remove_task(current.pop(event.spec_hash))
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
            elif isinstance(event, RunEnded) and event.status == TAKEN_OVER:  # it goes on in another worker
                progress.console.print(f"  {escape(label_of.get(event.spec_hash, event.spec_hash))}: {event.error}")
            elif isinstance(event, RunEnded):
                key = event.spec_hash
                if key in current:
                    progress.remove_task(current.pop(key))
                if event.status in FINISHED:  # a run stopped early (failed, interrupted) leaves its rounds untrained
                    count_rounds(key, rounds_of.get(key, 0))
                ended.add(key)
                progress.update(overall, status=f"{len(ended)}/{len(todo)} runs")
                if event.status != RunStatus.DONE:
                    error = event.error or ""
                    progress.console.print(f"  {escape(label_of.get(key, key))}: {event.status} {escape(error)}")
                if tracker is not None:
                    try:
                        export_run(tracker, work.store, key)
                    except FedbenchError as exc:  # the tracker's trouble never stops the training
                        progress.console.print(
                            f"[yellow]warning:[/yellow] {escape(str(exc))} (the run is in the registry; "
                            "`fedbench export --to` copies it later)",
                            soft_wrap=True,
                        )

        work.train(on_event)
