"""A worker's claim loop: claim each planned run, train it with a heartbeat on the claim, record its outcome.

Every worker (in process, a local worker process, a Slurm job, a Ray task) first loads the batch's plug-ins
(``ExecutionOptions.plugins``), then walks the same list and *claims* each run before training it (an atomic registry update), so workers never duplicate a run; a run whose worker died is
claimed again and resumes from its checkpoint (``checkpoint/location.py`` says where that is). Progress goes to an
``emit`` callback as ``events``.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fedbench.checkpoint.location import is_url, remove_checkpoint, run_checkpoint
from fedbench.checkpoint.mirror import CheckpointMirror
from fedbench.curves import summarize
from fedbench.data.federated import ArraysCache
from fedbench.engine import EngineOptions, RunResult
from fedbench.engine import run as run_engine
from fedbench.errors import ClaimLost, CodeChanged, FedbenchError, RegistryUnreachable, Stopped, WriteFailed
from fedbench.execution.devices import resolve_device
from fedbench.execution.events import Emit, RoundDone, RunEnded, RunStarted, RunWarning
from fedbench.execution.options import ExecutionOptions
from fedbench.execution.provenance import PeakMemory, check_code_unchanged, code_fingerprint, provenance
from fedbench.plugins import load_plugins
from fedbench.recipes.expand import PlannedRun
from fedbench.recipes.resolve import check_plugin_code, plugin_records
from fedbench.registry import Registry
from fedbench.registry.claims import Heartbeat, worker_id
from fedbench.spec import RunSpec
from fedbench.vocab.metrics import SUMMARY_METRIC, metric_curve
from fedbench.vocab.provenance import PEAK_MEMORY
from fedbench.vocab.status import TAKEN_OVER, RunStatus


class RegistrySink:
    """The run's rounds, its checkpoint's content hash (``CheckpointLedger``), provenance and outcome go to the
    registry, each only while this worker holds the run's claim (``heartbeat``): once another worker took the run
    over, every write raises ``ClaimLost`` and writes nothing (the heartbeat's flag, checked first, costs nothing;
    the registry's conditional write catches a takeover the heartbeat has not seen yet)."""

    def __init__(self, registry: Registry, run_id: int, heartbeat: Heartbeat | None = None):
        self.registry, self.run_id, self.heartbeat = registry, run_id, heartbeat

    def _write(self, method: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        worker = None
        if self.heartbeat is not None:
            if self.heartbeat.lost:
                raise ClaimLost(self.run_id, self.heartbeat.worker)
            worker = self.heartbeat.worker
        try:
            method(self.run_id, *args, worker=worker, **kwargs)
        except ClaimLost:
            if self.heartbeat is not None:
                self.heartbeat.lost = True
            raise

    def checkpoint_sha256(self) -> str | None:
        return self.registry.checkpoint_sha256(self.run_id)

    def record_checkpoint(self, sha256: str | None) -> None:
        self._write(self.registry.record_checkpoint, sha256)

    def log_round(self, record) -> None:
        self._write(self.registry.log_round, record)

    def truncate(self, after_round: int) -> None:
        self._write(self.registry.truncate_rounds, after_round)

    def set_provenance(self, info: dict[str, Any]) -> None:
        self._write(self.registry.set_provenance, info)

    def finish(self, status: str, **outcome: Any) -> None:
        self._write(self.registry.finish, status, **outcome)


def train(
    spec: RunSpec,
    sink: RegistrySink,
    options: ExecutionOptions,
    device: torch.device,
    checkpoint: Path,
    mirror: CheckpointMirror | None,
    arrays: ArraysCache | None,
    emit: Emit,
) -> RunResult:
    """Train a claimed run on the engine with the batch's settings and this worker's own objects: its device, data
    cache and checkpoint. ``sink`` records rounds and is the checkpoint's ledger; ``mirror``: the checkpoint's copy at
    a storage URL."""
    return run_engine(
        spec,
        sink,
        EngineOptions(
            settings=options.settings,
            device=device,
            checkpoint_path=checkpoint,
            checkpoint_ledger=sink,
            checkpoint_mirror=mirror,
            arrays=arrays,
            on_warning=lambda message: emit(RunWarning(spec.spec_hash, message)),
            on_round=lambda r: emit(RoundDone(spec.spec_hash, r.round, r.test_acc, r.wall_seconds)),
        ),
    )


def checkpoint_mirror(options: ExecutionOptions, spec_hash: str) -> CheckpointMirror | None:
    """The copy of a run's checkpoint at a ``--checkpoints`` URL (s3://, gs://, …), or None for a folder."""
    if options.checkpoints is None or not is_url(options.checkpoints):
        return None
    return CheckpointMirror(options.checkpoints, spec_hash)


def execute_one(
    registry: Registry,
    planned: PlannedRun,
    run_id: int,
    options: ExecutionOptions,
    emit: Emit,
    arrays: ArraysCache | None = None,
    heartbeat: Heartbeat | None = None,
) -> str:
    """Train one claimed run (loading its data set through the worker's ``arrays`` cache) and record its outcome.
    Returns the final status, or ``taken over`` when another worker took the claim over (``heartbeat``: this
    worker's claim; then nothing more is written for the run).

    A server registry that stays unreachable through its retries (``RegistryUnreachable``) stops the worker with
    nothing more recorded: the run is left as a killed worker leaves it, resumable.

    A checkpoint or registry write that the machine refuses (``WriteFailed``: disk full, read-only) is recorded as
    ``failed`` with its one-line message (no traceback: the disk, not fedbench, is at fault) when the registry can
    still record it, and raised again: the worker stops, as every further run would fail on the same disk.
    ``failed`` rather than ``interrupted``: the run stopped on an error the user must fix, which `fedbench runs`
    and `show` list with it; both statuses are claimable (``Registry.claim``) and keep the checkpoint's recorded
    hash, so the next `fedbench run` resumes the run from its last checkpoint either way. When the registry cannot
    record it, the claim stays ``running`` under this process, and is taken over once the process has exited."""
    spec: RunSpec = planned.spec
    device = resolve_device(options.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # the worker's GPU (``devices.place_workers``) is also its default CUDA device
    sink = RegistrySink(registry, run_id, heartbeat)
    plugins = {"plugins": plugin_records(spec)} if spec.plugin_code else {}  # those from outside fedbench it uses

    def taken_over(exc: ClaimLost) -> str:
        message = f"{exc}; this worker stopped it and wrote nothing more for it"
        emit(RunEnded(spec.spec_hash, TAKEN_OVER, error=message))
        return TAKEN_OVER

    def stop_for(exc: WriteFailed) -> WriteFailed:
        message = registry.scrub(str(exc))
        # a registry that cannot be written (or reached) cannot record it
        with contextlib.suppress(WriteFailed, ClaimLost, RegistryUnreachable):
            sink.finish(RunStatus.FAILED, error=message)
        emit(RunEnded(spec.spec_hash, RunStatus.FAILED, error=message))
        return exc

    try:
        sink.set_provenance(provenance(device, **plugins))
    except ClaimLost as exc:
        return taken_over(exc)
    except WriteFailed as exc:
        raise stop_for(exc) from None
    emit(RunStarted(spec.spec_hash, spec.rounds))
    began = time.perf_counter()
    checkpoint = run_checkpoint(spec.spec_hash, registry.home, options.checkpoints)
    memory = PeakMemory(device)
    memory.start()
    mirror = None
    try:
        check_plugin_code(spec)  # this worker's plug-ins are the code the run was planned with
        mirror = checkpoint_mirror(options, spec.spec_hash)
        if mirror is not None:  # the storage's copy is the one to resume from
            remove_checkpoint(checkpoint)
            mirror.fetch(checkpoint)
        result = train(spec, sink, options, device, checkpoint, mirror, arrays, emit)
    except ClaimLost as exc:
        return taken_over(exc)
    except KeyboardInterrupt as exc:
        reason = exc.reason if isinstance(exc, Stopped) else "interrupted by the user"
        # the interruption is what the user is told about
        with contextlib.suppress(WriteFailed, ClaimLost, RegistryUnreachable):
            sink.finish(RunStatus.INTERRUPTED, error=f"{reason}; re-run to resume")
        raise
    except WriteFailed as exc:
        raise stop_for(exc) from None
    except RegistryUnreachable:
        # Nothing can be recorded: the worker stops, its claim lapses once it is gone (``stale_reason``) and the
        # run resumes from its last recorded checkpoint, as after a kill. Not a failure of the run.
        raise
    except FedbenchError as exc:
        message = registry.scrub(str(exc))  # errors are stored and shown: never with the registry's password
        with contextlib.suppress(ClaimLost):
            sink.finish(RunStatus.FAILED, error=message)
        emit(RunEnded(spec.spec_hash, RunStatus.FAILED, error=message))
        return RunStatus.FAILED
    except Exception as exc:  # a bug: keep the traceback in the registry, go on with other runs
        with contextlib.suppress(ClaimLost):
            sink.finish(RunStatus.FAILED, error=registry.scrub("".join(traceback.format_exception(exc))[-4000:]))
        emit(RunEnded(spec.spec_hash, RunStatus.FAILED, error=registry.scrub(f"{type(exc).__name__}: {exc}")))
        return RunStatus.FAILED
    info = {**provenance(device, **plugins, **result.settings), "data": result.info, PEAK_MEMORY: memory.result()}
    rows = registry.curve(run_id)
    curve = metric_curve(rows, SUMMARY_METRIC)
    # A resumed run's wall time also counts its earlier sessions: the rounds it kept from them, as they were timed.
    resumed_from = int(result.info.get("resumed_from") or 0)
    earlier = sum(float(r.wall_seconds or 0.0) for r in rows if r.round <= resumed_from)
    try:
        sink.set_provenance(info)
        sink.finish(
            result.status,
            summary=summarize(curve, planned.targets),
            error=result.message,
            diverged_round=result.diverged_round,
            wall_seconds=time.perf_counter() - began + earlier,
        )
    except ClaimLost as exc:  # the new owner's checkpoint is not this worker's to delete
        return taken_over(exc)
    except WriteFailed as exc:  # every round and the last checkpoint are recorded: the next run only records this
        raise stop_for(exc.resuming(spec.spec_hash, result.rounds_done)) from None
    remove_checkpoint(checkpoint)  # and its client-state files
    if mirror is not None:
        mirror.remove()
    emit(RunEnded(spec.spec_hash, result.status, final=curve[-1][1] if curve else None))
    return result.status


def work_through(
    planned: list[PlannedRun],
    options: ExecutionOptions,
    emit: Emit,
    arrays: ArraysCache | None = None,
) -> None:
    """Load the batch's plug-ins, then claim and train every run not finished or held by a live worker; the runs
    share one data set cache."""
    load_plugins(options.plugins)
    code = code_fingerprint()  # the code this worker trains with: each run it claims is checked against it
    torch.set_num_threads(options.settings.threads)
    registry = Registry(options.registry_url)
    arrays = arrays if arrays is not None else ArraysCache()
    for item in planned:
        worker = worker_id()
        run_id = registry.claim(item.spec_hash, worker)
        if run_id is not None:
            with Heartbeat(registry, run_id, worker) as heartbeat:  # beats however long a round takes
                stop_if_code_changed(RegistrySink(registry, run_id, heartbeat), code, item.spec_hash, emit)
                execute_one(registry, item, run_id, options, emit, arrays, heartbeat)


def stop_if_code_changed(sink: RegistrySink, started_with: str | None, spec_hash: str, emit: Emit) -> None:
    """Before a claimed run trains: if fedbench's code changed on disk since the worker started, leave the run
    interrupted (the next `fedbench run` trains it, resuming any checkpoint) and stop the worker (``CodeChanged``)."""
    try:
        check_code_unchanged(started_with)
    except CodeChanged as exc:
        with contextlib.suppress(WriteFailed, ClaimLost, RegistryUnreachable):
            sink.finish(RunStatus.INTERRUPTED, error=str(exc))
        emit(RunEnded(spec_hash, RunStatus.INTERRUPTED, error=str(exc)))
        raise


__all__ = ["RegistrySink", "checkpoint_mirror", "execute_one", "stop_if_code_changed", "train", "work_through"]
