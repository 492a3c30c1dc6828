"""Run planned specs: in process, or in N worker processes that claim runs from the registry.

Every worker loops over the same list and *claims* each run before training it (an atomic
registry update), so workers never duplicate a run; a run whose worker died is claimed again and
resumes from its checkpoint. Progress events go to a callback (in process) or through a queue.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue as queue_module
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from fedbench.checkpoint.format import remove_checkpoint
from fedbench.checkpoint.mirror import CheckpointMirror, is_url
from fedbench.data.federated import ArraysCache, check_test_set, client_test_sets, partition_clients
from fedbench.engine import EngineOptions
from fedbench.engine import run as run_engine
from fedbench.engine.accel import Acceleration
from fedbench.errors import ClaimLost, FedbenchError, WriteFailed
from fedbench.execution.devices import place_workers
from fedbench.execution.provenance import PEAK_MEMORY, PeakMemory, provenance
from fedbench.metrics import summarize
from fedbench.recipes.expand import PlannedRun
from fedbench.registry import Registry
from fedbench.registry.claims import Heartbeat, worker_id
from fedbench.spec import RunSpec
from fedbench.vocab.metrics import SUMMARY_METRIC, metric_curve

Event = dict[str, Any]  # {"kind": "start"|"round"|"warning"|"end", ...}
# How long `fedbench run` waits for a worker to exit once all runs are done or it was told to stop: a deadline
# for a stuck worker only (recording a run waits up to 60 s for another process's registry lock), then it is killed.
WORKER_STOP_SECONDS = 180.0


@dataclass
class ExecutionOptions:
    registry_url: str
    device: str = "auto"
    data_root: str | None = None
    eval_batch_size: int = 1000
    # Intra-op CPU threads per run. Fixed (not derived from --jobs) because floating-point reductions
    # depend on the thread count: with it fixed, a spec's curve is bit-identical whatever --jobs is.
    threads: int = 1
    verify: bool = True  # --no-verify skips checksums; provenance records data.verified=false
    # Which path trains a run's clients (``engine.packed.choose_executor``): auto, packed or sequential. Not part
    # of the spec (results agree up to floating-point summation order); provenance records the path and why.
    packing: str = "auto"
    # GPUs the workers of --device cuda are spread over (``placement.place_workers``); None: every visible one
    gpus: tuple[int, ...] | None = None
    # CUDA speed switches (``engine/accel.py``): channels-last + fused optimizers (``fast``), ``torch.compile``.
    # Not part of the spec (results agree up to rounding); provenance records them. No effect on a CPU.
    fast: bool = True
    compile: bool = False
    # --checkpoints: a folder every worker sees (shared storage), so that any worker resumes any run; None: beside
    # the registry (a SQLite file's folder, else ./registry/checkpoints)
    checkpoints: str | None = None
    # --client-state-memory: bytes of per-client state a run keeps in memory before the states its last checkpoint
    # filed leave it (``engine/client_states.py``); None: the engine's default. Not part of the spec.
    client_state_memory: int | None = None


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif name.startswith("cuda") and not torch.cuda.is_available():
        raise FedbenchError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    else:
        device = torch.device(name)
    if device.type == "cuda":
        deterministic_cuda()
    return device


def check_placement(device: str, gpus: tuple[int, ...] | None) -> None:
    """A bad ``--gpus`` (an index not visible, with a CPU device) is a user error before anything is registered."""
    place_workers(device, 1, gpus, torch.cuda.device_count())


def deterministic_cuda() -> None:
    """Same spec, same curve on a GPU too (a resumed run must finish with the numbers of an uninterrupted
    one): cuDNN and cuBLAS are asked for their deterministic algorithms and cuDNN's autotuner is off.
    An operation with no deterministic CUDA kernel warns instead of failing."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS creates its handle
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)


class _RegistrySink:
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


def preflight(
    planned: list[PlannedRun], data_root: str | None = None, verify: bool = True, arrays: ArraysCache | None = None
) -> list[str]:
    """Load every data set and build every distinct partition once before anything is registered, so
    missing data or impossible partition (or client test set) parameters are user errors (exit 2) that leave
    the registry untouched, instead of failed runs. ``arrays``: a cache to load through (pass the one the
    in-process runs will use, so that the last data set is not loaded twice). Returns the warnings for the
    user, one line each (pickled data files read without a matched checksum)."""
    from fedbench.data.files import unchecked_pickle_warning

    arrays = arrays if arrays is not None else ArraysCache()
    seen: set[str] = set()
    warnings: dict[str, None] = {}  # ordered, each once
    for item in planned:
        spec = item.spec
        key = repr(
            (
                spec.dataset,
                sorted(spec.dataset_params.items()),
                spec.synthetic,
                spec.partition,
                sorted(spec.partition_params.items()),
                spec.num_clients,
                spec.seed,
                spec.client_test,
                sorted(spec.client_test_params.items()),
            )
        )
        if key in seen:
            continue
        seen.add(key)
        loaded = arrays.load(spec, data_root, verify)
        warning = unchecked_pickle_warning(spec.dataset, loaded.info)
        if warning:
            warnings[warning] = None
        check_test_set(spec, loaded)
        parts = partition_clients(spec, loaded)
        if spec.client_test != "split":
            client_test_sets(spec, loaded, parts)
    return list(warnings)


def checkpoint_file(registry: Registry, options: ExecutionOptions, spec_hash: str) -> Path:
    """Where a run's checkpoint lives: in the ``--checkpoints`` folder when given, else beside the registry (also the
    local copy of a checkpoint kept at a ``--checkpoints`` URL: ``checkpoint_mirror``)."""
    if options.checkpoints and not is_url(options.checkpoints):
        return Path(options.checkpoints) / f"{spec_hash}.pt"
    return registry.checkpoint_path(spec_hash)


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
    emit: Callable[[Event], None],
    arrays: ArraysCache | None = None,
    heartbeat: Heartbeat | None = None,
) -> str:
    """Train one claimed run (loading its data set through the worker's ``arrays`` cache) and record its outcome.
    Returns the final status, or ``taken over`` when another worker took the claim over (``heartbeat``: this
    worker's claim; then nothing more is written for the run).

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
        torch.cuda.set_device(device)  # the worker's GPU (``placement``) is also its default CUDA device
    sink = _RegistrySink(registry, run_id, heartbeat)

    def taken_over(exc: ClaimLost) -> str:
        message = f"{exc}; this worker stopped it and wrote nothing more for it"
        emit({"kind": "end", "spec_hash": spec.spec_hash, "status": "taken over", "error": message})
        return "taken over"

    def stop_for(exc: WriteFailed) -> WriteFailed:
        message = registry.scrub(str(exc))
        with contextlib.suppress(WriteFailed, ClaimLost):  # a registry that cannot be written cannot record it
            sink.finish("failed", error=message)
        emit({"kind": "end", "spec_hash": spec.spec_hash, "status": "failed", "error": message})
        return exc

    try:
        sink.set_provenance(provenance(device))
    except ClaimLost as exc:
        return taken_over(exc)
    except WriteFailed as exc:
        raise stop_for(exc) from None
    emit(
        {
            "kind": "start",
            "spec_hash": spec.spec_hash,
            "labels": planned.labels,
            "seed": spec.seed,
            "rounds": spec.rounds,
        }
    )
    began = time.perf_counter()
    checkpoint = checkpoint_file(registry, options, spec.spec_hash)
    memory = PeakMemory(device)
    memory.start()
    mirror = None
    try:
        mirror = checkpoint_mirror(options, spec.spec_hash)
        if mirror is not None:  # the storage's copy is the one to resume from
            remove_checkpoint(checkpoint)
            mirror.fetch(checkpoint)
        result = run_engine(
            spec,
            sink,
            EngineOptions(
                device=device,
                checkpoint_path=checkpoint,
                checkpoint_ledger=sink,
                on_warning=lambda message: emit({"kind": "warning", "spec_hash": spec.spec_hash, "message": message}),
                data_root=options.data_root,
                eval_batch_size=options.eval_batch_size,
                verify=options.verify,
                arrays=arrays,
                checkpoint_mirror=mirror,
                packing=options.packing,
                acceleration=Acceleration.for_device(device, fast=options.fast, compile=options.compile),
                **({} if options.client_state_memory is None else {"client_state_memory": options.client_state_memory}),
                on_round=lambda r: emit(
                    {
                        "kind": "round",
                        "spec_hash": spec.spec_hash,
                        "round": r.round,
                        "test_acc": r.test_acc,
                        "seconds": r.wall_seconds,
                    }
                ),
            ),
        )
    except ClaimLost as exc:
        return taken_over(exc)
    except KeyboardInterrupt:
        with contextlib.suppress(WriteFailed, ClaimLost):  # the interruption is what the user is told about
            sink.finish("interrupted", error="interrupted by the user; re-run to resume")
        raise
    except WriteFailed as exc:
        raise stop_for(exc) from None
    except FedbenchError as exc:
        message = registry.scrub(str(exc))  # errors are stored and shown: never with the registry's password
        with contextlib.suppress(ClaimLost):
            sink.finish("failed", error=message)
        emit({"kind": "end", "spec_hash": spec.spec_hash, "status": "failed", "error": message})
        return "failed"
    except Exception as exc:  # a bug: keep the traceback in the registry, go on with other runs
        with contextlib.suppress(ClaimLost):
            sink.finish("failed", error=registry.scrub("".join(traceback.format_exception(exc))[-4000:]))
        emit(
            {
                "kind": "end",
                "spec_hash": spec.spec_hash,
                "status": "failed",
                "error": registry.scrub(f"{type(exc).__name__}: {exc}"),
            }
        )
        return "failed"
    info = {**provenance(device, **result.settings), "data": result.info, PEAK_MEMORY: memory.result()}
    curve = metric_curve(registry.curve(run_id), SUMMARY_METRIC)
    try:
        sink.set_provenance(info)
        sink.finish(
            result.status,
            summary=summarize(curve, planned.targets),
            error=result.message,
            diverged_round=result.diverged_round,
            wall_seconds=time.perf_counter() - began,
        )
    except ClaimLost as exc:  # the new owner's checkpoint is not this worker's to delete
        return taken_over(exc)
    except WriteFailed as exc:  # every round and the last checkpoint are recorded: the next run only records this
        raise stop_for(exc.resuming(spec.spec_hash, result.rounds_done)) from None
    remove_checkpoint(checkpoint)  # and its client-state files
    if mirror is not None:
        mirror.remove()
    emit(
        {"kind": "end", "spec_hash": spec.spec_hash, "status": result.status, "final": curve[-1][1] if curve else None}
    )
    return result.status


def work_through(
    planned: list[PlannedRun],
    options: ExecutionOptions,
    emit: Callable[[Event], None],
    arrays: ArraysCache | None = None,
) -> None:
    """Claim and train every run not finished or held by a live worker; the runs share one data set cache."""
    torch.set_num_threads(options.threads)
    registry = Registry(options.registry_url)
    arrays = arrays if arrays is not None else ArraysCache()
    for item in planned:
        worker = worker_id()
        run_id = registry.claim(item.spec_hash, worker)
        if run_id is not None:
            with Heartbeat(registry, run_id, worker) as heartbeat:  # beats however long a round takes
                execute_one(registry, item, run_id, options, emit, arrays, heartbeat)


def _interrupt(signum, frame) -> None:
    """SIGTERM is treated like Ctrl-C: the run in progress is recorded as interrupted (its checkpoint
    kept, so the next `fedbench run` resumes it) instead of the process vanishing mid-round."""
    raise KeyboardInterrupt


def _stop_worker(signum, frame) -> None:
    """A worker's SIGTERM (and SIGINT) handler: the first signal interrupts the run in progress, which is then
    recorded as interrupted; later ones are ignored, so that they cannot cut that recording short (Ctrl-C
    reaches the workers and their parent, and the parent then sends SIGTERM too)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _stop_when_orphaned(parent_pid: int) -> None:
    """A worker whose `fedbench run` died (even by SIGKILL) stops at once, as if interrupted, rather than
    training on unobserved and unstoppable from the terminal. It signals itself SIGTERM, which the worker
    handles: a self-sent SIGINT does nothing in a process that inherited SIGINT ignored (one started in the
    background by a non-interactive shell, as many CI runners do)."""
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def _worker_main(
    planned: list[PlannedRun], options: ExecutionOptions, events: mp.Queue[Event], parent_pid: int
) -> None:
    signal.signal(signal.SIGTERM, _stop_worker)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # inherited ignored (started in the background): stays so
        signal.signal(signal.SIGINT, _stop_worker)
    threading.Thread(target=_stop_when_orphaned, args=(parent_pid,), daemon=True).start()
    try:
        work_through(planned, options, events.put)
    except KeyboardInterrupt:
        pass
    except WriteFailed as exc:  # the parent says it on one line (and exits non-zero) once every worker has stopped
        events.put({"kind": "write_failed", **exc.fields()})
    finally:
        events.put({"kind": "worker_exit", "pid": os.getpid()})


def execute(
    planned: list[PlannedRun],
    options: ExecutionOptions,
    jobs: int,
    emit: Callable[[Event], None],
    arrays: ArraysCache | None = None,
) -> None:
    """Train the planned runs in this process (through ``arrays``, e.g. the cache ``preflight`` loaded into) or in
    ``jobs`` spawned workers, each with its own cache."""
    devices = place_workers(options.device, jobs, options.gpus, torch.cuda.device_count())
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        if jobs <= 1:
            work_through(planned, replace(options, device=devices[0]), emit, arrays)
        else:
            _execute_in_workers(planned, [replace(options, device=d) for d in devices], emit)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _execute_in_workers(
    planned: list[PlannedRun], worker_options: list[ExecutionOptions], emit: Callable[[Event], None]
) -> None:
    """One spawned worker per entry of ``worker_options`` (they differ in the device ``place_workers`` chose)."""
    context = mp.get_context("spawn")
    events: mp.Queue[Event] = context.Queue()
    workers = [
        context.Process(target=_worker_main, args=(planned, options, events, os.getpid()), daemon=False)
        for options in worker_options
    ]
    for worker in workers:
        worker.start()
    running = len(workers)
    write_failure: WriteFailed | None = None
    try:
        while running:
            try:
                event = events.get(timeout=0.5)
            except queue_module.Empty:
                if not any(w.is_alive() for w in workers):
                    break
                continue
            if event["kind"] == "worker_exit":
                running -= 1
            elif event["kind"] == "write_failed":
                write_failure = write_failure or WriteFailed(**{k: v for k, v in event.items() if k != "kind"})
            else:
                emit(event)
    except BaseException:
        # Interrupted (Ctrl-C, or SIGTERM through `_interrupt`): every worker is told to stop now; they record
        # their runs as interrupted. Waiting for them to notice by themselves would let them train on, and finish
        # runs, for as long as the wait lasted.
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        raise
    finally:
        for worker in workers:
            worker.join(timeout=WORKER_STOP_SECONDS)
            if worker.is_alive():  # stuck: its claim is taken over once its pid is gone
                worker.kill()
                worker.join()
    if write_failure is not None:
        raise write_failure
