"""`--checkpoints URL`: checkpoints on object storage through fsspec. A worker trains from a local copy
and mirrors every checkpoint (client-state files first, then the checkpoint) to the URL; a run whose worker died
resumes on another machine, from another local copy, with the curve of an uninterrupted run.

The storage is fsspec's in-memory file system for the in-process tests and a real S3 API (moto's server on
127.0.0.1, driven by s3fs, as a user's bucket would be) for the kill test across processes."""

from __future__ import annotations

import shutil
import signal
import socket

import fsspec
import pytest
from typer.testing import CliRunner

from algorithm_fixtures import Sink, make_spec, run_until
from fedbench.checkpoint.format import read_checkpoint
from fedbench.checkpoint.location import client_state_folder, resolve_checkpoints
from fedbench.checkpoint.mirror import CheckpointMirror, CheckpointStorageError, check_reachable
from fedbench.cli import app
from fedbench.engine import EngineOptions, run
from fedbench.errors import ConfigError
from fedbench.registry import Registry
from fedbench.urls import hide_userinfo
from tests.integration.test_kill_resume import RECIPE, HeldFedbench

runner = CliRunner()
SCAFFOLD_RECIPE = RECIPE.replace('algorithm = "fedprox"\nalgorithm_params = { mu = 0.1 }', 'algorithm = "scaffold"')
assert SCAFFOLD_RECIPE != RECIPE


@pytest.fixture
def memory_url(request):
    """A fresh folder of fsspec's in-memory file system (shared by everything in this process)."""
    url = f"memory://fedbench-tests/{request.node.name}"
    yield url
    fs = fsspec.filesystem("memory")
    if fs.exists(url):
        fs.rm(url, recursive=True)


def remote_names(url: str, spec_hash: str) -> tuple[list[str], list[str]]:
    fs = fsspec.filesystem("memory")
    root = url.split("://", 1)[1]
    top = sorted(p.rsplit("/", 1)[1] for p in fs.ls(root, detail=False)) if fs.exists(root) else []
    folder = f"{root}/{spec_hash}.pt.clients"
    clients = sorted(p.rsplit("/", 1)[1] for p in fs.ls(folder, detail=False)) if fs.exists(folder) else []
    return top, clients


def test_a_run_resumes_from_the_storage_into_a_new_local_copy(tmp_path, memory_url):
    """SCAFFOLD (a client-state file per trained client): after every round the storage holds the checkpoint and
    exactly the client files its manifest names; the local copy is then thrown away, and a new one fetched from the
    storage resumes at round 2 with the uninterrupted curve."""
    spec = make_spec("scaffold", rounds=4, num_clients=6, clients_per_round=2)
    straight = Sink()
    run(spec, straight, EngineOptions(checkpoint_path=tmp_path / "straight.pt"))

    machine_a = tmp_path / "a" / f"{spec.spec_hash}.pt"
    mirror = CheckpointMirror(memory_url, spec.spec_hash)
    seen = []

    def after_round(record):
        manifest = read_checkpoint(machine_a, spec.spec_hash)["client_files"]
        seen.append(remote_names(memory_url, spec.spec_hash))
        assert seen[-1] == (
            [f"{spec.spec_hash}.pt", f"{spec.spec_hash}.pt.clients"],
            sorted(n for n, _ in manifest.values()),
        )

    sink = Sink()
    run_until(spec, sink, 2, EngineOptions(checkpoint_path=machine_a, checkpoint_mirror=mirror, on_round=after_round))
    assert len(seen) == 2

    machine_b = tmp_path / "b" / f"{spec.spec_hash}.pt"
    CheckpointMirror(memory_url, spec.spec_hash).fetch(machine_b)
    assert machine_b.read_bytes() == machine_a.read_bytes()
    assert sorted(p.name for p in client_state_folder(machine_b).iterdir()) == seen[-1][1]
    result = run(spec, sink, EngineOptions(checkpoint_path=machine_b, checkpoint_mirror=mirror))
    assert result.info["resumed_from"] == 2
    assert [(r.round, r.train_loss, r.test_acc) for r in sink.records] == [
        (r.round, r.train_loss, r.test_acc) for r in straight.records
    ]
    mirror.remove()
    assert remote_names(memory_url, spec.spec_hash) == ([], [])


def test_through_the_cli_a_finished_run_leaves_nothing_on_the_storage(tmp_path, memory_url):
    recipe = tmp_path / "scaffold.toml"
    recipe.write_text(SCAFFOLD_RECIPE.replace("rounds = 12", "rounds = 3"))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    result = runner.invoke(app, ["run", str(recipe), "--registry", url, "--checkpoints", memory_url])
    assert result.exit_code == 0, result.output
    (done,) = Registry(url).runs()
    assert done.status == "done" and remote_names(memory_url, done.spec_hash) == ([], [])
    assert not list(tmp_path.rglob("*.pt*"))  # nor in its local copy (beside the registry)


def test_a_storage_that_refuses_writes_fails_the_run_with_one_line_and_it_resumes_later(
    tmp_path, memory_url, monkeypatch
):
    recipe = tmp_path / "scaffold.toml"
    recipe.write_text(SCAFFOLD_RECIPE.replace("rounds = 12", "rounds = 4"))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    memory = type(fsspec.filesystem("memory"))
    original = memory.put_file
    uploads = []

    def refusing(self, lpath, rpath, *args, **kwargs):
        uploads.append(rpath)
        if len(uploads) > 2 * 5:  # rounds 1-2 (4 client files and the checkpoint each), then the storage refuses
            raise PermissionError(13, "Access Denied")
        return original(self, lpath, rpath, *args, **kwargs)

    monkeypatch.setattr(memory, "put_file", refusing)
    secret = memory_url.replace("memory://", "memory://user:hunter2@")
    result = runner.invoke(app, ["run", str(recipe), "--registry", url, "--checkpoints", memory_url])
    assert result.exit_code == 1
    (failed,) = Registry(url).runs()
    assert failed.status == "failed" and "Traceback" not in (failed.error or "")
    assert f"checkpoint storage {memory_url} cannot be written" in failed.error and "Access Denied" in failed.error
    assert "hunter2" not in hide_userinfo(secret) and hide_userinfo(secret).startswith("memory://***@")

    monkeypatch.setattr(memory, "put_file", original)
    result = runner.invoke(app, ["run", str(recipe), "--registry", url, "--checkpoints", memory_url])
    assert result.exit_code == 0, result.output
    (done,) = Registry(url).runs()
    assert done.status == "done" and done.provenance["data"]["resumed_from"] == 2


def test_the_checkpoints_url_is_checked_before_anything_runs(tmp_path):
    assert resolve_checkpoints("memory://bucket/x/") == "memory://bucket/x"
    with pytest.raises(ConfigError, match="fsspec knows no storage 'nosuch'"):
        resolve_checkpoints("nosuch://bucket/x")
    recipe = tmp_path / "r.toml"
    recipe.write_text(SCAFFOLD_RECIPE)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    result = runner.invoke(app, ["run", str(recipe), "--registry", url, "--checkpoints", "nosuch://me:pw@bucket/x"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "pw" not in result.output and "nosuch" in result.output
    assert not (tmp_path / "r.db").exists()


def test_a_storage_that_cannot_be_reached_is_one_error_before_any_run_is_registered(tmp_path, memory_url, monkeypatch):
    """A refused connection (a wrong host or port, a server down) is found once, before the batch registers its
    runs: exit 2 and no registry, not every run of the batch recorded as failed with the same error."""
    check_reachable(memory_url)  # a storage that answers: its folder need not exist yet
    memory = type(fsspec.filesystem("memory"))

    def refused(self, path, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(memory, "exists", refused)
    with pytest.raises(CheckpointStorageError) as raised:
        check_reachable(memory_url)
    assert str(raised.value).startswith(f"checkpoint storage {memory_url} cannot be reached (Connection refused); ")
    recipe = tmp_path / "r.toml"
    recipe.write_text(SCAFFOLD_RECIPE)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    result = runner.invoke(app, ["run", str(recipe), "--registry", url, "--checkpoints", memory_url])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "cannot be reached (Connection refused)" in result.output
    assert not (tmp_path / "r.db").exists()


# ------------------------------------------------------------------ a real S3 API, across processes
@pytest.fixture
def s3_url(monkeypatch):
    """A bucket on moto's S3 server (127.0.0.1), reached by s3fs through fsspec's configuration variables, which
    subprocesses inherit."""
    server_module = pytest.importorskip("moto.server", reason="moto (the dev extra) runs a local S3 server")
    pytest.importorskip("s3fs", reason="s3fs is fsspec's s3:// driver (the dev extra)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    fsspec.config.conf.setdefault("s3", {})["endpoint_url"] = f"http://127.0.0.1:{port}"
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("fedbench-checkpoints")
    try:
        yield "s3://fedbench-checkpoints/runs"
    finally:
        fsspec.config.conf.get("s3", {}).pop("endpoint_url", None)
        server.stop()


@pytest.mark.slow
def test_a_run_killed_on_one_machine_resumes_on_another_from_s3(tmp_path, s3_url, monkeypatch):
    recipe = tmp_path / "kill.toml"
    recipe.write_text(SCAFFOLD_RECIPE)
    registry = f"sqlite:///{tmp_path / 'shared' / 'r.db'}"
    machine_a, machine_b = tmp_path / "machine-a", tmp_path / "machine-b"
    machine_a.mkdir()
    machine_b.mkdir()

    monkeypatch.chdir(machine_a)
    child = HeldFedbench(["run", str(recipe), "--registry", registry, "--checkpoints", s3_url], hold=3)
    try:
        child.wait_until_held(runs=1)
        child.process.send_signal(signal.SIGKILL)
        child.process.wait()
    finally:
        child.kill()
    (killed,) = Registry(registry).runs()
    assert killed.status == "running" and killed.rounds_done == 3
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    remote = fs.ls(s3_url.split("://")[1], detail=False)
    assert sorted(p.rsplit("/", 1)[1] for p in remote) == [f"{killed.spec_hash}.pt", f"{killed.spec_hash}.pt.clients"]
    shutil.rmtree(tmp_path / "shared" / "checkpoints")  # machine B has no local copy of machine A's

    monkeypatch.chdir(machine_b)
    result = runner.invoke(app, ["run", str(recipe), "--registry", registry, "--checkpoints", s3_url])
    assert result.exit_code == 0, result.output
    (resumed,) = Registry(registry).runs()
    assert resumed.provenance["data"]["resumed_from"] == 3
    fs.invalidate_cache()
    assert not fs.find(s3_url.split("://")[1])  # a finished run leaves nothing there

    straight = f"sqlite:///{tmp_path / 'straight.db'}"
    assert runner.invoke(app, ["run", str(recipe), "--registry", straight]).exit_code == 0
    curves = [
        [(r.round, r.test_acc, r.test_loss, r.train_loss) for r in Registry(u).curve(Registry(u).runs()[0].id)]
        for u in (registry, straight)
    ]
    assert curves[0] == curves[1]
