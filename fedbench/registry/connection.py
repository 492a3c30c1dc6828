"""Opening a registry by URL. SQLite runs in WAL mode with a busy timeout so several workers can write; the same
code runs on PostgreSQL by URL. Opening for writing (``fedbench run``) migrates the registry to the newest schema
revision and refuses one this process may not write; opening read-only (reporting) cannot write at all.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from fedbench.checkpoint.location import registry_checkpoints, run_checkpoint
from fedbench.errors import RegistryError, write_failure
from fedbench.registry import schema
from fedbench.registry.reconnect import Reconnect
from fedbench.urls import display_url, scrub, sqlite_file


def default_registry_url() -> str:
    return os.environ.get("FEDBENCH_REGISTRY") or "sqlite:///registry/fedbench.db"


class Connection:
    """The registry at ``url``. ``read_only`` (reporting: ``open_existing``): the connection cannot write (SQLite
    opened with ``mode=ro``, PostgreSQL sessions ``READ ONLY``), nothing is created or migrated unless the registry
    needs a migration and is writable; a read-only registry that needs one is a one-line error. Otherwise
    (``fedbench run``) a registry that cannot be written is a one-line error before anything is written."""

    def __init__(self, url: str | None = None, *, read_only: bool = False):
        self.url = url or default_registry_url()  # with its password, if any: never shown (``display_url``)
        self.display_url = display_url(self.url)
        self.read_only = read_only
        parsed = _parse(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        database = self.database_file = sqlite_file(parsed) if self.is_sqlite else None
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
            # a server's pooled connections may have died with a restart: each is checked before it is lent
            server_options = {} if self.is_sqlite else {"json_serializer": json_without_nan, "pool_pre_ping": True}
            self.engine: Engine = create_engine(engine_url, connect_args=connect_args, **server_options)
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
        # Once open, a server registry's operations outlive a lost connection (``reconnect.py``); a SQLite file's
        # are made once, as always. Opening is not retried: an unreachable server there is a one-line error at once.
        self.reconnect: Reconnect | None = None if self.is_sqlite else Reconnect(self.display_url, self.scrub)

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
            Connection(self.url)
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
    def open_existing(cls, url: str | None) -> Self | None:
        """Open a registry for reading (``read_only``), without creating a SQLite file that does not exist yet."""
        url = cls.resolve_url(url)
        parsed = _parse(url)
        if parsed.get_backend_name() == "sqlite":
            database = sqlite_file(parsed)
            if database is None:  # in memory: nothing to read
                return None
            if not Path(database).exists():
                return None
        return cls(url, read_only=True)

    @property
    def checkpoint_dir(self) -> Path:
        return registry_checkpoints(self.home)

    def checkpoint_path(self, spec_hash: str) -> Path:
        return run_checkpoint(spec_hash, self.home)


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise RegistryError(
            f"registry URL {display_url(url)!r} is not a SQLAlchemy URL; use e.g. sqlite:///registry/fedbench.db "
            "or postgresql://user@host/db (the password through PGPASSWORD or ~/.pgpass, see README)"
        ) from None


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


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=60000")  # first, so that switching to WAL waits for other writers
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


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


__all__ = ["Connection", "default_registry_url"]
