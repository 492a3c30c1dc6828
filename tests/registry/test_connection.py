"""The registry beyond claims (fedbench.registry.connection and .store): which URL names which database file, how a registry is opened (read-only
or for writing, with the connection settings SQLite needs), the one-line errors of a bad URL, the queries a report
reads (by id, by hash prefix, by paper and status, curves with chosen columns) and JSON without NaN for PostgreSQL.
Everything on SQLite files in the test's folder, no training."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import OperationalError

from fedbench.errors import RegistryError
from fedbench.registry import Registry, claims, connection
from fedbench.registry.tables import rounds, runs
from fedbench.urls import sqlite_file


def entry(index: int, **fields) -> dict:
    return (
        dict(
            spec_hash=f"{index:016x}",
            spec={"seed": index},
            labels={},
            paper="p",
            recipe="r",
            algorithm="fedavg",
            dataset="digits",
            seed=index,
            scale="full",
            synthetic=False,
            targets=[],
        )
        | fields
    )


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
    assert str(raised.value) == (
        f"registry 'sqlite:///{database}' is at schema revision 0002 and this fedbench needs "
        f"{connection.schema.head_revision()}; it is read-only here: open it once with write access (e.g. `fedbench runs` "
        "as a user or worker role that may write it)"
    )
    monkeypatch.setattr(connection.os, "access", lambda path, mode: Path(path) != database and real_access(path, mode))
    assert connection._sqlite_writable(str(tmp_path / "new.db"))  # a file to be made: only its folder counts
    assert connection._sqlite_writable(None)


# ------------------------------------------------------------------------------------------- queries
@pytest.fixture
def filled(registry_url) -> Registry:
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1, paper="a"), entry(2, paper="b"), entry(0xABC, paper="a")])
    with registry.engine.begin() as connection:
        connection.execute(text("UPDATE runs SET status = 'done' WHERE seed = 2"))
        for run in connection.execute(select(runs.c.id, runs.c.seed)).all():
            for round_ in (2, 1):
                values = {"run_id": run.id, "round": round_, "test_acc": run.seed + round_ / 10, "train_loss": 1.0}
                connection.execute(insert(rounds).values(**values))
    return registry


def test_get_run_by_id_or_by_hash_prefix_and_a_missing_run_names_the_registry(filled):
    first = filled.get_run(entry(1)["spec_hash"])
    assert first.seed == 1 and first.spec == {"seed": 1}  # read after the session closed
    assert filled.get_run(first.id).spec_hash == entry(1)["spec_hash"]
    assert filled.get_run(str(first.id)).seed == 1
    assert filled.get_run("0000000000000ab").seed == 0xABC  # a prefix of its hash
    with pytest.raises(RegistryError) as raised:
        filled.get_run("ffff")
    assert str(raised.value) == f"no run 'ffff' in registry {filled.url}; list runs with `fedbench runs`"
    with pytest.raises(RegistryError, match="no run '999'"):
        filled.get_run(999)


def test_runs_by_paper_status_and_hashes_in_the_order_they_were_registered(filled):
    assert [r.seed for r in filled.runs()] == [1, 2, 0xABC]
    assert [r.seed for r in filled.runs(paper="a")] == [1, 0xABC]
    assert [r.seed for r in filled.runs(status="done")] == [2]
    assert [r.seed for r in filled.runs(status="pending", paper="a")] == [1, 0xABC]
    assert [r.seed for r in filled.runs(paper="c")] == []
    hashes = [entry(0xABC)["spec_hash"], entry(1)["spec_hash"], entry(1)["spec_hash"], "f" * 16]
    assert [r.seed for r in filled.runs(spec_hashes=hashes)] == [1, 0xABC]  # each once
    assert filled.runs(spec_hashes=[]) == []
    assert filled.statuses([entry(2)["spec_hash"], entry(1)["spec_hash"], "f" * 16]) == {
        entry(2)["spec_hash"]: "done",
        entry(1)["spec_hash"]: "pending",
    }
    states = {row.spec_hash: row for row in filled.run_states([entry(2)["spec_hash"], entry(1)["spec_hash"]])}
    assert sorted(states) == sorted([entry(2)["spec_hash"], entry(1)["spec_hash"]])
    assert states[entry(2)["spec_hash"]].status == "done" and states[entry(2)["spec_hash"]].seed == 2
    assert filled.run_states([]) == []


def test_curves_come_in_round_order_with_all_or_the_chosen_columns(filled):
    ids = {run.seed: run.id for run in filled.runs()}
    curves = filled.curves([ids[2], ids[1]])
    assert sorted(curves) == sorted([ids[1], ids[2]])
    assert [(row.round, row.test_acc, row.train_loss) for row in curves[ids[2]]] == [(1, 2.1, 1.0), (2, 2.2, 1.0)]
    assert [row.test_acc for row in filled.curve(ids[1])] == [1.1, 1.2]
    chosen = filled.curves([ids[1]], fields=["test_acc"])[ids[1]]
    assert [tuple(row._fields) for row in chosen] == [("run_id", "round", "test_acc")] * 2
    assert [row.test_acc for row in chosen] == [1.1, 1.2]
    assert [tuple(row._fields) for row in filled.curves([ids[1]], fields=[])[ids[1]]] == [("run_id", "round")] * 2
    assert filled.curves([]) == {} and filled.curves([999]) == {999: []}


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
        if refused:
            assert str(raised.value) == (
                f"registry 'sqlite:///{database}' is at schema revision 0002 and this fedbench needs {head}; it is "
                f"read-only here ({opened}): open it once with write access (e.g. `fedbench runs` as a user or "
                "worker role that may write it)"
            )
        else:
            assert str(raised.value) == opened


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


# ------------------------------------------------------------------------------------------- registering
def test_ensure_runs_adds_only_the_new_entries_and_never_changes_a_registered_run(registry_url):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    registry.claim(entry(1)["spec_hash"], worker="w:1")
    registry.ensure_runs([entry(1, paper="other"), entry(2), entry(3)])  # the known one first
    runs = registry.runs()
    assert [(r.seed, r.status, r.paper) for r in runs] == [
        (1, "running", "p"),
        (2, "pending", "p"),
        (3, "pending", "p"),
    ]
    assert all(r.created_at is not None and r.rounds_done == 0 for r in runs)


def test_run_states_over_more_hashes_than_one_chunk_return_each_run_once(registry_url):
    registry = Registry(registry_url)
    count = 501  # one full chunk of 500 and one more run
    with registry.engine.begin() as connection:
        connection.execute(insert(runs), [{"status": "done" if i % 3 else "pending", **entry(i)} for i in range(count)])
    hashes = [entry(i)["spec_hash"] for i in range(count)]
    rows = registry.run_states([*hashes, "f" * 16])
    assert sorted(row.spec_hash for row in rows) == hashes
    assert {row.spec_hash: (row.seed, row.status) for row in rows} == {
        h: (i, "done" if i % 3 else "pending") for i, h in enumerate(hashes)
    }
    assert len(registry.statuses(hashes)) == count and len(registry.runs(spec_hashes=hashes)) == count


def test_the_public_names_of_the_registry_import():
    for module, public in [
        ("fedbench.registry", ["Registry", "default_registry_url"]),
        ("fedbench.registry.claims", ["Heartbeat", "worker_id", "stale_reason", "now"]),
        ("fedbench.vocab.status", ["RunStatus", "FINISHED", "CLAIMABLE", "WAITING", "ENDED"]),
    ]:
        names: dict = {}
        exec(f"from {module} import *", names)
        assert all(name in names for name in public), module


def test_resolve_url_is_the_same_on_the_class_and_on_a_registry(registry_url, monkeypatch):
    monkeypatch.delenv("FEDBENCH_REGISTRY", raising=False)
    registry = Registry(registry_url)
    assert registry.resolve_url(None) == Registry.resolve_url(None) == "sqlite:///registry/fedbench.db"
    assert registry.resolve_url("sqlite:///other.db") == "sqlite:///other.db"


def test_the_claim_timeout_is_ten_missed_heartbeats_of_thirty_seconds():
    """The documented figures (connection.py's comment, docs): a beat every 30 s, a claim free after ten missed beats."""
    assert claims.HEARTBEAT_EVERY.total_seconds() == 30 and claims.STALE_AFTER == 10 * claims.HEARTBEAT_EVERY


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


def test_reset_for_rerun_skips_unfinished_and_unknown_runs_and_forgets_the_checkpoint(registry_url):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1), entry(2), entry(3)])
    for seed in (2, 3):
        run_id = registry.claim(entry(seed)["spec_hash"], worker="w:1")
        registry.record_checkpoint(run_id, "ab" * 32)
        registry.finish(run_id, "interrupted" if seed == 3 else "done", summary={"best": 1.0})
    done, interrupted = registry.get_run(entry(2)["spec_hash"]), registry.get_run(entry(3)["spec_hash"])
    assert (
        done.checkpoint_sha256 is None and interrupted.checkpoint_sha256 == "ab" * 32
    )  # (finish: only a finished run's)
    registry.record_checkpoint(done.id, "cd" * 32)
    # unknown and unfinished runs first: they are skipped, the finished one after them is still reset
    registry.reset_for_rerun(["f" * 16, entry(1)["spec_hash"], entry(3)["spec_hash"], entry(2)["spec_hash"]])
    assert registry.statuses([entry(n)["spec_hash"] for n in (1, 2, 3)]) == {
        entry(1)["spec_hash"]: "pending",
        entry(2)["spec_hash"]: "pending",
        entry(3)["spec_hash"]: "interrupted",
    }
    assert registry.checkpoint_sha256(done.id) is None  # "None if it wrote none since it was last reset"
    assert registry.checkpoint_sha256(interrupted.id) == "ab" * 32  # an unfinished run keeps its checkpoint to resume
    assert registry.get_run(done.id).summary == {}
