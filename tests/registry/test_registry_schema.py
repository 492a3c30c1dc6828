"""Opening a registry brings it to the newest schema revision under a lock (fedbench.registry.schema): a file lock
``<database>.migrate.lock`` beside a SQLite file, none for an in-memory database, PostgreSQL's advisory transaction
lock on the key spelling "fedb"; a current registry takes no lock at all. The upgrade notice and the refusal of a
registry from a newer fedbench are one line each, with the password masked."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from filelock import FileLock
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from fedbench import __version__
from fedbench.errors import RegistryError
from fedbench.registry import Registry, schema
from fedbench.registry.schema import current_revision, head_revision, known_revisions
from tests.registry.test_migrations import old_registry
from tests.registry.test_registry_versions import FUTURE, migrate_to, set_revision

PASSWORD = "Pa55-w0rd_9f3k"
FEDB = int.from_bytes(b"fedb", "big")  # the advisory lock id every fedbench version takes to migrate


def test_a_new_file_registry_is_created_under_the_lock_beside_it_and_a_current_one_takes_none(registry_url):
    database = Path(make_url(registry_url).database)
    lock = Path(f"{database}.migrate.lock")
    Registry(registry_url)  # created by the migrations, under the lock (filelock leaves its file behind)
    assert lock.exists() and current_revision(create_engine(registry_url)) == head_revision()
    lock.unlink()
    Registry(registry_url)  # current: one query, no lock
    assert not lock.exists()


def test_a_migration_waits_for_the_lock_another_worker_holds(tmp_path):
    url, database = old_registry(tmp_path)  # written by fedbench 0.1.0: no version table
    held = FileLock(f"{database}.migrate.lock")
    held.acquire()
    worker = threading.Thread(target=Registry, args=(url,), daemon=True)
    try:
        worker.start()
        worker.join(timeout=1.0)
        assert worker.is_alive()  # waiting for the lock, the registry untouched
        assert current_revision(create_engine(url)) is None
    finally:
        held.release()
    worker.join(timeout=120)
    assert not worker.is_alive() and current_revision(create_engine(url)) == head_revision()


def test_a_registry_given_as_a_file_uri_is_locked_beside_its_file(tmp_path, monkeypatch):
    """``sqlite:///file:PATH?...&uri=true`` (docs/cli.md) names the file PATH: the lock is PATH.migrate.lock, and
    nothing is written in the working directory."""
    work, database = tmp_path / "work", tmp_path / "data" / "fedbench.db"
    work.mkdir()
    database.parent.mkdir()
    monkeypatch.chdir(work)
    registry = Registry(f"sqlite:///file:{database}?mode=rwc&uri=true")
    assert current_revision(registry.engine) == head_revision()
    assert Path(f"{database}.migrate.lock").exists() and list(work.iterdir()) == []


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_registry_leaves_no_lock_file(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    registry = Registry(url)
    assert current_revision(registry.engine) == head_revision()
    assert [p.name for p in tmp_path.rglob("*.lock")] == []


def test_the_refusal_of_a_newer_registry_is_this_one_line(registry_url):
    Registry(registry_url)
    set_revision(registry_url, FUTURE)
    with pytest.raises(RegistryError) as refused:
        Registry(registry_url)
    assert str(refused.value) == (
        f"registry {registry_url} has schema revision '{FUTURE}', written by a newer fedbench; this fedbench "
        f"{__version__} knows revisions up to '{head_revision()}': upgrade fedbench (pip install -U fedbench) to use "
        "this registry"
    )


def test_postgresql_notices_and_refusals_mask_the_password(postgres_server, caplog):
    """The throwaway server trusts its user, so a password in the URL is accepted and never checked."""
    url = make_url(postgres_server.create_database()).set(password=PASSWORD).render_as_string(hide_password=False)
    masked = url.replace(PASSWORD, "***")
    first = min(known_revisions())
    migrate_to(url, first)
    with caplog.at_level(logging.INFO, logger="fedbench.registry"):
        Registry(url)
    notices = [r.getMessage() for r in caplog.records if r.name == "fedbench.registry"]
    assert notices == [
        f"upgrading registry {masked} from schema revision {first} to {head_revision()} (written by an older "
        "fedbench; older versions cannot open it afterwards)"
    ]
    set_revision(url, FUTURE)
    with pytest.raises(RegistryError) as refused:
        Registry(url)
    assert PASSWORD not in str(refused.value) and str(refused.value).startswith(f"registry {masked} has schema")


def test_a_postgresql_migration_waits_for_the_advisory_lock_of_fedb(postgres_server):
    """Another worker (of any fedbench version) migrating the same server holds the lock "fedb": an upgrade waits
    for it, here until the 300 ms lock_timeout given to its connections, and leaves the registry as it was."""
    url = postgres_server.create_database()
    first = min(known_revisions())
    migrate_to(url, first)
    holder = create_engine(url)
    impatient = create_engine(url, connect_args={"options": "-c lock_timeout=300"})
    try:
        with holder.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": FEDB})
            with pytest.raises(OperationalError, match="lock timeout"):
                schema.upgrade(impatient)
            assert current_revision(holder) == first
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": FEDB})
        schema.upgrade(impatient)  # the lock released: migrated
        assert current_revision(holder) == head_revision()
    finally:
        holder.dispose()
        impatient.dispose()


def test_the_revisions_read_from_the_migration_files_are_alembics():
    """The head and known revisions come from the files' declarations (no Alembic import to open a registry): they
    must be what Alembic itself reads from the same files, or a registry would be judged current when it is not."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(schema._config())
    assert head_revision() == scripts.get_current_head()
    assert known_revisions() == {script.revision for script in scripts.walk_revisions()}


def test_an_annotated_declaration_is_read_like_a_plain_one():
    """Alembic's newer script template annotates the declarations (``revision: str = "…"``)."""
    text = 'revision: str = "0004_x"\ndown_revision: str | None = "0003_checkpoint_hash"\n'
    assert dict(schema._DECLARATION.findall(text)) == {"revision": "0004_x", "down_revision": "0003_checkpoint_hash"}
    assert dict(schema._DECLARATION.findall('revision = "0001"\ndown_revision = None\n')) == {
        "revision": "0001",
        "down_revision": "",
    }


def test_reading_a_current_registry_does_not_import_alembic(registry_url):
    """Opening a current registry (for reading, or for writing) reads its revision with plain SQL: a command that
    only reads the registry does not pay Alembic's import."""
    import subprocess
    import sys

    Registry(registry_url)
    probe = (
        "import sys; from fedbench.registry import Registry; "
        f"Registry.open_existing({registry_url!r}).runs(); Registry({registry_url!r}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'torch')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
