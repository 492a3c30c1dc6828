"""Train a batch on this machine: in process, or in N spawned worker processes, each running the claim loop
(``worker.work_through``) against the same registry. Progress events come back through a queue.

Signals: Ctrl-C or SIGTERM stops the workers, which record their runs as ``interrupted`` (checkpoint kept, so the
next `fedbench run` resumes them); a worker whose `fedbench run` died stops by itself.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_module
import signal
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import torch

from fedbench.data.federated import ArraysCache
from fedbench.errors import FedbenchError, WriteFailed
from fedbench.execution.devices import place_workers
from fedbench.execution.events import Emit, Event, Note
from fedbench.execution.options import ExecutionOptions
from fedbench.execution.worker import work_through
from fedbench.recipes.expand import PlannedRun

# How long `fedbench run` waits for a worker to exit once all runs are done or it was told to stop: a deadline
# for a stuck worker only (recording a run waits up to 60 s for another process's registry lock), then it is killed.
WORKER_STOP_SECONDS = 180.0


@dataclass(frozen=True)
class _WorkerExited:
    """A worker process's last message to its parent."""

    pid: int


@dataclass(frozen=True)
class _WriteRefused:
    """A worker stopped on a write the machine refused (``WriteFailed``, as its fields): the parent says it on one
    line, and exits non-zero, once every worker has stopped."""

    fields: dict[str, Any]


_Message = Event | _WorkerExited | _WriteRefused  # what a worker process puts on its parent's queue


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
    planned: list[PlannedRun], options: ExecutionOptions, events: mp.Queue[_Message], parent_pid: int
) -> None:
    signal.signal(signal.SIGTERM, _stop_worker)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # inherited ignored (started in the background): stays so
        signal.signal(signal.SIGINT, _stop_worker)
    threading.Thread(target=_stop_when_orphaned, args=(parent_pid,), daemon=True).start()
    try:
        work_through(planned, options, events.put)
    except KeyboardInterrupt:
        pass
    except WriteFailed as exc:
        events.put(_WriteRefused(exc.fields()))
    except FedbenchError as exc:  # e.g. a plug-in that no longer loads: the worker stops, and says why
        events.put(Note(f"worker {os.getpid()} stopped: {exc}"))
    finally:
        events.put(_WorkerExited(os.getpid()))


def execute(
    planned: list[PlannedRun],
    options: ExecutionOptions,
    jobs: int,
    emit: Emit,
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


def _execute_in_workers(planned: list[PlannedRun], worker_options: list[ExecutionOptions], emit: Emit) -> None:
    """One spawned worker per entry of ``worker_options`` (they differ in the device ``place_workers`` chose)."""
    context = mp.get_context("spawn")
    events: mp.Queue[_Message] = context.Queue()
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
            if isinstance(event, _WorkerExited):
                running -= 1
            elif isinstance(event, _WriteRefused):
                write_failure = write_failure or WriteFailed(**event.fields)
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


__all__ = ["WORKER_STOP_SECONDS", "execute"]
