"""Registry schema revisions across fedbench versions (fedbench.registry.schema), on SQLite and PostgreSQL.

Opening a registry brings it to the newest revision under a lock: a file lock ``<database>.migrate.lock`` beside a
SQLite file, none for an in-memory database, PostgreSQL's advisory transaction lock on the key spelling "fedb"; a
current registry takes no lock and is not migrated again. An older registry is upgraded with a notice (on the
``fedbench.registry`` logger, shown by the CLI on stderr) and then reports; a registry from a newer fedbench (a
revision this one does not know) is refused with one line naming both revisions, exit 2, and is left untouched. Both
messages mask the password."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from alembic import command
from filelock import FileLock
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from fedbench import __version__
from fedbench.cli import app
from fedbench.errors import RegistryError
from fedbench.registry import Registry, schema
from fedbench.registry.schema import _config, current_revision, head_revision, known_revisions
from registry_fixtures import old_registry

PASSWORD = "Pa55-w0rd_9f3k"
FEDB = int.from_bytes(b"fedb", "big")  # the advisory lock id every fedbench version takes to migrate
runner = CliRunner()
FUTURE = "9999_from_the_future"


def set_revision(url: str, revision: str) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    engine.dispose()


def migrate_to(url: str, revision: str) -> None:
    """A registry as an older fedbench left it: the migrations up to ``revision`` only."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    engine.dispose()


# ------------------------------------------------------------------------------------------- a new or current registry
def test_a_new_registry_is_at_the_head_revision(any_registry_url):
    registry = Registry(any_registry_url)
    assert current_revision(registry.engine) == head_revision()
    assert registry.runs() == []


def test_a_new_registry_is_created_without_an_upgrade_notice(any_registry_url, caplog):
    with caplog.at_level(logging.INFO, logger="fedbench.registry"):
        Registry(any_registry_url)
    assert [r for r in caplog.records if r.name == "fedbench.registry"] == []


def test_a_current_registry_is_not_migrated_again(tmp_path, registry_url, monkeypatch):
    Registry(registry_url)
    monkeypatch.setattr("alembic.command.upgrade", lambda *a, **k: pytest.fail("migrated a current registry"))
    Registry(registry_url)


# ------------------------------------------------------------------------------------------- the lock
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


# ------------------------------------------------------------------------------------------- an older registry
def test_an_older_registry_is_upgraded_with_a_notice_and_a_current_one_silently(any_registry_url, caplog):
    first = min(known_revisions())
    assert first != head_revision()  # the test needs at least one migration after the first revision
    migrate_to(any_registry_url, first)
    with caplog.at_level(logging.INFO, logger="fedbench.registry"):
        registry = Registry(any_registry_url)
    assert current_revision(registry.engine) == head_revision()
    notices = [r.getMessage() for r in caplog.records if r.name == "fedbench.registry"]
    assert len(notices) == 1 and f"from schema revision {first} to {head_revision()}" in notices[0]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fedbench.registry"):
        Registry(any_registry_url)  # current: nothing to say
    assert [r for r in caplog.records if r.name == "fedbench.registry"] == []


def test_the_cli_shows_the_upgrade_notice_on_stderr_and_reports(tmp_path):
    url, _ = old_registry(tmp_path)  # a registry written by fedbench 0.1.0 (no version table)
    result = runner.invoke(app, ["runs", "--registry", url, "--paper", "quickstart", "--json"])
    assert result.exit_code == 0, result.output
    assert f"upgrading registry sqlite:///{tmp_path}" in result.stderr
    assert f"from schema revision 0.1.0 (no version table) to {head_revision()}" in result.stderr
    runs = json.loads(result.stdout)  # the notice stays off stdout, and the runs are listed
    assert len(runs) == 3 and {r["status"] for r in runs} == {"done"}


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


# ------------------------------------------------------------------------------------------- a newer registry
def test_a_registry_from_a_newer_fedbench_is_refused_naming_both_revisions(any_registry_url, write_recipe):
    Registry(any_registry_url)
    set_revision(any_registry_url, FUTURE)
    assert FUTURE not in known_revisions()
    try:
        Registry(any_registry_url)
    except RegistryError as exc:
        message = str(exc)
    else:
        raise AssertionError("a registry at an unknown revision was opened")
    assert FUTURE in message and repr(head_revision()) in message and __version__ in message
    assert "\n" not in message

    for args in (["runs"], ["run", str(write_recipe()), "--scale", "smoke"]):
        result = runner.invoke(app, [*args, "--registry", any_registry_url])
        assert result.exit_code == 2, result.output
        assert FUTURE in result.output and "newer fedbench" in result.output
        assert "Traceback" not in result.output
    engine = create_engine(any_registry_url)
    with engine.connect() as connection:  # untouched: its revision and no run registered
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == FUTURE
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar() == 0
    engine.dispose()


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


# ------------------------------------------------------------------------------------------- the revisions
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
