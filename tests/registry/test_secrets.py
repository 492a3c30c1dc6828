"""A registry URL's password is never shown or stored (docs/security.md, "Registry credentials").

Every command (run, dry run, runs, show, report) is run with a password-bearing URL: one whose server cannot be
reached (no driver installed, or nothing listening), one whose driver's error text quotes the whole URL, and one
that works (a PostgreSQL URL whose engine is redirected to a SQLite file, since SQLite URLs carry no password).
The password must appear in no byte of stdout or stderr, nor anywhere in the registry file."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine as real_create_engine
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.registry import connection
from fedbench.urls import display_url, password_of, scrub

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


def test_display_url_masks_the_password_and_scrub_removes_every_spelling():
    assert display_url(URL) == "postgresql://alice:***@127.0.0.1:1/fedbench"
    assert display_url("sqlite:///registry/fedbench.db") == "sqlite:///registry/fedbench.db"
    encoded = "postgresql://bob:p%40ss%2Fw@db/x"  # the password "p@ss/w", URL-quoted as a URL must spell it
    assert password_of(encoded) == "p@ss/w"
    text = scrub(f"could not connect with {encoded}: password 'p@ss/w' rejected (p%40ss%2Fw)", encoded)
    assert "p@ss/w" not in text and "p%40ss%2Fw" not in text and "bob:***@db" in text
    # unparseable by SQLAlchemy (a typo in the scheme) still masked
    assert PASSWORD not in display_url(f"postgres ql://alice:{PASSWORD}@h/db")


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
