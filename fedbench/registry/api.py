"""Registry API. SQLite runs in WAL mode with a busy timeout so several workers can write; a run is
*claimed* (an atomic conditional UPDATE) before it starts so two workers never train the same spec.
The same code runs on PostgreSQL by URL.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, event, select, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from fedbench.errors import RegistryError
from fedbench.registry import schema
from fedbench.registry.tables import RoundRow, RunRow

CLAIMABLE = ("pending", "failed", "interrupted")
FINISHED = ("done", "diverged")
STALE_AFTER = timedelta(minutes=30)  # a running claim whose worker stopped beating this long ago is free


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def default_registry_url() -> str:
    return os.environ.get("FEDBENCH_REGISTRY") or "sqlite:///registry/fedbench.db"


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


class Registry:
    def __init__(self, url: str | None = None):
        self.url = url or default_registry_url()
        try:
            parsed = make_url(self.url)
        except ArgumentError:
            raise RegistryError(
                f"registry URL {self.url!r} is not a SQLAlchemy URL; use e.g. sqlite:///registry/fedbench.db "
                "or postgresql://user@host/db"
            ) from None
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite and parsed.database not in (None, "", ":memory:"):
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            self.home = Path(parsed.database).parent
        else:
            self.home = Path("registry")
        try:
            connect_args = {"timeout": 60} if self.is_sqlite else {}
            json_options = {} if self.is_sqlite else {"json_serializer": json_without_nan}
            self.engine: Engine = create_engine(self.url, connect_args=connect_args, **json_options)
        except Exception as exc:  # missing DB driver, bad URL parts
            raise RegistryError(f"cannot open registry {self.url!r}: {exc}") from None
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        attempts = 5
        for attempt in range(attempts):
            try:
                schema.upgrade(self.engine, self.checkpoint_dir if self.is_sqlite else None)
                break
            except (OperationalError, ProgrammingError) as exc:
                # Two workers opening a new registry at once: the file lock serialises them on one machine, but
                # SQLite may still answer "database is locked" at once when a read transaction cannot become a
                # write one (it does not wait in that case), and PostgreSQL "already exists" between servers'
                # clients: the loser simply looks again.
                message = str(exc.orig).lower()
                if attempt < attempts - 1 and any(s in message for s in ("already exists", "duplicate", "locked")):
                    time.sleep(0.1 * (attempt + 1))
                    continue
                reason = " ".join(str(exc.orig).split())  # drivers' messages span lines; ours is one
                raise RegistryError(
                    f"cannot open registry {self.url!r}: {reason}{self._stale_files_hint(reason)}"
                ) from None

    @staticmethod
    def resolve_url(url: str | None) -> str:
        return url or default_registry_url()

    def _stale_files_hint(self, reason: str) -> str:
        """SQLite says only "disk I/O error" when a registry file was deleted while a process still had it
        open and a new one is created at its path: the old ``-wal``/``-shm`` files are still there."""
        if not self.is_sqlite or "disk I/O error" not in reason:
            return ""
        database = self.engine.url.database
        leftovers = [name for name in (f"{database}-wal", f"{database}-shm") if Path(name).exists()]
        if not leftovers:
            return ""
        return (
            f"; {' and '.join(leftovers)} belong to a registry file that was deleted while a process still "
            "had it open: stop that process (an old `fedbench run`?) or delete those files, then retry"
        )

    @classmethod
    def open_existing(cls, url: str | None) -> Registry | None:
        """Open a registry for reading without creating a SQLite file that does not exist yet."""
        url = cls.resolve_url(url)
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise RegistryError(
                f"registry URL {url!r} is not a SQLAlchemy URL; use e.g. sqlite:///registry/fedbench.db"
            ) from None
        if (
            parsed.get_backend_name() == "sqlite"
            and parsed.database not in (None, "", ":memory:")
            and not Path(parsed.database).exists()
        ):
            return None
        return cls(url)

    @classmethod
    def peek_statuses(cls, url: str | None, spec_hashes: list[str]) -> dict[str, str]:
        registry = cls.open_existing(url)
        return registry.statuses(spec_hashes) if registry else {}

    @property
    def checkpoint_dir(self) -> Path:
        return self.home / "checkpoints"

    def checkpoint_path(self, spec_hash: str) -> Path:
        return self.checkpoint_dir / f"{spec_hash}.pt"

    # ------------------------------------------------------------------ registering and claiming
    def ensure_runs(self, entries: Iterable[dict[str, Any]]) -> None:
        """Insert a ``pending`` row for every spec not yet in the registry (idempotent, race-safe)."""
        for entry in entries:
            with Session(self.engine) as session:
                if session.scalar(select(RunRow.id).where(RunRow.spec_hash == entry["spec_hash"])) is not None:
                    continue
                session.add(RunRow(status="pending", created_at=now(), **entry))
                try:
                    session.commit()
                except IntegrityError:  # another worker inserted it first
                    session.rollback()

    def statuses(self, spec_hashes: Iterable[str]) -> dict[str, str]:
        hashes = list(spec_hashes)
        out: dict[str, str] = {}
        with Session(self.engine) as session:
            for start in range(0, len(hashes), 500):
                rows = session.execute(
                    select(RunRow.spec_hash, RunRow.status).where(RunRow.spec_hash.in_(hashes[start : start + 500]))
                )
                out.update({h: s for h, s in rows})
        return out

    def reset_for_rerun(self, spec_hashes: Iterable[str]) -> None:
        """``--force``: finished runs go back to pending, their curves are dropped."""
        with Session(self.engine) as session:
            for spec_hash in spec_hashes:
                run = session.scalar(select(RunRow).where(RunRow.spec_hash == spec_hash))
                if run is None or run.status not in FINISHED:
                    continue
                session.execute(delete(RoundRow).where(RoundRow.run_id == run.id))
                run.status, run.summary, run.error, run.rounds_done, run.diverged_round = "pending", {}, None, 0, None
            session.commit()

    def claim(self, spec_hash: str, worker: str | None = None) -> int | None:
        """Atomically mark the run as ``running`` by this worker. Returns the run id, or None when
        another live worker holds it or it is finished."""
        worker = worker or worker_id()
        with Session(self.engine) as session:
            run = session.scalar(select(RunRow).where(RunRow.spec_hash == spec_hash))
            if run is None or run.status in FINISHED:
                return None
            condition = RunRow.status.in_(CLAIMABLE)
            if run.status == "running":
                if not self._holder_is_dead(run):
                    return None
                # Take over only the exact claim we saw (optimistic concurrency).
                condition = (RunRow.status == "running") & (RunRow.worker == run.worker)
            result = session.execute(
                update(RunRow)
                .where(RunRow.id == run.id, condition)
                .values(status="running", worker=worker, heartbeat_at=now(), started_at=now(), error=None)
            )
            session.commit()
            return run.id if result.rowcount == 1 else None

    @staticmethod
    def _holder_is_dead(run: RunRow) -> bool:
        host, _, pid = (run.worker or ":").rpartition(":")
        if host == socket.gethostname() and pid.isdigit():
            return not _pid_alive(int(pid))
        return run.heartbeat_at is None or now() - run.heartbeat_at > STALE_AFTER

    # ------------------------------------------------------------------ logging
    def set_provenance(self, run_id: int, provenance: dict[str, Any]) -> None:
        with Session(self.engine) as session:
            session.execute(update(RunRow).where(RunRow.id == run_id).values(provenance=provenance))
            session.commit()

    def log_round(self, run_id: int, record) -> None:
        values = asdict(record)
        with Session(self.engine) as session:
            session.merge(RoundRow(run_id=run_id, **values))
            session.execute(
                update(RunRow).where(RunRow.id == run_id).values(heartbeat_at=now(), rounds_done=record.round)
            )
            session.commit()

    def truncate_rounds(self, run_id: int, after_round: int) -> None:
        with Session(self.engine) as session:
            session.execute(delete(RoundRow).where(RoundRow.run_id == run_id, RoundRow.round > after_round))
            session.commit()

    def finish(
        self,
        run_id: int,
        status: str,
        *,
        summary: dict | None = None,
        error: str | None = None,
        diverged_round: int | None = None,
        wall_seconds: float | None = None,
    ) -> None:
        with Session(self.engine) as session:
            session.execute(
                update(RunRow)
                .where(RunRow.id == run_id)
                .values(
                    status=status,
                    summary=summary or {},
                    error=error,
                    diverged_round=diverged_round,
                    finished_at=now(),
                    wall_seconds=wall_seconds,
                    heartbeat_at=now(),
                )
            )
            session.commit()

    # ------------------------------------------------------------------ queries
    def get_run(self, run_id_or_hash: str | int) -> RunRow:
        key = str(run_id_or_hash)
        with Session(self.engine) as session:
            if key.isdigit():
                run = session.get(RunRow, int(key))
            else:
                run = session.scalar(select(RunRow).where(RunRow.spec_hash.startswith(key)))
            if run is None:
                raise RegistryError(f"no run {key!r} in registry {self.url}; list runs with `fedbench runs`")
            session.expunge(run)
            return run

    def runs(
        self, paper: str | None = None, status: str | None = None, spec_hashes: Iterable[str] | None = None
    ) -> list[RunRow]:
        query = select(RunRow).order_by(RunRow.id)
        if paper:
            query = query.where(RunRow.paper == paper)
        if status:
            query = query.where(RunRow.status == status)
        with Session(self.engine) as session:
            if spec_hashes is not None:
                hashes = list(spec_hashes)
                rows = []
                for start in range(0, len(hashes), 500):
                    rows += session.scalars(query.where(RunRow.spec_hash.in_(hashes[start : start + 500]))).all()
            else:
                rows = session.scalars(query).all()
            for row in rows:
                session.expunge(row)
            return list(rows)

    def curves(self, run_ids: Iterable[int]) -> dict[int, list[RoundRow]]:
        ids = list(run_ids)
        out: dict[int, list[RoundRow]] = {i: [] for i in ids}
        with Session(self.engine) as session:
            for start in range(0, len(ids), 500):
                rows = session.scalars(
                    select(RoundRow)
                    .where(RoundRow.run_id.in_(ids[start : start + 500]))
                    .order_by(RoundRow.run_id, RoundRow.round)
                ).all()
                for row in rows:
                    session.expunge(row)
                    out[row.run_id].append(row)
        return out

    def curve(self, run_id: int) -> list[RoundRow]:
        return self.curves([run_id])[run_id]


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def json_without_nan(value: Any) -> str:
    """JSON for a server database: PostgreSQL's json type has no NaN or infinity (a diverged run's summary, a
    per-client metric of an empty split), so they are stored as null, which every reader takes as "no value"."""
    return json.dumps(_finite(value))


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=60000")  # first, so that switching to WAL waits for other writers
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


__all__ = ["Registry", "default_registry_url", "worker_id"]
