"""Registry schema versions across fedbench versions, on SQLite and PostgreSQL: an older registry is upgraded
with a notice (on the ``fedbench.registry`` logger, shown by the CLI on stderr) and then reports; a registry from
a newer fedbench (a revision this one does not know) is refused with one line naming both revisions, exit 2,
and is left untouched."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from alembic import command
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from fedbench import __version__
from fedbench.cli import app
from fedbench.errors import RegistryError
from fedbench.registry import Registry
from fedbench.registry.schema import _config, current_revision, head_revision, known_revisions

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


def test_a_new_registry_is_created_without_an_upgrade_notice(any_registry_url, caplog):
    with caplog.at_level(logging.INFO, logger="fedbench.registry"):
        Registry(any_registry_url)
    assert [r for r in caplog.records if r.name == "fedbench.registry"] == []


def test_the_cli_shows_the_upgrade_notice_on_stderr_and_reports(tmp_path):
    from tests.registry.test_migrations import old_registry

    url, _ = old_registry(tmp_path)  # a registry written by fedbench 0.1.0 (no version table)
    result = runner.invoke(app, ["runs", "--registry", url, "--paper", "quickstart", "--json"])
    assert result.exit_code == 0, result.output
    assert f"upgrading registry sqlite:///{tmp_path}" in result.stderr
    assert f"from schema revision 0.1.0 (no version table) to {head_revision()}" in result.stderr
    runs = json.loads(result.stdout)  # the notice stays off stdout, and the runs are listed
    assert len(runs) == 3 and {r["status"] for r in runs} == {"done"}
