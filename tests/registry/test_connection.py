"""How a registry is opened (fedbench.registry.connection): which URL names which database file, read-only or for
writing (with the connection settings SQLite needs, and a migration first where one is due), the retries of a migration
that lost a race to another worker (with a fake ``time.sleep``, so no verdict depends on load), the one-line errors of
a bad URL or a failed open, and JSON without NaN for PostgreSQL. Mostly on SQLite files in the test's folder, no
training; the PostgreSQL tests use the suite's throwaway server and skip without one.

A registry URL's password is never shown or stored (docs/security.md, "Registry credentials"): every command (run, dry
run, runs, show, report) is run with a password-bearing URL: one whose server cannot be reached (no driver installed,
or nothing listening), one whose driver's error text quotes the whole URL, and one that works (a PostgreSQL URL whose
engine is redirected to a SQLite file, since SQLite URLs carry no password). The password must appear in no byte of
stdout or stderr, nor anywhere in the registry file."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine as real_create_engine
from sqlalchemy import insert, text
from sqlalchemy.exc import OperationalError, ProgrammingError
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.engine.loop import RoundRecord
from fedbench.errors import RegistryError
from fedbench.registry import Registry, connection
from fedbench.registry.tables import rounds
from fedbench.urls import sqlite_file
from registry_fixtures import entry, register_recipe


def pragma(registry: Registry, name: str):
    with registry.engine.connect() as connection:
        return connection.execute(text(f"PRAGMA {name}")).scalar()


# ------------------------------------------------------------------------------------------- URLs
def test_the_default_registry_is_the_environments_or_the_local_file(monkeypatch):
    monkeypatch.delenv("FEDBENCH_REGISTRY", raising=False)
    assert connection.default_registry_url() == "sqlite:///registry/fedbench.db"
    assert Registry.resolve_url(None) == "sqlite:///registry/fedbench.db"
    monkeypatch.setenv("FEDBENCH_REGISTRY", "")
    assert connection.default_registry_url() == "sqlite:///registry/fedbench.db"
    monkeypatch.setenv("FEDBENCH_REGISTRY", "postgresql://alice:pw@db/fedbench")
    assert connection.default_registry_url() == "postgresql://alice:pw@db/fedbench"
    assert Registry.resolve_url(None) == "postgresql://alice:pw@db/fedbench"
    assert Registry.resolve_url("sqlite:///x.db") == "sqlite:///x.db"
    assert Registry.shown_url(None) == "postgresql://alice:***@db/fedbench"
    assert Registry.shown_url("postgresql://bob:s3cret@h:5433/d") == "postgresql://bob:***@h:5433/d"


def test_resolve_url_is_the_same_on_the_class_and_on_a_registry(registry_url, monkeypatch):
    monkeypatch.delenv("FEDBENCH_REGISTRY", raising=False)
    registry = Registry(registry_url)
    assert registry.resolve_url(None) == Registry.resolve_url(None) == "sqlite:///registry/fedbench.db"
    assert registry.resolve_url("sqlite:///other.db") == "sqlite:///other.db"


@pytest.mark.parametrize(
    ("url", "read_only"),
    [
        ("sqlite:///x.db", False),
        ("sqlite:///x.db?mode=ro", True),
        ("sqlite:///x.db?mode=RO", True),
        ("sqlite:///x.db?mode=rw", False),
        ("sqlite:///x.db?immutable=1", True),
        ("sqlite:///x.db?immutable=True", True),
        ("sqlite:///x.db?immutable=0", False),
        ("sqlite:///file:x.db?mode=ro&uri=true", True),
        ("sqlite:///file:x.db?uri=true", False),
        ("sqlite:///file:x.db%3Fmode=ro", True),  # a URI filename whose query SQLite, not SQLAlchemy, reads
    ],
)
def test_a_url_declares_read_only_by_mode_or_immutable(url, read_only):
    assert connection._declares_read_only(connection._parse(url)) is read_only


def test_a_read_only_url_of_a_file_opens_exactly_that_file(tmp_path):
    folder = tmp_path / "my runs"
    folder.mkdir()
    path = folder / "a.db"
    resolved = quote(str(path.resolve()))
    assert connection._read_only_sqlite_url(str(path)) == f"sqlite:///file:{resolved}?mode=ro&uri=true"
    assert (
        connection._read_only_sqlite_url(str(path), immutable=True) == f"sqlite:///file:{resolved}?immutable=1&uri=true"
    )
    for immutable in (False, True):
        url = connection._read_only_sqlite_url(str(path), immutable=immutable)
        assert sqlite_file(connection._parse(url)) == str(path.resolve())
        assert connection._declares_read_only(connection._parse(url))


def test_a_url_sqlalchemy_cannot_parse_is_a_one_line_error_without_its_password():
    with pytest.raises(RegistryError) as raised:
        Registry("postgres ql://alice:hunter2@db/fedbench")
    message = str(raised.value)
    assert "hunter2" not in message and "\n" not in message
    assert message.startswith("registry URL 'postgres ql://alice:***@db/fedbench' is not a SQLAlchemy URL; use e.g.")


def test_a_url_whose_driver_is_missing_is_a_one_line_error_without_its_password():
    with pytest.raises(RegistryError) as raised:
        Registry("nosuchdb://alice:hunter2@db/fedbench")
    message = str(raised.value)
    assert message.startswith("cannot open registry 'nosuchdb://alice:***@db/fedbench': ")
    assert "hunter2" not in message


# ------------------------------------------------------------------------------------------- opening
def test_only_a_writable_sqlite_registry_makes_a_folder(tmp_path, monkeypatch):
    """The folder of a SQLite file is made when the registry is opened for writing, and by nothing else: a read-only
    open writes nothing, and a server's registry has no folder (``home`` is only where checkpoints default to)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OperationalError):  # no such file to read: `open_existing` says so to a person first
        Registry(f"sqlite:///{tmp_path / 'typo' / 'fedbench.db'}", read_only=True)
    assert not (tmp_path / "typo").exists()
    pytest.importorskip("psycopg", reason="the PostgreSQL driver (the dev extra)")
    with pytest.raises(RegistryError, match="cannot open registry"):  # port 1: refused at once, no server needed
        Registry("postgresql+psycopg://alice@127.0.0.1:1/fedbench")
    assert list(tmp_path.iterdir()) == []  # no registry/ folder in the working directory


def test_a_writable_registry_makes_its_folder_and_uses_wal_a_busy_timeout_and_foreign_keys(tmp_path):
    registry = Registry(f"sqlite:///{tmp_path / 'new' / 'deeper' / 'fedbench.db'}")
    assert registry.is_sqlite and not registry.read_only
    assert registry.database_file == str(tmp_path / "new" / "deeper" / "fedbench.db")
    assert registry.home == tmp_path / "new" / "deeper" and registry.home.is_dir()
    assert registry.checkpoint_dir == tmp_path / "new" / "deeper" / "checkpoints"
    assert registry.checkpoint_path("00ff") == tmp_path / "new" / "deeper" / "checkpoints" / "00ff.pt"
    assert pragma(registry, "journal_mode") == "wal"
    assert pragma(registry, "busy_timeout") == 60000
    assert pragma(registry, "foreign_keys") == 1
    assert pragma(registry, "query_only") == 0
    # foreign keys are enforced: a round of no run is refused, deleting a run deletes its curve
    registry.ensure_runs([entry(1)])
    run_id = registry.get_run(entry(1)["spec_hash"]).id
    with registry.engine.begin() as connection:
        connection.execute(insert(rounds).values(run_id=run_id, round=1, test_acc=0.5))
    with registry.engine.begin() as connection:
        connection.execute(text("DELETE FROM runs"))
        assert connection.execute(text("SELECT count(*) FROM rounds")).scalar() == 0


def test_a_registry_url_declaring_read_only_is_refused_for_writing_and_read_as_it_says(tmp_path):
    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}").ensure_runs([entry(1)])
    url = f"sqlite:///file:{database}?mode=ro&uri=true"
    with pytest.raises(RegistryError) as raised:
        Registry(url)
    assert str(raised.value).startswith(
        f"registry {Registry.shown_url(url)!r} is opened read-only (mode=ro/immutable in the URL): "
    )
    reader = Registry(url, read_only=True)
    assert [r.spec_hash for r in reader.runs()] == [entry(1)["spec_hash"]]
    assert pragma(reader, "query_only") == 1 and pragma(reader, "busy_timeout") == 60000


def test_open_existing_creates_nothing_and_reads_through_a_connection_that_cannot_write(tmp_path):
    missing = tmp_path / "nowhere" / "fedbench.db"
    assert Registry.open_existing(f"sqlite:///{missing}") is None
    assert Registry.open_existing("sqlite://") is None and Registry.open_existing("sqlite:///:memory:") is None
    assert not (tmp_path / "nowhere").exists()
    assert Registry.peek_statuses(f"sqlite:///{missing}", [entry(1)["spec_hash"]]) == {}

    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}").ensure_runs([entry(1), entry(2)])
    reader = Registry.open_existing(f"sqlite:///{database}")
    assert reader is not None and reader.read_only and reader.database_file == str(database)
    assert pragma(reader, "query_only") == 1 and pragma(reader, "busy_timeout") == 60000
    with pytest.raises(OperationalError), reader.engine.begin() as connection:
        connection.execute(text("DELETE FROM runs"))
    assert Registry.peek_statuses(f"sqlite:///{database}", [entry(2)["spec_hash"], "0" * 16]) == {
        entry(2)["spec_hash"]: "pending"
    }


def test_a_read_only_registry_of_an_older_schema_is_one_line_naming_both_revisions(tmp_path, monkeypatch):
    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}")
    monkeypatch.setattr(connection.schema, "current_revision", lambda engine: "0002_old")
    url = f"sqlite:///file:{database}?mode=ro&uri=true"
    with pytest.raises(RegistryError) as raised:
        Registry(url, read_only=True)
    head = connection.schema.head_revision()
    assert str(raised.value) == (
        f"registry {Registry.shown_url(url)!r} is at schema revision 0002_old and this fedbench needs {head}; it is read-only here: "
        "open it once with write access (e.g. `fedbench runs` as a user or worker role that may write it)"
    )
    monkeypatch.setattr(connection.schema, "current_revision", lambda engine: None)
    with pytest.raises(RegistryError, match="is at schema revision before 0001 and this fedbench needs"):
        Registry(url, read_only=True)


def test_a_file_this_process_may_not_write_is_refused_for_writing(tmp_path, monkeypatch):
    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}")
    real_access = os.access
    for denied in (database, tmp_path):  # the file, or its folder (journal and WAL files)

        def access(path, mode, denied=denied):
            return False if Path(path) == denied and mode == os.W_OK else real_access(path, mode)

        monkeypatch.setattr(connection.os, "access", access)
        with pytest.raises(RegistryError) as raised:
            Registry(f"sqlite:///{database}")
        assert str(raised.value).startswith(f"registry 'sqlite:///{database}' cannot be written (the file or its")
        assert Registry(f"sqlite:///{database}", read_only=True).runs() == []  # a reporter still reads it
    # a read-only open of an older registry this process may not write: no migration is tried
    monkeypatch.setattr(connection.schema, "current_revision", lambda engine: "0002")
    monkeypatch.setattr(connection.schema, "upgrade", lambda engine, folder=None: pytest.fail("migrated"))
    with pytest.raises(RegistryError) as raised:
        Registry(f"sqlite:///{database}", read_only=True)
    message = str(raised.value)  # the registry, both revisions and the remedy (the whole line: the test above)
    assert message.startswith(
        f"registry 'sqlite:///{database}' is at schema revision 0002 and this fedbench needs "
        f"{connection.schema.head_revision()}; it is read-only here: "
    )
    assert "open it once with write access" in message and "\n" not in message
    monkeypatch.setattr(connection.os, "access", lambda path, mode: Path(path) != database and real_access(path, mode))
    assert connection._sqlite_writable(str(tmp_path / "new.db"))  # a file to be made: only its folder counts
    assert connection._sqlite_writable(None)


@pytest.mark.filterwarnings("ignore:Selection of the SingletonThreadPool:sqlalchemy.exc.SADeprecationWarning")
def test_an_in_memory_sqlite_uri_has_no_database_file(tmp_path, monkeypatch):
    """SQLAlchemy hands mode=memory of the URL's query on to SQLite: the registry lives in memory, not in a file
    named after the URI's path (a bug: fedbench took ``file:shared?mode=memory&uri=true`` for the file "shared")."""
    monkeypatch.chdir(tmp_path)
    registry = Registry("sqlite:///file:shared?mode=memory&cache=shared&uri=true")
    assert registry.database_file is None and registry.home == Path("registry")
    registry.ensure_runs([entry(1)])
    assert [r.seed for r in registry.runs()] == [1] and not (tmp_path / "shared").exists()
    assert Registry.open_existing("sqlite:///file:shared?mode=memory&cache=shared&uri=true") is None


# ------------------------------------------------------------------------------------------- read-only fallbacks
def test_a_wal_database_sqlite_cannot_open_read_only_is_read_as_immutable(tmp_path, monkeypatch):
    """A WAL database in a folder the reporter cannot write, with no -shm file: SQLite says "unable to open", and
    the registry reads it as immutable instead (made here by a first schema query that fails so)."""
    database = tmp_path / "fedbench.db"
    writer = Registry(f"sqlite:///{database}")
    writer.ensure_runs([entry(1)])
    writer.engine.dispose()  # the last connection to close moves the WAL into the file, as a finished run leaves it
    real = connection.schema.current_revision
    calls = []

    def current_revision(engine):
        calls.append(str(engine.url))
        if len(calls) == 1:
            raise OperationalError("SELECT", {}, Exception("unable to open database file"))
        return real(engine)

    monkeypatch.setattr(connection.schema, "current_revision", current_revision)
    reader = Registry(f"sqlite:///{database}", read_only=True)
    assert [r.seed for r in reader.runs()] == [1] and len(calls) == 2
    assert "immutable=1" in calls[1] and "immutable" not in calls[0]
    assert pragma(reader, "query_only") == 1  # the immutable connection has the read-only settings too


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///{database}", "disk I/O\nerror"),  # another error: not retried as immutable
        ("sqlite:///file:{database}?mode=ro&uri=true", "unable to open database file"),  # declared: nothing to retry
    ],
)
def test_other_failures_of_a_read_only_open_are_one_line_errors(tmp_path, monkeypatch, url, message):
    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}")
    url = url.format(database=database)

    def current_revision(engine):
        raise OperationalError("SELECT", {}, Exception(message))

    monkeypatch.setattr(connection.schema, "current_revision", current_revision)
    with pytest.raises(RegistryError) as raised:
        Registry(url, read_only=True)
    assert str(raised.value) == f"cannot open registry {Registry.shown_url(url)!r}: {' '.join(message.split())}"


def test_a_read_only_open_of_an_old_writable_registry_migrates_it_first(tmp_path, monkeypatch):
    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}").ensure_runs([entry(1)])
    real, upgrades = connection.schema.current_revision, []
    revisions = iter(["0002"])
    monkeypatch.setattr(connection.schema, "current_revision", lambda engine: next(revisions, None) or real(engine))
    monkeypatch.setattr(connection.schema, "upgrade", lambda engine, folder=None: upgrades.append(folder))
    reader = Registry(f"sqlite:///{database}", read_only=True)
    assert upgrades == [tmp_path / "checkpoints"] and [r.seed for r in reader.runs()] == [1]


def test_a_read_only_open_whose_migration_is_refused_says_to_open_it_with_write_access(tmp_path, monkeypatch):
    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}")
    monkeypatch.setattr(connection.schema, "current_revision", lambda engine: "0002")
    head = connection.schema.head_revision()
    refusals = [
        ("Permission denied for table runs", True),
        ("must be owner of table runs", True),
        ("cannot execute ALTER TABLE in a read-only transaction", True),
        ("attempt to write a readonly database", True),
        ("this database role may only read it", True),
        ("no space left on device", False),
    ]
    for refusal, refused in refusals:

        def upgrade(engine, folder=None, refusal=refusal):
            raise OperationalError("ALTER", {}, Exception(refusal))

        monkeypatch.setattr(connection.schema, "upgrade", upgrade)
        with pytest.raises(RegistryError) as raised:
            Registry(f"sqlite:///{database}", read_only=True)
        opened = f"cannot open registry 'sqlite:///{database}': {refusal}"
        if refused:  # the registry, both revisions, the refusal and the remedy
            message = str(raised.value)
            assert message.startswith(
                f"registry 'sqlite:///{database}' is at schema revision 0002 and this fedbench needs {head}; it is "
                f"read-only here ({opened}): "
            )
            assert "open it once with write access" in message and "\n" not in message
        else:
            assert str(raised.value) == opened


# ------------------------------------------------------------------------------------------- migration retries
class FlakyUpgrade:
    """``schema.upgrade`` that fails ``failures`` times with ``error`` (as a racing worker makes it), then works."""

    def __init__(self, failures: int, error: Exception):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self, engine, checkpoint_dir=None) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error


def operational(message: str) -> OperationalError:
    return OperationalError("UPDATE alembic_version", {}, Exception(message))


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """A fake time.sleep: records how long the registry would have waited, returns at once."""
    waits: list[float] = []
    monkeypatch.setattr(connection.time, "sleep", waits.append)
    return waits


@pytest.mark.parametrize(
    "error",
    [
        operational("database is locked"),
        ProgrammingError("CREATE TABLE runs", {}, Exception('relation "runs" already exists')),
        ProgrammingError("INSERT", {}, Exception("duplicate key value violates unique constraint")),
    ],
    ids=["sqlite-locked", "postgres-exists", "postgres-duplicate"],
)
def test_a_migration_that_lost_a_race_is_retried_with_growing_waits(monkeypatch, slept, registry_url, error):
    upgrade = FlakyUpgrade(4, error)
    monkeypatch.setattr(connection.schema, "upgrade", upgrade)
    Registry(registry_url)  # opens: the fifth attempt works
    assert upgrade.calls == 5
    assert slept == pytest.approx([0.1, 0.2, 0.3, 0.4])  # a growing back-off, 1 s in all


def test_the_retries_end_with_a_one_line_registry_error(monkeypatch, slept, registry_url):
    upgrade = FlakyUpgrade(5, operational("database is\nlocked"))
    monkeypatch.setattr(connection.schema, "upgrade", upgrade)
    with pytest.raises(RegistryError) as raised:
        Registry(registry_url)
    assert upgrade.calls == 5 and len(slept) == 4  # five attempts, no wait after the last
    assert str(raised.value) == f"cannot open registry {registry_url!r}: database is locked"


def test_other_errors_are_not_retried(monkeypatch, slept, registry_url):
    upgrade = FlakyUpgrade(1, operational("no such table: runs"))
    monkeypatch.setattr(connection.schema, "upgrade", upgrade)
    with pytest.raises(RegistryError, match="no such table: runs"):
        Registry(registry_url)
    assert upgrade.calls == 1 and slept == []


def test_a_registry_with_leftover_wal_files_says_so(monkeypatch, tmp_path, slept):
    database = tmp_path / "fedbench.db"
    monkeypatch.setattr(connection.schema, "upgrade", FlakyUpgrade(100, operational("disk I/O error")))
    with pytest.raises(RegistryError) as bare:
        Registry(f"sqlite:///{database}")
    assert "belong to a registry file that was deleted" not in str(bare.value)
    (tmp_path / "fedbench.db-wal").write_bytes(b"")
    with pytest.raises(RegistryError, match=r"fedbench.db-wal belong to a registry file that was deleted"):
        Registry(f"sqlite:///{database}")
    (tmp_path / "fedbench.db-shm").write_bytes(b"")
    with pytest.raises(RegistryError, match=r"fedbench.db-wal and .*fedbench.db-shm belong"):
        Registry(f"sqlite:///{database}")


def test_a_disk_io_error_names_the_leftover_files_of_a_deleted_registry_and_only_then(tmp_path, monkeypatch):
    database = tmp_path / "fedbench.db"
    url = f"sqlite:///{database}"

    def upgrade(engine, folder=None):
        raise OperationalError("CREATE TABLE", {}, Exception("disk I/O error"))

    monkeypatch.setattr(connection.schema, "upgrade", upgrade)
    with pytest.raises(RegistryError) as bare:
        Registry(url)
    assert str(bare.value) == f"cannot open registry {url!r}: disk I/O error"
    (tmp_path / "fedbench.db-wal").write_bytes(b"")
    (tmp_path / "fedbench.db-shm").write_bytes(b"")
    with pytest.raises(RegistryError) as hinted:
        Registry(url)
    assert str(hinted.value) == (
        f"cannot open registry {url!r}: disk I/O error; {database}-wal and {database}-shm belong to a registry file "
        "that was deleted while a process still had it open: stop that process (an old `fedbench run`?) or delete "
        "those files, then retry"
    )


# ------------------------------------------------------------------------------------------- JSON for PostgreSQL
def test_json_for_a_server_database_has_null_for_every_non_finite_number():
    value = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": math.nan, "e": "nan"}, "f": None}
    assert json.loads(connection.json_without_nan(value)) == {
        "a": None,
        "b": [1.5, None, [None, 2]],
        "c": {"d": None, "e": "nan"},
        "f": None,
    }
    assert connection.json_without_nan(3) == "3" and connection.json_without_nan(math.nan) == "null"
    assert connection.json_without_nan([True, 0, 1e308]) == "[true, 0, 1e+308]"


def test_non_finite_values_in_json_columns_are_stored_on_every_backend(any_registry_url, write_recipe):
    """PostgreSQL's json type rejects NaN (it crashed recording a diverged run's summary there): a non-finite
    value in a JSON column reads back as NaN (SQLite) or None (PostgreSQL), i.e. no value; finite ones intact."""
    import math

    registry, planned = register_recipe(any_registry_url, write_recipe())
    run_id = registry.claim(planned[0].spec_hash)
    record = RoundRecord(
        round=1, train_loss=0.5, wall_seconds=0.1, bytes_up=1, bytes_down=1, personal_per_client=[math.nan, 0.25]
    )
    registry.log_round(run_id, record)
    registry.finish(run_id, "diverged", summary={"final": math.inf, "best": 0.25, "rounds": [math.nan]})
    (stored,) = registry.curve(run_id)
    first, second = stored.personal_per_client
    assert (first is None or math.isnan(first)) and second == 0.25
    summary = registry.get_run(run_id).summary
    assert summary["best"] == 0.25 and summary["final"] in (None, math.inf)
    assert summary["rounds"][0] is None or math.isnan(summary["rounds"][0])


# ------------------------------------------------------------------------------------------- PostgreSQL
def test_postgresql_worker_and_select_only_roles(postgres_admin_url):
    """A worker role opens the registry for writing; a SELECT-only role is a one-line error for writing (without
    its password) and reads as a reporter; a reporter's session cannot write even as the owner."""
    import uuid

    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    admin = make_url(postgres_admin_url)
    suffix = uuid.uuid4().hex[:8]
    database, reader, password = f"fedbench_open_{suffix}", f"fedbench_open_reader_{suffix}", uuid.uuid4().hex
    server = create_engine(admin, isolation_level="AUTOCOMMIT")
    with server.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {database}"))
        connection.execute(text(f"CREATE ROLE {reader} LOGIN PASSWORD '{password}'"))
    try:
        worker_url = admin.set(database=database).render_as_string(hide_password=False)
        worker = Registry(worker_url)
        assert not worker.is_sqlite and worker.database_file is None and worker.home == Path("registry")
        worker.ensure_runs([entry(1)])
        run_id = worker.get_run(entry(1)["spec_hash"]).id
        with worker.engine.begin() as connection:  # NaN has no PostgreSQL JSON spelling: stored as null
            connection.execute(insert(rounds).values(run_id=run_id, round=1, personal_metrics={"auc": [math.nan, 0.5]}))
        assert worker.curve(run_id)[0].personal_metrics == {"auc": [None, 0.5]}
        with worker.engine.begin() as connection:
            connection.execute(text(f"GRANT CONNECT ON DATABASE {database} TO {reader}"))
            connection.execute(text(f"GRANT USAGE ON SCHEMA public TO {reader}"))
            connection.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}"))
        worker.engine.dispose()
        reader_url = admin.set(database=database, username=reader, password=password)
        reader_url = reader_url.render_as_string(hide_password=False)
        with pytest.raises(RegistryError) as raised:
            Registry(reader_url)
        assert str(raised.value) == (
            f"registry {Registry.shown_url(reader_url)!r}: this database role may only read it; `fedbench run` "
            "records runs, so connect as a worker role (docs/security.md)"
        )
        assert password not in str(raised.value)
        assert [r.seed for r in Registry(reader_url, read_only=True).runs()] == [1]
        owner_reading = Registry(worker_url, read_only=True)
        assert [r.seed for r in owner_reading.runs()] == [1]
        with pytest.raises(Exception, match="read-only transaction"), owner_reading.engine.begin() as connection:
            connection.execute(text("DELETE FROM runs"))
        owner_reading.engine.dispose()
        assert [r.seed for r in Registry(worker_url).runs()] == [1]
    finally:
        with server.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            connection.execute(text(f"DROP ROLE IF EXISTS {reader}"))
        server.dispose()


# ------------------------------------------------------------------------------------------- passwords
PASSWORD = "Pa55-w0rd_9f3k"  # distinctive: found nowhere by chance
URL = f"postgresql://alice:{PASSWORD}@127.0.0.1:1/fedbench"  # port 1: nothing listens there


def commands(recipe: Path, url: str) -> dict[str, list[str]]:
    return {
        "run": ["run", str(recipe), "--scale", "smoke", "--registry", url],
        "dry-run": ["run", str(recipe), "--scale", "smoke", "--dry-run", "--registry", url],
        "runs": ["runs", "--registry", url],
        "runs --json": ["runs", "--json", "--registry", url],
        "show": ["show", "1", "--registry", url],
        "show --json": ["show", "1", "--json", "--registry", url],
        "report": ["report", "--recipe", str(recipe), "--scale", "smoke", "--registry", url],
    }


def invoke(args: list[str], env: dict[str, str] | None = None):
    result = CliRunner().invoke(app, args, env=env)
    return result, result.stdout_bytes + result.stderr_bytes


@pytest.mark.parametrize("env_only", [False, True], ids=["--registry", "FEDBENCH_REGISTRY"])
def test_no_command_shows_the_password_of_an_unreachable_registry(write_recipe, env_only):
    recipe = write_recipe()
    for name, args in commands(recipe, URL).items():
        if env_only:  # the same URL from the environment
            args = args[: args.index("--registry")] + args[args.index("--registry") + 2 :]
        result, output = invoke(args, env={"FEDBENCH_REGISTRY": URL} if env_only else None)
        assert result.exit_code == 2, (name, output)
        assert PASSWORD.encode() not in output, (name, output)
        assert b"alice:***@127.0.0.1:1" in output, (name, output)  # the user still sees which registry failed


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is None, reason="psycopg (the `postgres` extra) not installed")
def test_a_refused_connection_does_not_show_the_password(write_recipe):
    recipe = write_recipe()
    url = URL.replace("postgresql://", "postgresql+psycopg://")
    for name in ("runs", "show", "report", "dry-run"):
        result, output = invoke(commands(recipe, url)[name])
        assert result.exit_code == 2 and b"cannot open registry" in output, (name, output)
        assert PASSWORD.encode() not in output, (name, output)


def test_a_driver_error_quoting_the_url_is_scrubbed(write_recipe, monkeypatch):
    """Some drivers quote the connection string in their errors: that text is scrubbed before it is shown."""
    from fedbench.registry import schema

    def refuse(engine, checkpoint_dir=None, **_):
        raise OperationalError("connect", {}, Exception(f"invalid connection {URL}: password {PASSWORD} refused"))

    monkeypatch.setattr(connection, "create_engine", lambda url, **kw: real_create_engine("sqlite://"))
    monkeypatch.setattr(schema, "upgrade", refuse)
    for name, args in commands(write_recipe(), URL).items():
        result, output = invoke(args)
        assert result.exit_code == 2 and b"refused" in output, (name, output)
        assert PASSWORD.encode() not in output, (name, output)


def test_a_working_registry_with_a_password_never_shows_or_stores_it(write_recipe, tmp_path, monkeypatch):
    """The whole cycle against a reachable registry: its engine is a SQLite file, its URL carries a password."""
    database = tmp_path / "reachable.db"
    monkeypatch.setattr(connection, "create_engine", lambda url, **kw: real_create_engine(f"sqlite:///{database}"))
    monkeypatch.chdir(tmp_path)  # checkpoints of a non-SQLite registry go to ./registry/checkpoints
    recipe = write_recipe()
    outputs = {}
    for name, args in commands(recipe, URL).items():
        result, output = invoke(args)
        assert result.exit_code == 0, (name, output)
        outputs[name] = output
    assert b"(postgresql://alice:***@127.0.0.1:1/fedbench)" in outputs["run"]  # the summary line, masked
    assert all(PASSWORD.encode() not in output for output in outputs.values())
    assert database.stat().st_size > 0 and PASSWORD.encode() not in database.read_bytes()
    for sidecar in tmp_path.rglob("*"):  # checkpoints, WAL files, anything written beside
        if sidecar.is_file():
            assert PASSWORD.encode() not in sidecar.read_bytes(), sidecar


@pytest.mark.slow
def test_a_real_postgresql_registry_never_shows_or_stores_the_password(
    write_recipe, tmp_path, monkeypatch, postgres_admin_url
):
    """Every command against a live server, as a role whose password is in the URL: in no output, in no row."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = make_url(postgres_admin_url)
    suffix = uuid.uuid4().hex[:8]
    database, role = f"fedbench_pw_{suffix}", f"fedbench_worker_{suffix}"
    server = create_engine(admin, isolation_level="AUTOCOMMIT")
    with server.connect() as connection:
        connection.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'"))
        connection.execute(text(f"CREATE DATABASE {database} OWNER {role}"))
    try:
        monkeypatch.chdir(tmp_path)
        url = admin.set(database=database, username=role, password=PASSWORD).render_as_string(hide_password=False)
        for name, args in commands(write_recipe(), url).items():
            result, output = invoke(args)
            assert result.exit_code == 0, (name, output)
            assert PASSWORD.encode() not in output, (name, output)
        owner = create_engine(url)
        with owner.connect() as connection:
            for table in ("runs", "rounds"):
                rows = connection.execute(text(f"SELECT CAST(t AS text) FROM {table} AS t")).scalars().all()
                assert rows and not any(PASSWORD in row for row in rows)
        owner.dispose()
    finally:
        with server.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            connection.execute(text(f"DROP ROLE IF EXISTS {role}"))
        server.dispose()


def test_a_read_only_registry_of_a_plain_url_cannot_write_even_past_its_pragmas(tmp_path):
    """Opened read-only, a SQLite registry given by a plain URL is connected through SQLite's read-only URI: the
    connection itself refuses writes, not only the ``query_only`` pragma a statement could turn off."""
    database = tmp_path / "fedbench.db"
    Registry(f"sqlite:///{database}").ensure_runs([entry(1)])
    reader = Registry(f"sqlite:///{database}", read_only=True)
    with reader.engine.connect() as conn:
        conn.execute(text("PRAGMA query_only = 0"))
        with pytest.raises(OperationalError, match="readonly"):
            conn.execute(text("UPDATE runs SET status = 'done'"))
