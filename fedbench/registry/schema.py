"""Versioned registry schema: Alembic revisions in ``fedbench/registry/migrations/versions``.

Opening a registry brings it to the newest revision: a new registry is created by the revisions in order, a
registry written by an older fedbench (0.1.0 and its development versions, which had no version table) is
migrated forward, and one already current costs a single query. Migrations run under a lock (a file lock
beside a SQLite database, an advisory transaction lock on PostgreSQL), so workers opening a registry at the
same moment migrate it once. Registries only move forward: back up the file before upgrading fedbench if
you may need to go back. A registry already migrated by a newer fedbench (a revision this one does not know) is
refused with a one-line error naming both revisions, never opened half-understood; upgrading an older one is
announced on the ``fedbench.registry`` logger (the CLI shows it on stderr), before it happens.

Checking that a registry is current reads the ``alembic_version`` table with plain SQL and the head revision from
the migration files' ``revision =`` lines; Alembic itself is imported only to migrate (it costs a command that
only reads the registry a third of its start-up).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    from alembic.config import Config

from fedbench import __version__
from fedbench.errors import RegistryError
from fedbench.urls import display_url, sqlite_file

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_ADVISORY_LOCK_KEY = 0x66656462  # "fedb": one lock id for every fedbench registry migration on a PostgreSQL server
log = logging.getLogger("fedbench.registry")


def _config(checkpoint_dir: Path | None = None) -> Config:
    # local: Alembic is needed only to migrate; reading a registry's revision does not import it
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["checkpoint_dir"] = checkpoint_dir
    return config


# A migration file's own declaration of its revision and the one it revises (Alembic's script template writes them
# as module-level assignments, with or without a type annotation).
_DECLARATION = re.compile(r"^(down_revision|revision)\b[^=\n]*=\s*(?:[\"']([^\"']+)[\"']|None)", re.MULTILINE)


@lru_cache(maxsize=1)
def _revisions() -> dict[str, str | None]:
    """{revision: the revision it revises} of every migration file, read from the files' declarations."""
    graph: dict[str, str | None] = {}
    for script in sorted((MIGRATIONS / "versions").glob("[0-9]*.py")):  # the revisions, not __init__.py
        declared = {name: value or None for name, value in _DECLARATION.findall(script.read_text(encoding="utf-8"))}
        graph[str(declared["revision"])] = declared.get("down_revision")
    return graph


def head_revision() -> str:
    """The newest revision: the one no other migration revises (the history is a single line)."""
    revised = set(_revisions().values())
    (head,) = (revision for revision in _revisions() if revision not in revised)
    return head


def known_revisions() -> frozenset[str]:
    return frozenset(_revisions())


def _stored_revision(connection: Connection) -> str | None:
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def current_revision(engine: Engine) -> str | None:
    """The revision the registry behind ``engine`` is at (None: created before fedbench versioned its schema)."""
    with engine.connect() as connection:
        return _stored_revision(connection)


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
        revision = _stored_revision(connection)
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
        # local: Alembic is needed only to migrate; reading a registry's revision does not import it
        from alembic import command

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
