"""The registry's ORM tables (fedbench/registry/tables.py) are exactly what its migrations build: a column, a type, a
length, an index, a unique or foreign-key constraint changed in the tables without a migration (or the other way
round) is a persisted-schema change that would break older registries, and Alembic's comparison names it. And a run
entered with only its identity gets the documented defaults."""

from __future__ import annotations

import sqlite3

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import String, create_engine, inspect

from fedbench.registry import Registry
from fedbench.registry.schema import upgrade
from fedbench.registry.tables import metadata
from registry_fixtures import FIXTURE


def differences(url: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return [d for d in compare_metadata(context, metadata) if not _version_table(d)]
    finally:
        engine.dispose()


def _version_table(difference) -> bool:
    return difference[0] == "remove_table" and difference[1].name == "alembic_version"


def declared_and_built(url: str) -> tuple[dict, dict]:
    """Per table: (primary-key columns, {string column: length}) as the ORM declares them and as the database has
    them. Alembic's comparison skips both: it compares no primary keys, and no length where one side has none."""
    engine = create_engine(url)
    try:
        inspector = inspect(engine)
        declared, built = {}, {}
        for name, table in metadata.tables.items():
            declared[name] = (
                sorted(c.name for c in table.primary_key.columns),
                {c.name: c.type.length for c in table.columns if isinstance(c.type, String)},
            )
            columns = inspector.get_columns(name)
            built[name] = (
                sorted(inspector.get_pk_constraint(name)["constrained_columns"]),
                {c["name"]: c["type"].length for c in columns if isinstance(c["type"], String)},
            )
        return declared, built
    finally:
        engine.dispose()


def test_a_new_registry_has_exactly_the_tables_columns_and_indexes_the_orm_declares(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    engine = create_engine(url)
    upgrade(engine)
    engine.dispose()
    assert differences(url) == []
    declared, built = declared_and_built(url)
    assert declared == built
    assert declared["rounds"][0] == ["round", "run_id"]  # one row per (run, round)


def test_a_migrated_0_1_0_registry_has_exactly_what_the_orm_declares(tmp_path):
    database = tmp_path / "old.db"
    with sqlite3.connect(database) as connection:
        connection.executescript(FIXTURE.read_text())
    url = f"sqlite:///{database}"
    engine = create_engine(url)
    upgrade(engine)
    engine.dispose()
    assert differences(url) == []
    declared, built = declared_and_built(url)
    assert declared == built


def test_the_comparison_notices_a_schema_change(tmp_path):
    """The check above can fail: a registry missing an index and with a column of another length differs."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    engine = create_engine(url)
    upgrade(engine)
    engine.dispose()
    with sqlite3.connect(tmp_path / "new.db") as connection:
        index = connection.execute("SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='runs'").fetchone()
        connection.execute(f"DROP INDEX {index[0]}")
    assert differences(url) != []


def test_a_run_entered_with_its_identity_only_gets_the_documented_defaults(registry_url):
    identity = dict(
        spec_hash="ab" * 8, spec={"a": 1}, paper="p", recipe="r", algorithm="fedavg", dataset="d", seed=0, scale="full"
    )
    registry = Registry(registry_url)
    registry.ensure_runs([identity])
    row = registry.get_run("ab" * 8)
    assert row.status == "pending" and row.rounds_done == 0 and row.synthetic is False
    assert (row.labels, row.targets, row.summary, row.provenance) == ({}, [], {}, {})
    assert row.error is None and row.diverged_round is None and row.checkpoint_sha256 is None
    assert row.created_at is not None and row.started_at is None
