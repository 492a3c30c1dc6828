"""A run's provenance (fedbench/execution/provenance.py): the GPU's model, index, capability, memory and UUID are
recorded for a CUDA run (a faked GPU: none is needed) and nothing of a GPU for a CPU run; the fingerprint of the
package's code on disk follows every edit of the package, in a real git repository, and nothing outside it."""

from __future__ import annotations

import shutil
import subprocess
from types import SimpleNamespace

import pytest
import torch


def test_gpu_model_and_index_go_into_provenance(monkeypatch):
    from fedbench.execution.provenance import provenance

    properties = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=85 * 2**30, uuid="GPU-1")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: properties)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: properties.name)
    info = provenance(torch.device("cuda:2"))
    assert info["gpu"] == {
        "index": 2,
        "name": "NVIDIA H100 80GB HBM3",
        "capability": "9.0",
        "memory_bytes": 85 * 2**30,
        "uuid": "GPU-1",
    }
    assert "gpu" not in provenance(torch.device("cpu"))


def test_a_slurm_job_s_ids_go_into_provenance_and_nothing_of_slurm_elsewhere(monkeypatch):
    """The job, array task, requeue count and node: what finds the job's log (the keys: fedbench.vocab.provenance)."""
    from fedbench.execution.provenance import provenance
    from fedbench.vocab.provenance import SLURM

    for name in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT", "SLURMD_NODENAME"):
        monkeypatch.delenv(name, raising=False)
    assert SLURM not in provenance(torch.device("cpu"))
    for name, value in (
        ("SLURM_JOB_ID", "43"),
        ("SLURM_ARRAY_JOB_ID", "41"),
        ("SLURM_ARRAY_TASK_ID", "2"),
        ("SLURMD_NODENAME", "gpu07"),
    ):
        monkeypatch.setenv(name, value)
    assert provenance(torch.device("cpu"))[SLURM] == {
        "job_id": "43",
        "array_job_id": "41",
        "array_task_id": "2",
        "node": "gpu07",
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_code_fingerprint_follows_the_package_on_disk(tmp_path):
    from fedbench.execution.provenance import code_fingerprint

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "method.py").write_text("STEP = 1\n")
    (tmp_path / "README.md").write_text("notes\n")
    assert code_fingerprint(package) is None  # not a checkout yet
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "first")
    committed = code_fingerprint(package)
    assert committed is not None and code_fingerprint(package) == committed
    (package / "method.py").write_text("STEP = 2\n")
    edited = code_fingerprint(package)
    assert edited != committed
    (package / "method.py").write_text("STEP = 1\n")
    assert code_fingerprint(package) == committed  # the edit undone
    (tmp_path / "README.md").write_text("more notes\n")
    git("commit", "-qam", "docs only")
    assert code_fingerprint(package) == committed  # a commit outside the package leaves it
    (package / "new_method.py").write_text("")
    untracked = code_fingerprint(package)
    assert untracked not in (committed, edited)
    git("add", ".")
    git("commit", "-qm", "a new module")
    assert code_fingerprint(package) not in (committed, edited, untracked)  # HEAD's tree of the package moved
