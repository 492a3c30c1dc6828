"""Versioned registry schema: Alembic revisions in ``fedbench/registry/migrations/versions``.

Opening a registry brings it to the newest revision: a new registry is created by the revisions in order, a
registry written by an older fedbench (0.1.0 and its development versions, which had no version table) is
migrated forward, and one already current costs a single query. Migrations run under a lock (a file lock
beside a SQLite database, an advisory transaction lock on PostgreSQL), so workers opening a registry at the
same moment migrate it once. Registries only move forward: back up the file before upgrading fedbench if
you may need to go back. A registry already migrated by a newer fedbench (a revision this one does not know) is
refused with a one-line error naming both revisions, never opened half-understood; upgrading an older one is
announced on the ``fedbench.registry`` logger (the CLI shows it on stderr), before it happens.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from fedbench import __version__
from fedbench.errors import RegistryError
from fedbench.urls import display_url, sqlite_file

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_ADVISORY_LOCK_KEY = 0x66656462  # "fedb": one lock id for every fedbench registry migration on a PostgreSQL server
log = logging.getLogger("fedbench.registry")


def _config(checkpoint_dir: Path | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["checkpoint_dir"] = checkpoint_dir
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions())


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


@contextlib.contextmanager
def _file_lock(database: str | None) -> Iterator[None]:
    """The migration lock beside the SQLite database file ``database`` (None: in memory, nothing to share)."""
    if not database:
        yield
        return
    # local: keeps filelock out of runs' start-up (only a migration takes the lock)
    from filelock import FileLock

    with FileLock(f"{database}.migrate.lock"):
        yield


def upgrade(engine: Engine, checkpoint_dir: Path | None = None) -> None:
    """Bring the registry behind ``engine`` to the newest revision (no-op when it is current). A registry at a
    revision this fedbench does not know (written by a newer one) raises RegistryError and is left as it is."""
    revision = current_revision(engine)
    if revision == head_revision():
        return
    check_not_newer(engine, revision)
    is_sqlite = engine.dialect.name == "sqlite"
    with _file_lock(sqlite_file(engine.url) if is_sqlite else None), engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})
        revision = MigrationContext.configure(connection).get_current_revision()
        if revision == head_revision():
            return  # another worker migrated it while we waited for the lock
        check_not_newer(engine, revision)
        if revision is not None or inspect(connection).has_table("runs"):  # not a new registry: say what happens
            log.warning(
                "upgrading registry %s from schema revision %s to %s (written by an older fedbench; "
                "older versions cannot open it afterwards)",
                display_url(engine.url),
                revision or "0.1.0 (no version table)",
                head_revision(),
            )
        config = _config(checkpoint_dir)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def check_not_newer(engine: Engine, revision: str | None) -> None:
    """A revision missing from this fedbench's migrations was written by a newer fedbench: refuse to open it."""
    if revision is None or revision in known_revisions():
        return
    raise RegistryError(
        f"registry {display_url(engine.url)} has schema revision {revision!r}, written by a "
        f"newer fedbench; this fedbench {__version__} knows revisions up to {head_revision()!r}: upgrade fedbench "
        "(pip install -U fedbench) to use this registry"
    )


__all__ = ["upgrade", "head_revision", "current_revision", "known_revisions", "check_not_newer"]
