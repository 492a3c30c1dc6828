"""Disk full or read-only while a checkpoint or the registry is written: the run stops with one
line naming the file (or the registry) and the cause and saying what to do; the previous checkpoint and every
finished round survive; the next `fedbench run` resumes and finishes with exactly the curve of an uninterrupted run.

The faults are injected where the machine would raise them: the checkpoint's file writes (``os`` as the checkpoint
module sees it) and the registry's database driver (SQLAlchemy's ``do_execute`` dialect event, which raises
SQLite's own error there). Two real ones are made with ``unshare -m`` (slow; skipped, with the reason, where a mount
namespace cannot be had): a small tmpfs that fills up and a read-only bind mount."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from fedbench.checkpoint import atomic
from fedbench.checkpoint import format as checkpoint_module
from fedbench.cli import app
from fedbench.execution import worker
from fedbench.registry import Registry, connection

RECIPE = """
paper = "faulttest"
name = "writefault"
seeds = [0]

[setup]
algorithm = "ALGORITHM"
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = HIDDEN }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 2
rounds = 6
batch_size = 32
optimizer = { lr = 0.05, momentum = 0.9 }
"""
FAIL_AT = 3  # the round whose write fails


def write_recipe(folder: Path, hidden: int = 16, algorithm: str = "scaffold") -> Path:
    recipe = folder / "faults.toml"
    recipe.write_text(RECIPE.replace("HIDDEN", str(hidden)).replace("ALGORITHM", algorithm))
    return recipe


def run_cli(recipe: Path, url: str):
    return CliRunner().invoke(app, ["run", str(recipe), "--registry", url, "--device", "cpu"])


def the_run(url: str):
    (run,) = Registry(url).runs()
    return run


def curve(url: str) -> list[tuple]:
    run = the_run(url)
    assert run.status == "done", (run.status, run.error)
    return [(r.round, r.test_acc, r.test_loss, r.train_loss) for r in Registry(url).curve(run.id)]


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> list[tuple]:
    """The curve of the uninterrupted run."""
    folder = tmp_path_factory.mktemp("straight")
    url = f"sqlite:///{folder / 'registry' / 'fedbench.db'}"
    assert run_cli(write_recipe(folder), url).exit_code == 0
    return curve(url)


def one_line_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------ injected faults: the checkpoint file


class FaultyFiles:
    """``os`` as the atomic writes (``checkpoint/atomic.py``) see it, except that the ``fail_at``-th checkpoint file opened for writing
    takes half of its first write and then raises ``OSError(code)`` (the disk filled up, or was remounted read-only,
    mid-write). Records the checkpoint file in ``folder`` (the run's only one) as it was just before that write."""

    def __init__(self, fail_at: int, code: int, folder: Path):
        self.fail_at, self.code, self.folder, self.opened = fail_at, code, folder, 0
        self.before: bytes | None = None

    def __getattr__(self, name: str):
        return getattr(os, name)

    def fdopen(self, fd: int, mode: str = "r"):
        handle = os.fdopen(fd, mode)
        if ".clients" in os.readlink(f"/proc/self/fd/{fd}"):  # a client-state file, not the checkpoint itself
            return handle
        self.opened += 1
        if self.opened != self.fail_at:
            return handle
        previous = list(self.folder.glob("*.pt"))
        self.before = previous[0].read_bytes() if previous else None
        code = self.code

        class Failing:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                handle.close()

            def write(self, data):
                handle.write(bytes(data)[: len(data) // 2])
                handle.flush()
                raise OSError(code, os.strerror(code))

        return Failing()


@pytest.mark.parametrize(
    "code, cause, remedy",
    [
        (errno.ENOSPC, "disk full (No space left on device)", "free space on that disk"),
        (errno.EROFS, "read-only file system", "make it writable"),
        (errno.EDQUOT, "disk quota exceeded", "free space within the quota"),
    ],
)
def test_a_checkpoint_write_that_fails_stops_the_run_keeps_the_previous_checkpoint_and_resumes(
    tmp_path, monkeypatch, straight, code, cause, remedy
):
    recipe = write_recipe(tmp_path)
    url = f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    files = FaultyFiles(FAIL_AT, code, tmp_path / "registry" / "checkpoints")
    monkeypatch.setattr(atomic, "os", files)
    result = run_cli(recipe, url)
    monkeypatch.undo()

    assert result.exit_code == 2, result.output
    line = one_line_error(result)
    run = the_run(url)
    path = Registry(url).checkpoint_path(run.spec_hash)
    assert f"cannot write checkpoint {path}: {cause}; {remedy}" in line
    assert f"run {run.spec_hash} resumes from round {FAIL_AT - 1}" in line
    # recorded as failed with that line (no traceback), never as done or diverged
    assert run.status == "failed" and run.error == line.removeprefix("error: ")
    # the previous checkpoint is the file it was, still bound to the run; no temporary file is left
    assert files.before is not None and path.read_bytes() == files.before
    assert run.checkpoint_sha256 == sha256(path)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, f"{path.name}.clients"]
    assert not list(path.parent.rglob("*.tmp"))
    # the failing round was logged before its checkpoint; it is redone on resume
    assert [r.round for r in Registry(url).curve(run.id)] == list(range(1, FAIL_AT + 1))

    # the second session's own time stopped (a clock that never moves): its wall time is then the first session's
    # kept rounds, as they were timed
    monkeypatch.setattr(worker, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    again = run_cli(recipe, url)
    monkeypatch.undo()
    assert again.exit_code == 0, again.output
    assert "not used" not in again.output  # the checkpoint was accepted: resumed, not restarted
    resumed = the_run(url)
    assert resumed.provenance["data"]["resumed_from"] == FAIL_AT - 1
    kept = [r.wall_seconds for r in Registry(url).curve(resumed.id) if r.round <= FAIL_AT - 1]
    assert resumed.wall_seconds == pytest.approx(sum(kept)) and sum(kept) > 0
    assert curve(url) == straight


def test_a_first_checkpoint_that_cannot_be_written_says_the_run_starts_again(tmp_path, monkeypatch, straight):
    recipe = write_recipe(tmp_path)
    url = f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    monkeypatch.setattr(atomic, "os", FaultyFiles(1, errno.ENOSPC, tmp_path / "registry" / "checkpoints"))
    result = run_cli(recipe, url)
    monkeypatch.undo()
    assert result.exit_code == 2
    line = one_line_error(result)
    assert "disk full" in line and "resumes from the start (no round was saved)" in line
    assert not [p for p in (tmp_path / "registry" / "checkpoints").rglob("*") if p.is_file()]  # client files too
    assert run_cli(recipe, url).exit_code == 0
    assert curve(url) == straight


# ------------------------------------------------------------------ injected faults: the registry


class FaultyDatabase:
    """Every registry engine of this process gets a ``do_execute`` hook that raises SQLite's ``message`` (as the
    driver would) for the ``fail_at``-th statement starting with ``statement``, and, with ``then_all``, for every
    write after it (the disk stays full)."""

    def __init__(self, monkeypatch, statement: str, fail_at: int, message: str, then_all: bool = False):
        self.statement, self.fail_at, self.message, self.then_all = statement, fail_at, message, then_all
        self.seen, self.failing = 0, False
        create_engine = connection.create_engine

        def hooked(*args, **kwargs):
            engine = create_engine(*args, **kwargs)
            event.listen(engine, "do_execute", self.execute)
            return engine

        monkeypatch.setattr(connection, "create_engine", hooked)

    def execute(self, cursor, statement, parameters, context):
        if statement.startswith(self.statement):
            self.seen += 1
            self.failing = self.failing or self.seen == self.fail_at
        writes = statement.split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE")
        if self.failing and (statement.startswith(self.statement) or (self.then_all and writes)):
            if not self.then_all:
                self.failing = False
            raise sqlite3.OperationalError(self.message)
        return None  # SQLAlchemy executes the statement itself


@pytest.mark.parametrize(
    "statement, message, cause, checkpoint_round",
    [
        # round FAIL_AT is not logged: the checkpoint of the round before is the last one
        ("INSERT INTO rounds", "database or disk is full", "disk full", FAIL_AT - 1),
        # round FAIL_AT is logged and its checkpoint written, but its hash cannot be recorded: the new file must not
        # replace the previous one, whose recorded hash still matches it
        ("UPDATE runs SET checkpoint_sha256", "attempt to write a readonly database", "read-only file system", None),
    ],
)
def test_a_registry_write_that_fails_stops_the_run_and_it_resumes(
    tmp_path, monkeypatch, straight, statement, message, cause, checkpoint_round
):
    recipe = write_recipe(tmp_path)
    url = f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    written = []  # each checkpoint file as written
    save = checkpoint_module.write_all_atomic

    def remembered(files, *args, **kwargs):
        digests = save(files, *args, **kwargs)
        written.extend(path.read_bytes() for path, _ in files if path.suffix == ".pt")  # not the client files
        return digests

    monkeypatch.setattr(checkpoint_module, "write_all_atomic", remembered)
    FaultyDatabase(monkeypatch, statement, FAIL_AT, message)
    result = run_cli(recipe, url)
    monkeypatch.undo()

    assert result.exit_code == 2, result.output
    line = one_line_error(result)
    assert f"cannot write registry '{url}': {cause};" in line and f"resumes from round {FAIL_AT - 1}" in line
    run = the_run(url)
    assert run.status == "failed" and run.error == line.removeprefix("error: ")
    path = Registry(url).checkpoint_path(run.spec_hash)
    assert path.read_bytes() == written[FAIL_AT - 2]  # the checkpoint of round FAIL_AT - 1, unchanged
    assert run.checkpoint_sha256 == sha256(path)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, f"{path.name}.clients"]
    assert not list(path.parent.rglob("*.tmp"))
    logged = [r.round for r in Registry(url).curve(run.id)]
    assert logged == list(range(1, (checkpoint_round or FAIL_AT) + 1))

    again = run_cli(recipe, url)
    assert again.exit_code == 0, again.output
    assert "not used" not in again.output
    assert the_run(url).provenance["data"]["resumed_from"] == FAIL_AT - 1
    assert curve(url) == straight


def run_forked(args: list[str], setup, output: Path) -> int:
    """``fedbench ARGS`` in a forked child (after ``setup()``) that then exits, so that its pid is gone, as a
    `fedbench run` process is once it has stopped; its stderr goes to ``output``. The child's exit code."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            setup()
            result = CliRunner().invoke(app, args)
            output.write_text(result.stderr)
            code = result.exit_code
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)


def test_a_registry_that_cannot_record_the_failure_still_gives_one_line_and_the_next_run_takes_over(tmp_path, straight):
    """The disk stays full: not even the failure can be recorded, so the run is left ``running`` under the stopped
    process; the next `fedbench run` (space freed) takes the dead process's claim over and resumes."""
    recipe = write_recipe(tmp_path)
    url = f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    stderr = tmp_path / "stderr"

    def full_disk() -> None:  # in the child, which exits after the run: the patch is never undone
        FaultyDatabase(pytest.MonkeyPatch(), "INSERT INTO rounds", FAIL_AT, "database or disk is full", then_all=True)

    code = run_forked(["run", str(recipe), "--registry", url, "--device", "cpu"], full_disk, stderr)
    assert code == 2
    (line,) = stderr.read_text().strip().splitlines()
    assert f"cannot write registry '{url}': disk full;" in line and f"resumes from round {FAIL_AT - 1}" in line
    run = the_run(url)
    assert run.status == "running"  # nothing could record its end
    [(_, reason)] = Registry(url).stale_runs()
    assert "is gone" in reason
    path = Registry(url).checkpoint_path(run.spec_hash)
    assert run.checkpoint_sha256 == sha256(path)
    assert [r.round for r in Registry(url).curve(run.id)] == list(range(1, FAIL_AT))

    again = run_cli(recipe, url)
    assert again.exit_code == 0, again.output
    assert the_run(url).provenance["data"]["resumed_from"] == FAIL_AT - 1
    assert curve(url) == straight


def test_write_failures_are_recognised_by_their_cause_and_nothing_else_is():
    from sqlalchemy.exc import OperationalError

    from fedbench.errors import write_failure

    def driver(message: str) -> OperationalError:
        return OperationalError("INSERT", {}, sqlite3.OperationalError(message))

    assert "disk full" in str(write_failure(OSError(errno.ENOSPC, "No space left on device"), "checkpoint x"))
    assert "read-only" in str(write_failure(OSError(errno.EROFS, "Read-only file system"), "checkpoint x"))
    assert "permission denied" in str(write_failure(PermissionError(errno.EACCES, "Permission denied"), "x"))
    assert "disk full" in str(write_failure(driver("database or disk is full"), "registry 'r'"))
    assert "read-only" in str(write_failure(driver("attempt to write a readonly database"), "registry 'r'"))
    assert "disk I/O error" in str(write_failure(driver("disk I/O error"), "registry 'r'"))
    assert write_failure(driver("database is locked"), "registry 'r'") is None
    assert write_failure(driver("no such table: runs"), "registry 'r'") is None
    assert write_failure(OSError(errno.EIO, "Input/output error"), "x") is None
    assert write_failure(ValueError("disk full"), "x") is None


# ------------------------------------------------------------------ real faults: a full tmpfs, a read-only mount


def _can_mount() -> str | None:
    """Why a private mount namespace with a tmpfs cannot be made here, or None when it can."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "no unshare or mount command"
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                f"mount -t tmpfs -o size=1m tmpfs {folder} && mount --bind {folder} {folder}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    return (
        None if probe.returncode == 0 else f"cannot mount in a private namespace (unshare -m): {probe.stderr.strip()}"
    )


MOUNT_PROBLEM = _can_mount()
HIDDEN_BIG = 8192  # a digits_mlp whose checkpoint (2.4 MB: FedAvg keeps only the weights) dwarfs the registry's growth


def in_namespace(script: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(
        ["unshare", "-m", "bash", "-c", script], capture_output=True, text=True, timeout=600, env=environment
    )


@pytest.mark.slow
@pytest.mark.skipif(MOUNT_PROBLEM is not None, reason=str(MOUNT_PROBLEM))
def test_a_full_tmpfs_stops_the_run_with_one_line_and_it_resumes_once_space_is_freed(tmp_path):
    """Registry and checkpoints on a small tmpfs, filled so that a second copy of the checkpoint (the temporary file
    beside the previous one) does not fit: the disk really fills up. Freeing the space, the same command resumes."""
    recipe = write_recipe(tmp_path, HIDDEN_BIG, "fedavg")
    straight_url = f"sqlite:///{tmp_path / 'straight' / 'fedbench.db'}"
    assert run_cli(recipe, straight_url).exit_code == 0
    mount, out = tmp_path / "mount", tmp_path / "out"
    mount.mkdir()
    out.mkdir()
    checkpoint_bytes = (64 * HIDDEN_BIG + HIDDEN_BIG + HIDDEN_BIG * 10 + 10) * 4
    script = textwrap.dedent(
        f"""
        set -u
        mount -t tmpfs -o size=24m tmpfs {mount} || exit 90
        url=sqlite:///{mount}/registry/fedbench.db
        "$PYTHON" -c "from fedbench.registry import Registry; Registry('$url')" || exit 91
        # leave room for the registry's growth and one and a half checkpoints: round 1's checkpoint fits, round 2's
        # temporary file beside it does not
        "$PYTHON" -c "
        import os
        free = os.statvfs('{mount}').f_bavail * os.statvfs('{mount}').f_frsize
        keep = 512 * 1024 + int(1.5 * {checkpoint_bytes})
        with open('{mount}/filler', 'wb') as f:
            os.posix_fallocate(f.fileno(), 0, free - keep)
        " || exit 92
        "$PYTHON" -m fedbench.cli run {recipe} --registry $url --device cpu > {out}/first.out 2> {out}/first.err
        echo $? > {out}/first.rc
        cp -r {mount}/registry {out}/after_failure
        rm {mount}/filler
        "$PYTHON" -m fedbench.cli run {recipe} --registry $url --device cpu > {out}/second.out 2> {out}/second.err
        echo $? > {out}/second.rc
        cp -r {mount}/registry {out}/after_resume
        """
    )
    done = in_namespace(script)
    assert done.returncode == 0, done.stdout + done.stderr
    first_err = (out / "first.err").read_text()
    assert (out / "first.rc").read_text().strip() == "2", first_err
    (line,) = first_err.strip().splitlines()
    assert "disk full (No space left on device)" in line and "free space" in line and "resumes from round 1" in line
    assert "Traceback" not in (out / "first.out").read_text()
    failed_url = f"sqlite:///{out / 'after_failure' / 'fedbench.db'}"
    run = the_run(failed_url)
    assert run.status == "failed" and run.error in line
    checkpoints = list((out / "after_failure" / "checkpoints").iterdir())
    assert [p.name for p in checkpoints] == [f"{run.spec_hash}.pt"]  # no temporary file left
    assert run.checkpoint_sha256 == sha256(checkpoints[0])
    assert (out / "second.rc").read_text().strip() == "0", (out / "second.err").read_text()
    assert "not used" not in (out / "second.out").read_text() + (out / "second.err").read_text()
    resumed_url = f"sqlite:///{out / 'after_resume' / 'fedbench.db'}"
    assert the_run(resumed_url).provenance["data"]["resumed_from"] == 1
    assert curve(resumed_url) == curve(straight_url)


@pytest.mark.slow
@pytest.mark.skipif(MOUNT_PROBLEM is not None, reason=str(MOUNT_PROBLEM))
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_checkpoints_on_a_read_only_mount_stop_the_run_with_one_line(tmp_path, jobs):
    """--checkpoints on a read-only bind mount (which stops root too): the first checkpoint cannot even be created.
    With --jobs 2 the worker process that fails tells `fedbench run`, which says it on one line too."""
    recipe = write_recipe(tmp_path)
    url = f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    source, mount = tmp_path / "source", tmp_path / "mount"
    source.mkdir()
    mount.mkdir()
    script = (
        f"mount --bind {source} {mount} && mount -o remount,bind,ro {mount} || exit 90\n"
        f'exec "$PYTHON" -m fedbench.cli run {recipe} --registry {url} --device cpu --checkpoints {mount} --jobs {jobs}'
    )
    done = in_namespace(script)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"cannot write checkpoint {mount}/" in line and "read-only file system" in line
    assert "make it writable" in line and "resumes from the start" in line
    run = the_run(url)
    assert run.status == "failed" and "Traceback" not in (run.error or "")
    assert not list(source.iterdir())
    again = run_cli(recipe, url)  # the folder writable again (no mount here): the run trains
    assert again.exit_code == 0, again.output
