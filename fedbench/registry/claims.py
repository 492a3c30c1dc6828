"""Claims on runs: a run is *claimed* (an atomic conditional UPDATE) before it starts, so two workers never train the
same spec. A worker beats its claim's heartbeat while it trains; a claim whose worker is gone or silent is free to
take over; a write for a run may be made only while its worker still holds the claim.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, delete, select, update
from sqlalchemy import Connection as SqlConnection
from sqlalchemy.exc import DBAPIError, OperationalError

from fedbench.errors import ClaimLost
from fedbench.registry.connection import Connection
from fedbench.registry.reconnect import lost_connection, reconnecting
from fedbench.registry.tables import rounds, runs
from fedbench.vocab.status import CLAIMABLE, FINISHED, RunStatus

# Claims: a worker beats its run's heartbeat from a background thread every HEARTBEAT_EVERY, however long a round
# takes (``Heartbeat``). A running claim whose heartbeat is older than STALE_AFTER (the claim timeout: ten missed
# beats) is free: its worker is gone, or hung (the pid lives on this host but its heartbeat stopped). On the same
# host a worker whose pid is gone is free at once.
HEARTBEAT_EVERY = timedelta(seconds=30)
STALE_AFTER = timedelta(minutes=5)


def now() -> datetime:
    """The registry's clock (naive UTC) for every time it stores: claims, heartbeats, creation and finish times."""
    return datetime.now(UTC).replace(tzinfo=None)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_reason(run: Row[Any]) -> str | None:
    """Why a running claim is free to take over, or None while its worker is alive and beating."""
    host, _, pid = (run.worker or ":").rpartition(":")
    local = host == socket.gethostname() and pid.isdigit()
    if local and not _pid_alive(int(pid)):
        return f"worker {run.worker} is gone"
    if run.heartbeat_at is None:
        return f"worker {run.worker} never beat"
    silent = now() - run.heartbeat_at
    if silent > STALE_AFTER:
        what = "hung (its process lives, its heartbeat stopped)" if local else "silent"
        return f"worker {run.worker} {what}: no heartbeat for {int(silent.total_seconds())} s (timeout {int(STALE_AFTER.total_seconds())} s)"
    return None


# A write for a run may name the ``worker`` that claimed it: it is then made only while that worker still holds the
# claim (a condition in the same transaction, so a takeover cannot slip between the check and the write), else
# ``ClaimLost`` is raised and nothing is written: a worker that woke up after its run was taken over never overwrites
# the new owner's rounds, checkpoint hash or status.
def _owned(run_id: int, worker: str | None) -> Any:
    condition = runs.c.id == run_id
    if worker is not None:
        condition = condition & (runs.c.status == RunStatus.RUNNING) & (runs.c.worker == worker)
    return condition


def update_owned(transaction: SqlConnection, run_id: int, worker: str | None, **values: Any) -> None:
    """Set ``values`` on the run in ``transaction``, only while ``worker`` (if given) holds its claim. A lost claim
    raises ClaimLost, which rolls the whole transaction back (``engine.begin()`` does on any exception)."""
    result = transaction.execute(update(runs).where(_owned(run_id, worker)).values(**values))
    if worker is not None and result.rowcount != 1:
        raise ClaimLost(run_id, worker)


class Claims(Connection):
    """Claiming runs, beating their heartbeats, taking over stale claims, finishing and resetting runs."""

    def claim(self, spec_hash: str, worker: str | None = None) -> int | None:
        """Atomically mark the run as ``running`` by this worker. Returns the run id, or None when
        another live worker holds it or it is finished."""
        worker = worker or worker_id()
        tries = 0

        def attempt() -> int | None:
            nonlocal tries
            tries += 1
            return self._claim(spec_hash, worker, retried=tries > 1)

        return self.reconnect.call(attempt) if self.reconnect is not None else attempt()

    def _claim(self, spec_hash: str, worker: str, retried: bool) -> int | None:
        with self._writing(), self.engine.begin() as transaction:
            run = transaction.execute(select(runs).where(runs.c.spec_hash == spec_hash)).first()
            if run is None or run.status in FINISHED:
                return None
            condition: ColumnElement[bool] = runs.c.status.in_(CLAIMABLE)
            if run.status == RunStatus.RUNNING:
                if retried and run.worker == worker:
                    # this claim, retried after a lost connection: its first try's COMMIT had reached the server,
                    # so the run is won (not lost, and not claimed twice)
                    return run.id
                if stale_reason(run) is None:
                    return None
                # Take over only the exact claim we saw (optimistic concurrency).
                condition = (runs.c.status == RunStatus.RUNNING) & (runs.c.worker == run.worker)
            result = transaction.execute(
                update(runs)
                .where(runs.c.id == run.id, condition)
                .values(status=RunStatus.RUNNING, worker=worker, heartbeat_at=now(), started_at=now(), error=None)
            )
            return run.id if result.rowcount == 1 else None

    def heartbeat(self, run_id: int, worker: str) -> bool:
        """Mark ``worker``'s claim on the run alive now; False when the claim is no longer its own (taken over)."""
        with self.engine.begin() as transaction:
            result = transaction.execute(
                update(runs)
                .where(runs.c.id == run_id, runs.c.status == RunStatus.RUNNING, runs.c.worker == worker)
                .values(heartbeat_at=now())
            )
            return result.rowcount == 1

    @reconnecting
    def stale_runs(self) -> list[tuple[Row[Any], str]]:
        """Running claims a new worker would take over, with why (worker gone, or no heartbeat: hung)."""
        with self.engine.connect() as connection:
            running = connection.execute(
                select(runs).where(runs.c.status == RunStatus.RUNNING).order_by(runs.c.id)
            ).all()
        return [(run, reason) for run in running if (reason := stale_reason(run)) is not None]

    @reconnecting
    def reset_for_rerun(self, spec_hashes: Iterable[str]) -> None:
        """``--force``: finished runs go back to pending, their curves are dropped."""
        with self._writing(), self.engine.begin() as transaction:
            for spec_hash in spec_hashes:
                run = transaction.execute(select(runs.c.id, runs.c.status).where(runs.c.spec_hash == spec_hash)).first()
                if run is None or run.status not in FINISHED:
                    continue
                transaction.execute(delete(rounds).where(rounds.c.run_id == run.id))
                transaction.execute(
                    update(runs)
                    .where(runs.c.id == run.id)
                    .values(
                        status=RunStatus.PENDING,
                        summary={},
                        error=None,
                        rounds_done=0,
                        diverged_round=None,
                        checkpoint_sha256=None,
                    )
                )

    def finish(
        self,
        run_id: int,
        status: str,
        *,
        summary: dict | None = None,
        error: str | None = None,
        diverged_round: int | None = None,
        wall_seconds: float | None = None,
        worker: str | None = None,
    ) -> None:
        tries = 0

        def attempt() -> None:
            nonlocal tries
            tries += 1
            try:
                with self._writing(), self.engine.begin() as transaction:
                    update_owned(
                        transaction,
                        run_id,
                        worker,
                        status=status,
                        summary=summary or {},
                        error=error,
                        diverged_round=diverged_round,
                        finished_at=now(),
                        wall_seconds=wall_seconds,
                        heartbeat_at=now(),
                        # a finished run's checkpoint is deleted; an interrupted or failed one resumes from it
                        **({"checkpoint_sha256": None} if status in FINISHED else {}),
                    )
            except ClaimLost:
                # Retried after a lost connection whose COMMIT had reached the server: the run already holds this
                # worker's outcome (a takeover would have put another worker there), so the claim was not lost.
                if worker is None or tries == 1 or not self._finished_by(run_id, worker, status):
                    raise

        if self.reconnect is not None:
            self.reconnect.call(attempt)
        else:
            attempt()

    def _finished_by(self, run_id: int, worker: str, status: str) -> bool:
        with self.engine.connect() as connection:
            run = connection.execute(select(runs.c.worker, runs.c.status).where(runs.c.id == run_id)).first()
        return run is not None and run.worker == worker and run.status == status and status != RunStatus.RUNNING


class Heartbeat:
    """Beat a claimed run's heartbeat from a background thread every ``every`` seconds while the run trains, so a
    long round never makes a live worker look stale. ``lost`` turns True when another worker took the claim over.
    Use as a context manager around the training."""

    def __init__(self, registry: Claims, run_id: int, worker: str, every: float | None = None):
        self.registry, self.run_id, self.worker = registry, run_id, worker
        self.every = HEARTBEAT_EVERY.total_seconds() if every is None else every
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{run_id}", daemon=True)

    def beat(self) -> None:
        try:
            self.lost = not self.registry.heartbeat(self.run_id, self.worker)
        except OperationalError:  # a busy database: the next beat tries again, well within the timeout
            pass
        except DBAPIError as exc:  # a server registry restarting: likewise (the training's own writes wait for it)
            if lost_connection(exc) is None:
                raise

    def _loop(self) -> None:
        while not self._stop.wait(self.every) and not self.lost:
            self.beat()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


__all__ = ["Claims", "Heartbeat", "now", "worker_id", "stale_reason", "update_owned"]
