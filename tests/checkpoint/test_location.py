"""Where a run's checkpoint lives (``fedbench/checkpoint/location.py``): one answer for the workers, the engine, the
registry and the storage mirror, and the resolution of ``--checkpoints``."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.checkpoint.format import save_checkpoint
from fedbench.checkpoint.location import (
    checkpoint_name,
    client_state_folder,
    is_url,
    registry_checkpoints,
    remove_checkpoint,
    resolve_checkpoints,
    run_checkpoint,
)
from fedbench.checkpoint.mirror import CheckpointMirror
from fedbench.errors import ConfigError
from fedbench.registry import Registry


def test_a_runs_checkpoint_is_beside_the_registry_unless_a_folder_is_given(tmp_path):
    home = tmp_path / "registry"
    assert run_checkpoint("ab12", home) == home / "checkpoints" / "ab12.pt" == registry_checkpoints(home) / "ab12.pt"
    assert run_checkpoint("ab12", home, str(tmp_path / "shared")) == tmp_path / "shared" / "ab12.pt"
    # a storage URL: the worker trains from its local copy beside the registry
    assert run_checkpoint("ab12", home, "s3://bucket/x") == home / "checkpoints" / "ab12.pt"
    registry = Registry(f"sqlite:///{home / 'fedbench.db'}")
    assert registry.checkpoint_path("ab12") == run_checkpoint("ab12", home)
    assert registry.checkpoint_dir == registry_checkpoints(home)


def test_only_a_scheme_other_than_file_names_storage_by_url():
    assert is_url("s3://bucket/x") and is_url("memory://x")
    assert not is_url("file:///tmp/x") and not is_url("/tmp/x") and not is_url("") and not is_url(None)


def test_the_storage_copy_has_the_local_names(tmp_path):
    mirror = CheckpointMirror("memory://bucket/names", "ab12")
    local = run_checkpoint("ab12", tmp_path)
    client = client_state_folder(local) / "3-r1.state"
    save_checkpoint(local, {"spec_hash": "ab12", "round": 1})
    save_checkpoint(client, {"spec_hash": "ab12", "round": 1, "client": 3})
    mirror.publish(local, [client])
    root = mirror.root
    assert mirror.fs.exists(f"{root}/{checkpoint_name('ab12')}")
    assert mirror.fs.exists(f"{root}/{client_state_folder(Path(checkpoint_name('ab12'))).name}/3-r1.state")
    mirror.remove()


def test_the_checkpoints_option_is_an_absolute_folder_or_a_storage_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FEDBENCH_CHECKPOINTS", raising=False)
    assert resolve_checkpoints(None) is None
    assert resolve_checkpoints("ckpt") == str(tmp_path / "ckpt")
    assert resolve_checkpoints(f"file://{tmp_path}/x") == str(tmp_path / "x")
    monkeypatch.setenv("FEDBENCH_CHECKPOINTS", str(tmp_path / "env"))
    assert resolve_checkpoints(None) == str(tmp_path / "env")
    assert resolve_checkpoints("memory://bucket/checkpoints/") == "memory://bucket/checkpoints"  # test_mirror.py
    with pytest.raises(ConfigError, match="fsspec knows no storage 'nosuch'"):
        resolve_checkpoints("nosuch://bucket/checkpoints")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError) as refused:
        resolve_checkpoints("file")
    assert str(refused.value) == f"--checkpoints 'file': {tmp_path / 'file'} is a file; give a folder"
    with pytest.raises(ConfigError) as refused:  # a folder to be made inside a file: refused before any run starts
        resolve_checkpoints("file/ckpt/deeper")
    assert str(refused.value) == f"--checkpoints 'file/ckpt/deeper': {tmp_path / 'file'} is a file; give a folder"


def test_the_client_state_folder_sits_beside_the_checkpoint():
    assert client_state_folder(Path("registry/checkpoints/ab12.pt")) == Path("registry/checkpoints/ab12.pt.clients")


def test_remove_checkpoint_deletes_the_file_and_its_client_states_and_tolerates_neither(tmp_path):
    path = tmp_path / "run.pt"
    save_checkpoint(path, {"spec_hash": "abc", "round": 1})
    save_checkpoint(client_state_folder(path) / "0-r1.state", {"spec_hash": "abc", "round": 1, "client": 0})
    remove_checkpoint(path)
    assert list(tmp_path.iterdir()) == []
    remove_checkpoint(path)  # nothing left: not an error


def test_a_client_state_file_deleted_by_someone_else_meanwhile_does_not_stop_the_removal(tmp_path, monkeypatch):
    path = tmp_path / "run.pt"
    save_checkpoint(path, {"spec_hash": "abc", "round": 1})
    folder = client_state_folder(path)
    for name in ("0-r1.state", "1-r1.state"):
        save_checkpoint(folder / name, {"spec_hash": "abc", "round": 1, "client": 0})
    real_iterdir = Path.iterdir

    def listing_then_other_deletes(self):
        listed = list(real_iterdir(self))
        (folder / "1-r1.state").unlink(missing_ok=True)  # a worker that lost its claim, cleaning up meanwhile
        return iter(listed)

    monkeypatch.setattr(Path, "iterdir", listing_then_other_deletes)
    remove_checkpoint(path)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
