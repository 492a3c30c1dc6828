"""Registry API. SQLite runs in WAL mode with a busy timeout so several workers can write; a run is
*claimed* (an atomic conditional UPDATE) before it starts so two workers never train the same spec.
The same code runs on PostgreSQL by URL.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import bindparam, create_engine, delete, event, select, text, update
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from fedbench.checkpoint.location import registry_checkpoints, run_checkpoint
from fedbench.errors import ClaimLost, RegistryError, write_failure
from fedbench.registry import schema
from fedbench.registry.tables import RoundRow, RunRow
from fedbench.registry.urls import display_url, scrub

CLAIMABLE = ("pending", "failed", "interrupted")
FINISHED = ("done", "diverged")
# Claims: a worker beats its run's heartbeat from a background thread every HEARTBEAT_EVERY, however long a round
# takes (``Heartbeat``). A running claim whose heartbeat is older than STALE_AFTER (the claim timeout: ten missed
# beats) is free: its worker is gone, or hung (the pid lives on this host but its heartbeat stopped). On the same
# host a worker whose pid is gone is free at once.
HEARTBEAT_EVERY = timedelta(seconds=30)
STALE_AFTER = timedelta(minutes=5)


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
    """The run registry at ``url``. ``read_only`` (reporting: ``open_existing``): the connection cannot write
    (SQLite opened with ``mode=ro``, PostgreSQL sessions ``READ ONLY``), nothing is created or migrated unless the
    registry needs a migration and is writable; a read-only registry that needs one is a one-line error.
    Otherwise (``fedbench run``) a registry that cannot be written is a one-line error before anything is written."""

    def __init__(self, url: str | None = None, *, read_only: bool = False):
        self.url = url or default_registry_url()  # with its password, if any: never shown (``display_url``)
        self.display_url = display_url(self.url)
        self.read_only = read_only
        parsed = _parse(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        database = self.database_file = _sqlite_file(parsed) if self.is_sqlite else None
        self.home = Path(database).parent if database else Path("registry")
        declared_read_only = self.is_sqlite and _declares_read_only(parsed)
        if declared_read_only and not read_only:
            raise RegistryError(
                f"registry {self.display_url!r} is opened read-only (mode=ro/immutable in the URL): `fedbench run` "
                "records runs in it; give the URL without it, as a user who may write the file"
            )
        if database and not read_only:
            self.home.mkdir(parents=True, exist_ok=True)
        engine_url: str | URL = self.url
        if read_only and database and not declared_read_only:
            engine_url = _read_only_sqlite_url(database)
        try:
            connect_args = {"timeout": 60} if self.is_sqlite else {}
            json_options = {} if self.is_sqlite else {"json_serializer": json_without_nan}
            self.engine: Engine = create_engine(engine_url, connect_args=connect_args, **json_options)
        except Exception as exc:  # missing DB driver, bad URL parts
            raise RegistryError(f"cannot open registry {self.display_url!r}: {self.scrub(str(exc))}") from None
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_read_only_pragmas if read_only else _sqlite_pragmas)
        elif read_only and self.engine.dialect.name == "postgresql":
            event.listen(self.engine, "connect", _postgresql_read_only)
        if read_only:
            self._open_read_only(declared_read_only)
        else:
            self._open_for_writing()

    def _open_for_writing(self) -> None:
        if self.is_sqlite and not _sqlite_writable(self.database_file):
            raise RegistryError(
                f"registry {self.display_url!r} cannot be written (the file or its folder is read-only): `fedbench "
                "run` records runs in it; run as a user who may write it, or use another registry"
            )
        self._migrate()
        if self.engine.dialect.name == "postgresql":
            with self.engine.connect() as connection:
                allowed = connection.execute(
                    text(
                        "SELECT has_table_privilege('runs', 'INSERT') AND has_table_privilege('runs', 'UPDATE') "
                        "AND has_table_privilege('rounds', 'INSERT') AND has_table_privilege('rounds', 'DELETE') "
                        "AND current_setting('transaction_read_only') = 'off'"
                    )
                ).scalar()
            if not allowed:
                raise RegistryError(
                    f"registry {self.display_url!r}: this database role may only read it; `fedbench run` records "
                    "runs, so connect as a worker role (docs/security.md)"
                )

    def _open_read_only(self, declared_read_only: bool) -> None:
        """Read-only: check the schema version; migrate only a registry this process may write."""
        try:
            revision = schema.current_revision(self.engine)
        except DBAPIError as exc:
            if not (self.is_sqlite and self.database_file and not declared_read_only and "unable to open" in str(exc)):
                reason = self.scrub(" ".join(str(exc.orig).split()))
                raise RegistryError(f"cannot open registry {self.display_url!r}: {reason}") from None
            # A WAL database in a folder this process cannot write, with no -shm file left: SQLite can open it
            # read-only only as immutable (nobody can be writing it: a writer would have left its -shm file).
            self.engine.dispose()
            self.engine = create_engine(_read_only_sqlite_url(self.database_file, immutable=True))
            event.listen(self.engine, "connect", _sqlite_read_only_pragmas)
            revision = schema.current_revision(self.engine)
        if revision == schema.head_revision():
            return
        hint = (
            f"registry {self.display_url!r} is at schema revision {revision or 'before 0001'} and this fedbench "
            f"needs {schema.head_revision()}; it is read-only here"
        )
        action = "open it once with write access (e.g. `fedbench runs` as a user or worker role that may write it)"
        if declared_read_only or (self.is_sqlite and not _sqlite_writable(self.database_file)):
            raise RegistryError(f"{hint}: {action}")
        try:  # writable (PostgreSQL: perhaps): migrate as `fedbench run` would, in one transaction
            Registry(self.url)
        except RegistryError as exc:
            refusals = ("permission", "must be owner", "read-only", "readonly", "may only read")
            if any(word in str(exc).lower() for word in refusals):
                raise RegistryError(f"{hint} ({exc}): {action}") from None
            raise

    def _migrate(self) -> None:
        attempts = 5
        for attempt in range(attempts):
            try:
                schema.upgrade(self.engine, self.checkpoint_dir if self.is_sqlite else None)
                break
            except DBAPIError as exc:  # the server's or driver's refusal (its text may quote the URL: scrubbed)
                # Two workers opening a new registry at once: the file lock serialises them on one machine, but
                # SQLite may still answer "database is locked" at once when a read transaction cannot become a
                # write one (it does not wait in that case), and PostgreSQL "already exists" between servers'
                # clients: the loser simply looks again.
                message = str(exc.orig).lower()
                if attempt < attempts - 1 and any(s in message for s in ("already exists", "duplicate", "locked")):
                    time.sleep(0.1 * (attempt + 1))
                    continue
                reason = self.scrub(" ".join(str(exc.orig).split()))  # drivers' messages span lines; ours is one
                raise RegistryError(
                    f"cannot open registry {self.display_url!r}: {reason}{self._stale_files_hint(reason)}"
                ) from None

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write to the registry that the machine refuses (SQLite's "database or disk is full", "attempt to write
        a readonly database", PostgreSQL's disk_full or read-only transaction) is a one-line ``WriteFailed`` naming
        the registry (password masked), not a traceback: the user's disk, not fedbench, is at fault."""
        try:
            yield
        except DBAPIError as exc:
            failure = write_failure(exc, f"registry {self.display_url!r}")
            if failure is None:
                raise
            raise failure from None

    @staticmethod
    def resolve_url(url: str | None) -> str:
        return url or default_registry_url()

    @classmethod
    def shown_url(cls, url: str | None) -> str:
        """The registry URL ``url`` resolves to, as it may be shown to a person (password masked)."""
        return display_url(cls.resolve_url(url))

    def scrub(self, text: str) -> str:
        """``text`` (an error message, a traceback) without this registry's password."""
        return scrub(text, self.url)

    def _stale_files_hint(self, reason: str) -> str:
        """SQLite says only "disk I/O error" when a registry file was deleted while a process still had it
        open and a new one is created at its path: the old ``-wal``/``-shm`` files are still there."""
        if not self.is_sqlite or "disk I/O error" not in reason:
            return ""
        database = self.database_file
        leftovers = [name for name in (f"{database}-wal", f"{database}-shm") if Path(name).exists()]
        if not leftovers:
            return ""
        return (
            f"; {' and '.join(leftovers)} belong to a registry file that was deleted while a process still "
            "had it open: stop that process (an old `fedbench run`?) or delete those files, then retry"
        )

    @classmethod
    def open_existing(cls, url: str | None) -> Registry | None:
        """Open a registry for reading (``read_only``), without creating a SQLite file that does not exist yet."""
        url = cls.resolve_url(url)
        parsed = _parse(url)
        if parsed.get_backend_name() == "sqlite":
            database = _sqlite_file(parsed)
            if database is None:  # in memory: nothing to read
                return None
            if not Path(database).exists():
                return None
        return cls(url, read_only=True)

    @classmethod
    def peek_statuses(cls, url: str | None, spec_hashes: list[str]) -> dict[str, str]:
        registry = cls.open_existing(url)
        return registry.statuses(spec_hashes) if registry else {}

    @property
    def checkpoint_dir(self) -> Path:
        return registry_checkpoints(self.home)

    def checkpoint_path(self, spec_hash: str) -> Path:
        return run_checkpoint(spec_hash, self.home)

    # ------------------------------------------------------------------ registering and claiming
    def ensure_runs(self, entries: Iterable[dict[str, Any]]) -> None:
        """Insert a ``pending`` row for every spec not yet in the registry (idempotent, race-safe)."""
        for entry in entries:
            with self._writing(), Session(self.engine) as session:
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
        with self._writing(), Session(self.engine) as session:
            for spec_hash in spec_hashes:
                run = session.scalar(select(RunRow).where(RunRow.spec_hash == spec_hash))
                if run is None or run.status not in FINISHED:
                    continue
                session.execute(delete(RoundRow).where(RoundRow.run_id == run.id))
                run.status, run.summary, run.error, run.rounds_done, run.diverged_round = "pending", {}, None, 0, None
                run.checkpoint_sha256 = None
            session.commit()

    def claim(self, spec_hash: str, worker: str | None = None) -> int | None:
        """Atomically mark the run as ``running`` by this worker. Returns the run id, or None when
        another live worker holds it or it is finished."""
        worker = worker or worker_id()
        with self._writing(), Session(self.engine) as session:
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
        return stale_reason(run) is not None

    def heartbeat(self, run_id: int, worker: str) -> bool:
        """Mark ``worker``'s claim on the run alive now; False when the claim is no longer its own (taken over)."""
        with Session(self.engine) as session:
            result = session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status == "running", RunRow.worker == worker)
                .values(heartbeat_at=now())
            )
            session.commit()
            return result.rowcount == 1

    def stale_runs(self) -> list[tuple[RunRow, str]]:
        """Running claims a new worker would take over, with why (worker gone, or no heartbeat: hung)."""
        out = []
        for run in self.runs(status="running"):
            reason = stale_reason(run)
            if reason is not None:
                out.append((run, reason))
        return out

    # ------------------------------------------------------------------ logging
    # A write for a run may name the ``worker`` that claimed it: it is then made only while that worker still holds
    # the claim (a condition in the same transaction, so a takeover cannot slip between the check and the write),
    # else ``ClaimLost`` is raised and nothing is written: a worker that woke up after its run was taken over never
    # overwrites the new owner's rounds, checkpoint hash or status.
    @staticmethod
    def _owned(run_id: int, worker: str | None) -> Any:
        condition = RunRow.id == run_id
        if worker is not None:
            condition = condition & (RunRow.status == "running") & (RunRow.worker == worker)
        return condition

    def _update_owned(self, session: Session, run_id: int, worker: str | None, **values: Any) -> None:
        result = session.execute(update(RunRow).where(self._owned(run_id, worker)).values(**values))
        if worker is not None and result.rowcount != 1:
            session.rollback()
            raise ClaimLost(run_id, worker)

    def set_provenance(self, run_id: int, provenance: dict[str, Any], worker: str | None = None) -> None:
        with self._writing(), Session(self.engine) as session:
            self._update_owned(session, run_id, worker, provenance=provenance)
            session.commit()

    def log_round(self, run_id: int, record, worker: str | None = None) -> None:
        values = asdict(record)
        with self._writing(), Session(self.engine) as session:
            # the claim is checked (and on SQLite the write lock taken) before the round is written
            self._update_owned(session, run_id, worker, heartbeat_at=now(), rounds_done=record.round)
            session.merge(RoundRow(run_id=run_id, **values))
            session.commit()

    def checkpoint_sha256(self, run_id: int) -> str | None:
        """The sha256 of the checkpoint this run last wrote (None if it wrote none since it was last reset)."""
        with Session(self.engine) as session:
            return session.scalar(select(RunRow.checkpoint_sha256).where(RunRow.id == run_id))

    def record_checkpoint(self, run_id: int, sha256: str | None, worker: str | None = None) -> None:
        with self._writing(), Session(self.engine) as session:
            self._update_owned(session, run_id, worker, checkpoint_sha256=sha256)
            session.commit()

    def truncate_rounds(self, run_id: int, after_round: int, worker: str | None = None) -> None:
        with self._writing(), Session(self.engine) as session:
            if worker is not None:  # takes the write lock and checks the claim in the same transaction
                self._update_owned(session, run_id, worker, heartbeat_at=now())
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
        worker: str | None = None,
    ) -> None:
        with self._writing(), Session(self.engine) as session:
            self._update_owned(
                session,
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
                raise RegistryError(f"no run {key!r} in registry {self.display_url}; list runs with `fedbench runs`")
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
                hashes = list(dict.fromkeys(spec_hashes))  # a hash in two chunks would be expunged twice
                rows = []
                for start in range(0, len(hashes), 500):
                    rows += session.scalars(query.where(RunRow.spec_hash.in_(hashes[start : start + 500]))).all()
            else:
                rows = session.scalars(query).all()
            for row in rows:
                session.expunge(row)
            return list(rows)

    def run_states(self, spec_hashes: Iterable[str]) -> list[Any]:
        """The runs of ``spec_hashes`` as read-only rows of ``id``, ``spec_hash``, ``status``, ``seed`` and
        ``provenance`` (what a report table reads; no ORM objects, no spec JSON to decode): one statement."""
        runs = RunRow.__table__
        query = select(runs.c.id, runs.c.spec_hash, runs.c.status, runs.c.seed, runs.c.provenance).where(
            runs.c.spec_hash.in_(bindparam("hashes", expanding=True))
        )
        hashes = list(spec_hashes)
        out: list[Any] = []
        with self.engine.connect() as connection:
            for start in range(0, len(hashes), 500):
                out += connection.execute(query, {"hashes": hashes[start : start + 500]}).all()
        return out

    def curves(self, run_ids: Iterable[int], fields: Iterable[str] | None = None) -> dict[int, list[Any]]:
        """{run id: its stored rounds in order}. Each round is a read-only row with the ``rounds`` columns as
        attributes (as a ``RoundRow``; only ``run_id``, ``round`` and ``fields`` when given), read without the
        ORM: a paper's report reads hundreds of thousands."""
        ids = list(run_ids)
        out: dict[int, list[Any]] = {i: [] for i in ids}
        rounds = RoundRow.__table__
        wanted = dict.fromkeys(["run_id", "round", *fields]) if fields is not None else None
        columns = [rounds.c[name] for name in wanted] if wanted is not None else list(rounds.c)
        # one statement, compiled once, for every chunk of ids (an expanding parameter)
        query = (
            select(*columns)
            .where(rounds.c.run_id.in_(bindparam("ids", expanding=True)))
            .order_by(rounds.c.run_id, rounds.c.round)
        )
        with self.engine.connect() as connection:
            for start in range(0, len(ids), 500):
                for row in connection.execute(query, {"ids": ids[start : start + 500]}).all():
                    out[row.run_id].append(row)
        return out

    def curve(self, run_id: int) -> list[Any]:
        return self.curves([run_id])[run_id]


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise RegistryError(
            f"registry URL {display_url(url)!r} is not a SQLAlchemy URL; use e.g. sqlite:///registry/fedbench.db "
            "or postgresql://user@host/db (the password through PGPASSWORD or ~/.pgpass, see README)"
        ) from None


def _sqlite_file(parsed: URL) -> str | None:
    """The database file of a SQLite URL (``sqlite:///path`` or a ``file:`` URI with ``uri=true``); None in memory."""
    database = parsed.database
    if not database or database == ":memory:":
        return None
    if str(parsed.query.get("uri", "")).lower() in ("true", "1") and database.startswith("file:"):
        path = unquote(database[len("file:") :].split("?", 1)[0])
        # mode=memory: in the URL's query (SQLAlchemy hands it on to SQLite's URI) or in the file name part
        in_memory = str(parsed.query.get("mode", "")).lower() == "memory" or "mode=memory" in database
        return None if path in ("", ":memory:") or in_memory else path
    return database


def _declares_read_only(parsed: URL) -> bool:
    query = {k: str(v).lower() for k, v in parsed.query.items()}
    database = parsed.database or ""
    return query.get("mode") == "ro" or query.get("immutable") in ("1", "true") or "mode=ro" in database


def _read_only_sqlite_url(path: str, immutable: bool = False) -> str:
    """A URL opening the SQLite file at ``path`` read-only: the connection itself cannot write."""
    return f"sqlite:///file:{quote(str(Path(path).resolve()))}?{'immutable=1' if immutable else 'mode=ro'}&uri=true"


def _sqlite_writable(database: str | None) -> bool:
    """Whether this process may write the SQLite file ``database`` and its folder (journal and WAL files)."""
    if database is None:
        return True
    path = Path(database)
    return (not path.exists() or os.access(path, os.W_OK)) and os.access(path.parent, os.W_OK)


def _sqlite_read_only_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=60000")
    cursor.execute("PRAGMA query_only=ON")  # a second guard beside mode=ro: no statement of this connection writes
    cursor.close()


def _postgresql_read_only(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    cursor.close()
    dbapi_connection.commit()


def stale_reason(run: RunRow) -> str | None:
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


class Heartbeat:
    """Beat a claimed run's heartbeat from a background thread every ``every`` seconds while the run trains, so a
    long round never makes a live worker look stale. ``lost`` turns True when another worker took the claim over.
    Use as a context manager around the training."""

    def __init__(self, registry: Registry, run_id: int, worker: str, every: float | None = None):
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

    def _loop(self) -> None:
        while not self._stop.wait(self.every) and not self.lost:
            self.beat()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


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


__all__ = ["Registry", "Heartbeat", "default_registry_url", "worker_id", "stale_reason"]
