"""A read-only reporter (docs/security.md "Read-only reporting"): `report`, `runs` and `show` read a registry they
cannot write — no table creation, no migration attempt, no write — and `run` against it is a one-line error.

Tests run as root here, and root writes a chmod-ed file regardless, so read-only is made real in four ways:
SQLite's own read-only URI (``file:...?mode=ro&uri=true``), a check that the reporters' connection refuses writes
whatever the file's mode, (slow) a read-only bind mount made with ``unshare -m``, which stops root too, and
(slow, when root can drop privileges) a subprocess run as ``nobody`` on a file mode 0444 in a folder mode 0555. PostgreSQL: a SELECT-only role, on the suite's throwaway server (or the one
$FEDBENCH_TEST_POSTGRES_URL names); skipped when there is none."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.registry import Registry
from registry_fixtures import FIXTURE


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder`` with its bytes and modification time, but for SQLite's ``-shm`` wal-index: shared
    memory for locks and read marks that any connection to a WAL-mode database maps and updates (a collected pooled
    connection of an earlier command closing meanwhile, too), never data."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() and not p.name.endswith("-shm")
    }


def read_only_uri(database: Path) -> str:
    return f"sqlite:///file:{database}?mode=ro&uri=true"


def reports(recipe: Path, url: str) -> dict[str, object]:
    """What the three reporting commands print (JSON), each asserted to succeed."""
    out: dict[str, object] = {}
    for name, args in {
        "runs": ["runs", "--json"],
        "show": ["show", "1", "--json"],
        "report": ["report", "--recipe", str(recipe), "--scale", "smoke", "--format", "json"],
    }.items():
        result = CliRunner().invoke(app, [*args, "--registry", url])
        assert result.exit_code == 0, (name, result.output)
        out[name] = json.loads(result.stdout)
    return out


@pytest.fixture
def filled(tmp_path, write_recipe) -> Iterator[tuple[Path, Path]]:
    """(recipe, registry file) after `fedbench run` of the tiny recipe at the smoke scale (2 runs).

    A connection stays open for the test: the last connection to close a WAL-mode database checkpoints the log into
    the file, and the run's pooled connections close whenever they are garbage-collected, which could be in the
    middle of the command under test (which then seemed to write). With this one open, none of them is the last."""
    recipe = write_recipe()
    database = tmp_path / "registry" / "fedbench.db"
    result = CliRunner().invoke(app, ["run", str(recipe), "--scale", "smoke", "--registry", f"sqlite:///{database}"])
    assert result.exit_code == 0, result.output
    keeper = sqlite3.connect(database)
    keeper.execute("SELECT count(*) FROM runs").fetchall()  # a connection counts for SQLite once it has read
    try:
        yield recipe, database
    finally:
        keeper.close()


def test_reports_from_a_read_only_uri_equal_those_from_the_writable_file_and_change_nothing(filled):
    recipe, database = filled
    writable = reports(recipe, f"sqlite:///{database}")
    before = snapshot(database.parent)
    assert reports(recipe, read_only_uri(database)) == writable
    assert writable["runs"] and len(writable["runs"]) == 2  # the tables hold our runs, not an empty registry
    assert snapshot(database.parent) == before  # no byte, no mtime, no new file (no lock, no journal)


def test_the_reporters_connection_cannot_write_whatever_the_files_mode(filled):
    _, database = filled
    store = Registry.open_existing(f"sqlite:///{database}")
    assert store is not None and store.read_only
    with pytest.raises(OperationalError, match="readonly|read-only|query_only|query-only"):
        with store.engine.begin() as connection:
            connection.execute(text("UPDATE runs SET status = 'pending'"))
    assert {status for (status,) in sqlite3.connect(database).execute("SELECT status FROM runs")} == {"done"}


def test_run_against_a_read_only_registry_is_a_one_line_error(filled):
    recipe, database = filled
    before = snapshot(database.parent)
    result = CliRunner().invoke(
        app, ["run", str(recipe), "--scale", "smoke", "--force", "--registry", read_only_uri(database)]
    )
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "read-only" in result.output
    assert snapshot(database.parent) == before


def test_a_read_only_registry_that_needs_a_migration_says_to_open_it_with_write_access(tmp_path):
    database = tmp_path / "old.db"
    with sqlite3.connect(database) as connection:
        connection.executescript(FIXTURE.read_text())  # fedbench 0.1.0's registry: three revisions behind
    before = snapshot(tmp_path)
    for args in (["runs"], ["show", "1"]):
        result = CliRunner().invoke(app, [*args, "--registry", read_only_uri(database)])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert "open it once with write access" in result.output
    assert snapshot(tmp_path) == before  # not migrated, no lock file beside it
    # opened once with write access, it is migrated; then the read-only URI reports it
    assert CliRunner().invoke(app, ["runs", "--registry", f"sqlite:///{database}"]).exit_code == 0
    assert CliRunner().invoke(app, ["runs", "--registry", read_only_uri(database)]).exit_code == 0


def _can_drop_to_nobody() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("true") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _can_drop_to_nobody(), reason="needs root to run a subprocess as nobody")
def test_a_file_its_user_cannot_write_reports_and_refuses_run(filled):
    """The real thing: user ``nobody`` with a registry file mode 0444 in a folder mode 0555, plain URL."""
    recipe, database = filled
    folder = Path(tempfile.mkdtemp(prefix="fedbench-ro-"))
    try:
        os.chmod(folder, 0o755)
        shutil.copy(database, folder / "fedbench.db")
        shutil.copy(recipe, folder / "tiny.toml")
        os.chmod(folder / "fedbench.db", 0o444)
        os.chmod(folder / "tiny.toml", 0o444)
        os.chmod(folder, 0o555)
        before = snapshot(folder)
        url = f"sqlite:///{folder / 'fedbench.db'}"
        env = {**os.environ, "HOME": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}

        def fedbench(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "fedbench.cli", *args, "--registry", url],
                user=65534,
                group=65534,
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )

        try:
            listed = fedbench("runs", "--json")
        except PermissionError as exc:  # e.g. Python installed under /root
            pytest.skip(f"user nobody cannot run this Python ({exc})")
        if listed.returncode != 0 and "Permission denied" in listed.stderr and "fedbench" not in listed.stderr:
            pytest.skip(f"user nobody cannot read this checkout: {listed.stderr.splitlines()[-1]}")
        assert listed.returncode == 0, listed.stderr
        assert len(json.loads(listed.stdout)) == 2
        shown = fedbench("report", "--recipe", str(folder / "tiny.toml"), "--scale", "smoke", "--format", "json")
        assert shown.returncode == 0, shown.stderr
        refused = fedbench("run", str(folder / "tiny.toml"), "--scale", "smoke", "--force")
        assert refused.returncode == 2 and "cannot be written" in refused.stderr, refused.stderr
        assert snapshot(folder) == before
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


def _read_only_mounts_work() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(
            ["unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"],
            capture_output=True,
            timeout=30,
        )
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _read_only_mounts_work(), reason="cannot make a read-only bind mount here (unshare -m)")
def test_a_registry_on_a_read_only_file_system_reports_and_refuses_run(filled, tmp_path):
    """A read-only bind mount stops root too: the registry (in WAL mode, closed: no -shm file) is read in place
    from a folder no process can write, with the plain URL; `run` is refused."""
    recipe, database = filled
    source, mount = tmp_path / "source", tmp_path / "mount"
    source.mkdir()
    mount.mkdir()
    with sqlite3.connect(database) as connection:  # this process's engines still hold it: fold the WAL in first
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(database, source / "fedbench.db")
    with sqlite3.connect(source / "fedbench.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    for leftover in source.glob("fedbench.db-*"):
        leftover.unlink()
    before = snapshot(source)
    url = f"sqlite:///{mount / 'fedbench.db'}"

    def fedbench(*args: str) -> subprocess.CompletedProcess:
        script = f'mount --bind {source} {mount} && mount -o remount,bind,ro {mount} && exec "$0" -m fedbench.cli "$@"'
        return subprocess.run(
            ["unshare", "-m", "sh", "-c", script, sys.executable, *args, "--registry", url],
            capture_output=True,
            text=True,
            timeout=300,
        )

    listed = fedbench("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 2
    shown = fedbench("show", "1", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["curve"], shown.stderr
    reported = fedbench("report", "--recipe", str(recipe), "--scale", "smoke", "--format", "json")
    assert reported.returncode == 0 and json.loads(reported.stdout)["tables"], reported.stderr
    refused = fedbench("run", str(recipe), "--scale", "smoke", "--force")
    assert refused.returncode == 2 and "cannot be written" in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") == 1
    assert snapshot(source) == before


# ------------------------------------------------------------------ PostgreSQL: a SELECT-only role


@pytest.mark.slow
def test_a_select_only_postgresql_role_reports_and_cannot_run(write_recipe, postgres_admin_url):
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    admin = make_url(postgres_admin_url)
    suffix = uuid.uuid4().hex[:8]
    database, reader, password = f"fedbench_ro_{suffix}", f"fedbench_reader_{suffix}", uuid.uuid4().hex
    server = create_engine(admin, isolation_level="AUTOCOMMIT")
    with server.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {database}"))
        connection.execute(text(f"CREATE ROLE {reader} LOGIN PASSWORD '{password}'"))
    try:
        worker_url = admin.set(database=database).render_as_string(hide_password=False)
        recipe = write_recipe()
        ran = CliRunner().invoke(app, ["run", str(recipe), "--scale", "smoke", "--registry", worker_url])
        assert ran.exit_code == 0, ran.output
        owner = create_engine(worker_url, isolation_level="AUTOCOMMIT")
        with owner.connect() as connection:  # docs/security.md: the readers' role
            connection.execute(text(f"GRANT CONNECT ON DATABASE {database} TO {reader}"))
            connection.execute(text(f"GRANT USAGE ON SCHEMA public TO {reader}"))
            connection.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}"))
        owner.dispose()
        reader_url = admin.set(database=database, username=reader, password=password).render_as_string(
            hide_password=False
        )
        assert reports(recipe, reader_url) == reports(recipe, worker_url)
        refused = CliRunner().invoke(app, ["run", str(recipe), "--scale", "smoke", "--force", "--registry", reader_url])
        assert refused.exit_code == 2 and "may only read" in refused.output, refused.output
        assert password not in refused.output
        owner = create_engine(worker_url, isolation_level="AUTOCOMMIT")
        with owner.connect() as connection:  # the registry of an older fedbench (at revision 0002)
            connection.execute(text("ALTER TABLE runs DROP COLUMN checkpoint_sha256"))
            connection.execute(text("ALTER TABLE rounds DROP COLUMN diagnostics"))  # revision 0004's
            connection.execute(text("UPDATE alembic_version SET version_num = '0002'"))
        owner.dispose()
        stale = CliRunner().invoke(app, ["runs", "--registry", reader_url])
        assert stale.exit_code == 2 and "open it once with write access" in stale.output, stale.output
        assert CliRunner().invoke(app, ["runs", "--registry", worker_url]).exit_code == 0  # the worker migrates it
        assert reports(recipe, reader_url)["runs"]
    finally:
        with server.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            connection.execute(text(f"DROP ROLE IF EXISTS {reader}"))
        server.dispose()
