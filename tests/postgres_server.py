"""A throwaway PostgreSQL server for the test session: ``initdb`` into a temporary folder, a Unix socket in that
folder and a free TCP port on 127.0.0.1, ``fsync=off`` (nothing of it has to survive), stopped and deleted at the
end. PostgreSQL refuses to run as root, so under root the server runs as the ``postgres`` system user (the Debian
package creates it) or ``nobody``, through ``runuser``.

``find_server_binaries`` looks for ``initdb`` in PATH, then in ``/usr/lib/postgresql/*/bin`` (Debian/Ubuntu's
``postgresql`` package); ``.ci/run`` installs that package when it can. When no server can be had, the tests that
need one skip and say why (``unavailable_reason``)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SERVER_USER = "fedbench"  # the database superuser initdb creates (trust authentication on a private server)


def find_server_binaries() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres, or None."""
    candidates = []
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(os.path.realpath(found)).parent)  # /usr/local/bin/initdb may link into the real folder
        candidates.append(Path(found).parent)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]  # newest first
    for folder in candidates:
        if all((folder / name).exists() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _unprivileged_user() -> pwd.struct_passwd | None:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


class PostgresServer:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="fedbench-pg-"))
        self.data = self.base / "data"
        self.port = _free_port()
        self.prefix: list[str] = []
        self.databases = 0
        if os.geteuid() == 0:
            user = _unprivileged_user()
            if user is None or shutil.which("runuser") is None:
                raise RuntimeError("running as root, and neither a postgres/nobody user nor runuser to drop root")
            os.chown(self.base, user.pw_uid, user.pw_gid)
            self.prefix = ["runuser", "-u", user.pw_name, "--"]

    def _run(self, *args: str) -> None:
        result = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = self.base / "server.log"
            tail = log.read_text()[-1500:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {result.stderr.strip()[-1500:]} {tail}")

    def start(self) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SERVER_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        )
        self.start_again()

    def start_again(self) -> None:
        """Start the server on its data folder (made by ``start``), on the same port, and wait until it accepts."""
        options = (
            f"-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c listen_addresses=127.0.0.1 "
            f"-c port={self.port} -c unix_socket_directories={self.base} -c max_connections=200"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.base / "server.log"),
            "-w",
            "start",
        )

    def shut_down(self) -> None:
        """Stop the server as an administrator restarting it would (``-m fast``: every session is told "terminating
        connection due to administrator command"), keeping its data for ``start_again``."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        import psycopg

        self.databases += 1
        name = f"test_{self.databases}"
        with psycopg.connect(host="127.0.0.1", port=self.port, user=SERVER_USER, dbname="postgres") as connection:
            connection.autocommit = True
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                [*self.prefix, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(self.base, ignore_errors=True)


def start_server() -> tuple[PostgresServer | None, str]:
    """A started server, or None and the reason none could be had."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None, "psycopg is not installed (pip install 'psycopg[binary]', part of fedbench's dev extra)"
    bindir = find_server_binaries()
    if bindir is None:
        return (
            None,
            "no PostgreSQL server binaries (initdb) in PATH or /usr/lib/postgresql/*/bin: apt-get install postgresql",
        )
    server = None
    try:
        server = PostgresServer(bindir)
        server.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        if server is not None:
            server.stop()
        return None, f"could not start a PostgreSQL server from {bindir}: {' '.join(str(exc).split())[:400]}"
    return server, ""


@contextmanager
def server_or_skip() -> Iterator[PostgresServer]:
    """A started server for a test fixture, stopped after it; the test skips, saying why, where none can be had."""
    import pytest  # local: the load benchmark uses start_server without pytest

    server, reason = start_server()
    if server is None:
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    try:
        yield server
    finally:
        server.stop()
