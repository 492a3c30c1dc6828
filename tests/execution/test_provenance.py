"""A run's provenance (fedbench/execution/provenance.py): the GPU's model, index, capability, memory and UUID are
recorded for a CUDA run (a faked GPU: none is needed) and nothing of a GPU for a CPU run."""

from __future__ import annotations

from types import SimpleNamespace

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
