"""Versioned registry schema: Alembic revisions in ``fedbench/registry/migrations/versions``.

Opening a registry brings it to the newest revision: a new registry is created by the revisions in order, a
registry written by an older fedbench (0.1.0 and its development versions, which had no version table) is
migrated forward, and one already current costs a single query. Migrations run under a lock (a file lock
beside a SQLite database, an advisory transaction lock on PostgreSQL), so workers opening a registry at the
same moment migrate it once. Registries only move forward: back up the file before upgrading fedbench if
you may need to go back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_ADVISORY_LOCK_KEY = 0x66656462  # "fedb": one lock id for every fedbench registry migration on a PostgreSQL server


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


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


@contextlib.contextmanager
def _file_lock(database: str | None) -> Iterator[None]:
    if not database or database == ":memory:":
        yield
        return
    from filelock import FileLock

    with FileLock(f"{database}.migrate.lock"):
        yield


def upgrade(engine: Engine, checkpoint_dir: Path | None = None) -> None:
    """Bring the registry behind ``engine`` to the newest revision (no-op when it is current)."""
    if current_revision(engine) == head_revision():
        return
    is_sqlite = engine.dialect.name == "sqlite"
    with _file_lock(engine.url.database if is_sqlite else None), engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})
        if MigrationContext.configure(connection).get_current_revision() == head_revision():
            return  # another worker migrated it while we waited for the lock
        config = _config(checkpoint_dir)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


__all__ = ["upgrade", "head_revision", "current_revision"]
