"""Workers beyond this machine: Slurm array jobs (submitit) and Ray tasks, each running the claim loop of a local
worker (``fedbench.execution.worker.work_through``) against the same registry.

Nothing here schedules runs: every worker walks the whole list of planned runs and *claims* each before training
it (the registry's atomic conditional update), exactly as ``--jobs N`` workers on one machine do, so a run is
trained once however many workers, jobs or machines join, and a run whose worker died is taken over and resumed
from its checkpoint. A shared registry (PostgreSQL) is what makes that work across machines; checkpoints must be
on storage every worker sees (``--checkpoints``).

Progress comes back by watching the registry (``watch_registry``): the runs' statuses and their last recorded
rounds become the same start/round/end events an in-process run emits, whatever the launcher. Ctrl-C cancels the
jobs or tasks; each worker then records its run as ``interrupted`` (its checkpoint kept), as a local worker does.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.engine import make_url

from fedbench.errors import ConfigError, FedbenchError, Stopped
from fedbench.execution.events import Emit, Note, RoundDone, RunEnded, RunStarted
from fedbench.execution.options import (
    ExecutionOptions,
    Launch,
    Launcher,
    RayOptions,
    SlurmCluster,
    SlurmOptions,
    slurm_minutes,
)
from fedbench.execution.worker import work_through
from fedbench.recipes.expand import PlannedRun
from fedbench.registry import Registry, default_registry_url
from fedbench.registry.claims import worker_id
from fedbench.registry.store import in_chunks
from fedbench.registry.tables import rounds, runs
from fedbench.vocab.status import ENDED, WAITING, RunStatus

POLL_SECONDS = 2.0  # how often the submitting process reads the registry for progress
# How long a cluster worker that found runs held by other workers waits before it looks again: one of them may die
# (a node lost, a job preempted), and its run is then taken over (at once for a dead process on the same host,
# after the stale-claim delay for another host) instead of being left for the next `fedbench run`.
REPASS_SECONDS = 10.0
WAIT_STEP_SECONDS = 1.0  # how often it reads the statuses meanwhile (it stops once every run has ended)


# What a signal a Slurm job receives means, as the run's stored reason for its interruption (``errors.Stopped``).
STOP_REASONS = {
    signal.SIGTERM: "stopped by SIGTERM (its Slurm job cancelled, requeued or preempted, or its node going down)",
    signal.SIGUSR2: "stopped by Slurm's warning before its job's time limit (SIGUSR2)",
}
# submitit asks Slurm for SIGUSR2 this many seconds before a job's time limit (``#SBATCH --signal=USR2@90``) ...
SLURM_WARNING_SECONDS = 90
# ... but never more than this share of the limit: a 1-minute job warned 90 s ahead would be signalled as it starts,
# before the worker has its handlers, and die of the signal's default action without recording its run.
SLURM_WARNING_SHARE = 0.25


def _interrupt(signum, frame) -> None:
    raise Stopped(STOP_REASONS[signum])


def slurm_warning_seconds(minutes: int) -> int:
    """How long before a job's time limit of ``minutes`` Slurm warns its worker (SIGUSR2): submitit's 90 s, or a
    quarter of a shorter limit, so that the worker has started and set its handlers by then."""
    return min(SLURM_WARNING_SECONDS, int(minutes * 60 * SLURM_WARNING_SHARE))


def cluster_worker(planned: list[PlannedRun], options: ExecutionOptions, handle_signals: bool = True) -> str:
    """What each Slurm job or Ray task runs: the local claim loop, repeated while other workers hold runs of the
    batch (every REPASS_SECONDS), so that a run whose worker dies is taken over by a worker still up. In a Slurm job (``handle_signals``), SIGTERM
    (scancel, a node going down) and SIGUSR2 (Slurm's warning before the time limit) interrupt the run in progress,
    recorded as interrupted with its checkpoint, so that another worker resumes it at once instead of after the
    stale-claim delay. Ray delivers its cancellation as KeyboardInterrupt itself and keeps its signals."""
    if handle_signals:
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGUSR2, _interrupt)
    try:
        registry, last_pass = Registry(options.registry_url), -math.inf
        while planned:
            statuses = registry.statuses(p.spec_hash for p in planned)
            planned = [p for p in planned if statuses.get(p.spec_hash) in WAITING]
            claimable = any(statuses.get(p.spec_hash) != RunStatus.RUNNING for p in planned)
            if planned and (claimable or time.monotonic() - last_pass >= REPASS_SECONDS):
                work_through(planned, options, lambda event: None)
                last_pass = time.monotonic()
            elif planned:  # all held by other workers: wait for them to finish, or for one to die
                time.sleep(WAIT_STEP_SECONDS)
    except KeyboardInterrupt:
        return f"{worker_id()} interrupted"
    return f"{worker_id()} done"


# ---------------------------------------------------------------------------------------------- progress
class RegistryWatcher:
    """Turns the registry's view of ``planned`` runs into start/round/end events (one ``poll`` per call)."""

    def __init__(self, registry: Registry, planned: list[PlannedRun], emit: Emit):
        self.registry, self.emit = registry, emit
        self.rounds_of = {p.spec_hash: p.spec.rounds for p in planned}
        self.seen: dict[str, tuple[str, int]] = {}  # spec_hash → (status, rounds_done) last emitted
        # What was there before any worker started (create the watcher before submitting them): a run finished
        # before the first poll is then still news, and runs finished earlier are not.
        self.initial = {h: (s, n) for h, (_, s, n, _) in self._state().items()}

    def _state(self) -> dict[str, tuple[int, str, int, str | None]]:
        hashes = list(self.rounds_of)
        state = {}
        with self.registry.engine.connect() as connection:
            for chunk in in_chunks(hashes):
                rows = connection.execute(
                    select(runs.c.spec_hash, runs.c.id, runs.c.status, runs.c.rounds_done, runs.c.error).where(
                        runs.c.spec_hash.in_(chunk)
                    )
                )
                state.update({h: (i, s, n, e) for h, i, s, n, e in rows})
        return state

    def _last_round(self, run_id: int, number: int) -> Row[Any] | None:
        with self.registry.engine.connect() as connection:
            return connection.execute(select(rounds).where(rounds.c.run_id == run_id, rounds.c.round == number)).first()

    def poll(self) -> None:
        state = self._state()
        for spec_hash in self.rounds_of:  # in the batch's order
            if spec_hash not in state:
                continue
            run_id, status, rounds_done, error = state[spec_hash]
            before = self.seen.get(spec_hash)
            if before is None and (status, rounds_done) == self.initial.get(spec_hash) and status != RunStatus.RUNNING:
                continue  # untouched since the start (pending, or left as it was)
            if before is None:
                self.emit(RunStarted(spec_hash, self.rounds_of[spec_hash]))
                before = (RunStatus.RUNNING, 0)
            elif before[0] in ENDED and (status, rounds_done) != before:  # claimed again: taken over, resumed
                self.emit(RunStarted(spec_hash, self.rounds_of[spec_hash]))
                before = (RunStatus.RUNNING, before[1])
            if rounds_done > before[1]:
                row = self._last_round(run_id, rounds_done)
                self.emit(
                    RoundDone(
                        spec_hash,
                        rounds_done,
                        test_acc=row.test_acc if row is not None else None,
                        seconds=(row.wall_seconds or 0.0) if row is not None else 0.0,
                    )
                )
            if status in ENDED and before[0] not in ENDED:
                last = (error or "").strip().splitlines()
                self.emit(RunEnded(spec_hash, status, error=last[-1] if last else ""))
            self.seen[spec_hash] = (status, rounds_done)


def watch_until(watcher: RegistryWatcher, finished: Callable[[], bool], interval: float = POLL_SECONDS) -> None:
    """Poll the registry until ``finished()`` says every worker has stopped, then once more."""
    while not finished():
        watcher.poll()
        time.sleep(interval)
    watcher.poll()


# ---------------------------------------------------------------------------------------------- Slurm
def slurm_executor(slurm: SlurmOptions, jobs: int, threads: int, folder: Path) -> Any:
    """A submitit executor (submitit's name for what submits jobs) for an array of ``jobs`` worker jobs."""
    try:
        # local: optional dependency (pip install fedbench-repro[slurm])
        import submitit
    except ImportError:
        raise ConfigError(
            "--executor slurm needs submitit: pip install 'fedbench-repro[slurm]' (or pip install submitit)"
        ) from None
    if slurm.time is None:  # ``Launch`` requires it; a caller building SlurmOptions alone must give it too
        raise ConfigError("--executor slurm needs --slurm-time HH:MM:SS (each worker job's time limit)")
    minutes = slurm_minutes(slurm.time)
    try:
        executor = submitit.AutoExecutor(folder=folder, cluster=str(slurm.cluster))
    except RuntimeError as exc:  # submitit: 'Could not detect "srun"'
        raise FedbenchError(
            f"--executor slurm: this is not a Slurm cluster ({exc}); submit from a login node, "
            "or try the array here with --slurm-cluster local"
        ) from None
    executor.update_parameters(
        name="fedbench-worker",
        timeout_min=minutes,
        cpus_per_task=slurm.cpus_per_job or threads,
        slurm_array_parallelism=jobs,
        slurm_time=minutes,
        slurm_signal_delay_s=slurm_warning_seconds(minutes),
        **({"slurm_partition": slurm.partition} if slurm.partition else {}),
        **({"gpus_per_node": slurm.gpus_per_job} if slurm.gpus_per_job else {}),
    )
    return executor


def submit_slurm_workers(executor: Any, planned: list[PlannedRun], options: ExecutionOptions, jobs: int) -> list[Any]:
    """Submit ``jobs`` workers as one array job; returns submitit's jobs."""
    try:
        return list(executor.map_array(cluster_worker, [planned] * jobs, [options] * jobs))
    except FileNotFoundError as exc:  # no sbatch: not on a Slurm login node
        raise FedbenchError(
            f"--executor slurm: {exc.filename or 'sbatch'} not found; submit from a Slurm login node "
            "(or try the array here with --slurm-cluster local)"
        ) from None
    except Exception as exc:
        if type(exc).__name__ == "FailedJobError" or "sbatch" in str(exc):
            raise FedbenchError(f"--executor slurm: submission failed: {' '.join(str(exc).split())[:500]}") from None
        raise


def execute_on_slurm(
    planned: list[PlannedRun],
    options: ExecutionOptions,
    jobs: int,
    emit: Emit,
    slurm: SlurmOptions,
) -> None:
    registry = Registry(options.registry_url)
    folder = Path(slurm.folder) if slurm.folder is not None else registry.home / "slurm"
    executor = slurm_executor(slurm, jobs, options.settings.threads, folder / "%j")
    watcher = RegistryWatcher(registry, planned, emit)
    submitted = submit_slurm_workers(executor, planned, options, jobs)
    array_job = submitted[0].job_id.split("_")[0]
    emit(Note(f"submitted {len(submitted)} worker job(s) {array_job}"))

    def finished() -> bool:
        if slurm.cluster == SlurmCluster.SLURM:
            return not slurm_queued(array_job)
        return all(job.done() for job in submitted)  # submitit's local executor: processes it watches itself

    try:
        watch_until(watcher, finished)
    except BaseException:
        for job in submitted:  # their workers record the runs in progress as interrupted
            job.cancel(check=False)
        raise
    for job in submitted:
        if not job.paths.result_pickle.exists():  # killed (kill -9, a scancel before its handlers were set)
            emit(Note(f"worker job {job.job_id} ended without a result: its run, if any, is taken over by a re-run"))
            continue
        try:
            job.result()
        except Exception as exc:  # a job that died outside a run: its claim is taken over by the next worker
            emit(Note(f"worker job {job.job_id} failed: {' '.join(str(exc).split())[-300:]}"))


def slurm_queued(array_job: str) -> bool:
    """Whether any task of ``array_job`` is still in Slurm's queue (pending, running, completing, requeued).
    ``squeue`` rather than submitit's ``job.done()``: that reads ``sacct``, which fails on a cluster without
    accounting, and a job killed before it wrote its result file would then never be done. When ``squeue`` itself
    fails (the controller busy or restarting) the job counts as queued: the next poll asks again."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return True
    try:
        listed = subprocess.run(
            [squeue, "-h", "-j", array_job, "-o", "%i"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return True
    if listed.returncode != 0:
        # an unknown job id (gone from the controller's memory after MinJobAge) is not queued
        return "Invalid job id" not in listed.stderr
    return bool(listed.stdout.strip())


# ---------------------------------------------------------------------------------------------- Ray
def execute_on_ray(
    planned: list[PlannedRun],
    options: ExecutionOptions,
    jobs: int,
    emit: Emit,
    ray_options: RayOptions,
) -> None:
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        connect_ray(ray, ray_options)
    try:
        # Any: ray's typed overloads take cluster_worker for a two-argument function (its third has a default)
        cpus = ray_options.cpus_per_run if ray_options.cpus_per_run is not None else float(options.settings.threads)
        worker: Any = ray.remote(cluster_worker).options(
            num_cpus=cpus, num_gpus=ray_options.gpus_per_run, max_retries=0
        )
        watcher = RegistryWatcher(Registry(options.registry_url), planned, emit)
        refs = [worker.remote(planned, options, False) for _ in range(jobs)]
        try:
            watch_until(watcher, lambda: len(ray.wait(refs, num_returns=len(refs), timeout=0)[0]) == len(refs))
        except BaseException:
            for ref in refs:  # raises KeyboardInterrupt in each task: its run is recorded as interrupted
                ray.cancel(ref)
            _wait_for_cancelled(ray, refs)
            raise
        for ref in refs:
            try:
                ray.get(ref)
            except Exception as exc:
                emit(Note(f"Ray worker failed: {' '.join(str(exc).split())[-300:]}"))
    finally:
        if started_here:
            ray.shutdown()


def _import_ray() -> Any:
    try:
        # local: optional dependency (pip install fedbench-repro[ray])
        import ray
    except ImportError:
        raise ConfigError(
            "--executor ray needs ray: pip install 'fedbench-repro[ray]' (or pip install 'ray>=2.9')"
        ) from None
    return ray


def connect_ray(ray: Any, ray_options: RayOptions) -> None:
    """``ray.init`` for ``--address`` (None: a new local Ray, never one that `ray start` left behind: ray.init(None)
    would connect to the last cluster `ray start` recorded, even a dead one). A cluster that refuses this process's
    authentication token fails as one that is not there: Ray says only that it could not connect."""
    try:
        ray.init(address=ray_options.address or "local", include_dashboard=False, log_to_driver=False)
    except ConnectionError as exc:
        raise FedbenchError(
            f"--address {ray_options.address}: cannot reach a Ray cluster there, or it refused this process's "
            f"authentication token (RAY_AUTH_MODE and the token must be the cluster's) ({exc})"
        ) from None


def reach_cluster(launch: Launch) -> None:
    """Check, before a batch registers anything, that the cluster its workers go to takes them: a Ray cluster at
    ``--address`` is connected to and left (an unreachable or refusing one is then a user error with nothing
    written). A local Ray, and Slurm (whose submission fails with its own message), need no check."""
    if launch.launcher != Launcher.RAY or launch.ray.address is None:
        return
    ray = _import_ray()
    if ray.is_initialized():  # a caller's own connection
        return
    connect_ray(ray, launch.ray)
    ray.shutdown()


def _wait_for_cancelled(ray: Any, refs: list[Any], seconds: float = 60.0) -> None:
    """Give cancelled tasks the time to record their runs as interrupted before Ray is shut down."""
    try:
        ray.wait(refs, num_returns=len(refs), timeout=seconds)
    except Exception:  # cancelled tasks raise on wait in some Ray versions; nothing left to do
        pass


def for_remote_workers(options: ExecutionOptions) -> ExecutionOptions:
    """``options`` with the registry named and the paths a worker elsewhere reads made absolute: a Ray or Slurm
    worker does not start in this working directory (a relative SQLite URL would open another registry there)."""
    registry_url = options.registry_url or default_registry_url()
    url = make_url(registry_url)
    changes: dict[str, Any] = {"registry_url": registry_url}
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        absolute = str(Path(url.database).resolve())
        if absolute != url.database:
            changes["registry_url"] = url.set(database=absolute).render_as_string(hide_password=False)
    if options.settings.data_root is not None:
        data_root = str(Path(options.settings.data_root).expanduser().resolve())
        changes["settings"] = dataclasses.replace(options.settings, data_root=data_root)
    return dataclasses.replace(options, **changes)


def _sqlite_note(options: ExecutionOptions, many_machines: bool, emit: Emit) -> None:
    if many_machines and str(options.registry_url).startswith("sqlite"):
        emit(
            Note(
                "a SQLite registry serves workers on one machine (a shared file system does not make its locks "
                "safe): give workers on other machines a PostgreSQL registry (--registry postgresql+psycopg://...)"
            )
        )


def execute_on_cluster(planned: list[PlannedRun], options: ExecutionOptions, emit: Emit) -> None:
    """Run ``options.launch.jobs`` workers as Slurm jobs or Ray tasks, as ``options.launch`` says."""
    options = for_remote_workers(options)
    launch = options.launch
    cluster = launch.cluster
    _sqlite_note(
        options,
        (isinstance(cluster, SlurmOptions) and cluster.cluster == SlurmCluster.SLURM)
        or (isinstance(cluster, RayOptions) and cluster.address is not None),
        emit,
    )
    if isinstance(cluster, SlurmOptions):
        execute_on_slurm(planned, options, launch.jobs, emit, cluster)
    elif isinstance(cluster, RayOptions):
        execute_on_ray(planned, options, launch.jobs, emit, cluster)
    else:
        raise TypeError(f"no cluster launcher in {launch!r}")


__all__ = [
    "cluster_worker",
    "RegistryWatcher",
    "watch_until",
    "slurm_executor",
    "submit_slurm_workers",
    "execute_on_slurm",
    "execute_on_ray",
    "execute_on_cluster",
    "reach_cluster",
    "slurm_queued",
    "slurm_warning_seconds",
]
