"""Where and with what a run was produced, and what it cost in memory (``PeakMemory``)."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

import fedbench
from fedbench.errors import CodeChanged
from fedbench.vocab.provenance import RAY, SLURM

PACKAGE = Path(fedbench.__file__).resolve().parent  # fedbench's own code (a folder of a checkout, or installed)

# What names a Slurm job in its environment: the job (an array task's own id), the array it belongs to and its index
# there (the log of ``submitit``'s task N of array A is ``A_N_log.out``), how often it was requeued, and its node.
SLURM_VARIABLES = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "restart_count": "SLURM_RESTART_COUNT",
    "node": "SLURMD_NODENAME",
}


def code_fingerprint(package: Path = PACKAGE) -> str | None:
    """The code of the package at ``package`` as it is on disk now, in a git checkout: a digest of the tree HEAD holds
    for it, its uncommitted changes and the names of its untracked files; None outside a checkout (an installed
    package is not edited under a worker) or without git."""
    digest = hashlib.sha256()
    commands = (
        ["rev-parse", "HEAD:./"],
        ["diff", "--no-ext-diff", "HEAD", "--", "."],
        ["ls-files", "-o", "--exclude-standard", "--", "."],
    )
    try:
        for command in commands:
            done = subprocess.run(["git", *command], cwd=package, capture_output=True, timeout=10)
            if done.returncode != 0:
                return None
            digest.update(done.stdout + b"\0")
    except (OSError, subprocess.SubprocessError):
        return None
    return digest.hexdigest()


def check_code_unchanged(started_with: str | None) -> None:
    """fedbench's code on disk is still ``started_with`` (``code_fingerprint`` when the worker started); else a
    ``CodeChanged``. Python imports a module when it is first used, so a worker whose checkout was edited under it
    would train the next run with a mix of the old code and the new, and record it under one commit."""
    if started_with is not None and code_fingerprint() != started_with:
        raise CodeChanged(
            "fedbench's code changed on disk since this worker started (a commit or an edit under fedbench/): "
            "run `fedbench run` again to train the remaining runs with the new code"
        )


@lru_cache(maxsize=1)
def git_state() -> tuple[str | None, bool | None]:
    root = PACKAGE.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return None, None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return commit.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu:{platform.processor() or platform.machine()} threads={torch.get_num_threads()}"


def gpu_info(device: torch.device) -> dict[str, Any] | None:
    """The GPU a run trains on: its index among the visible devices, model name, compute capability, memory and
    (where PyTorch exposes it) UUID — which physical card, when ``CUDA_VISIBLE_DEVICES`` renumbers them."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    properties = torch.cuda.get_device_properties(index)
    uuid = getattr(properties, "uuid", None)
    return {
        "index": index,
        "name": properties.name,
        "capability": f"{properties.major}.{properties.minor}",
        "memory_bytes": int(properties.total_memory),
        "uuid": str(uuid) if uuid is not None else None,
    }


def ray_info() -> dict[str, Any] | None:
    """Inside a Ray task (``--executor ray``): its node, the resources Ray assigned it (a fractional GPU with
    ``--gpus-per-run 0.25``) and the GPU ids Ray made visible to it; None elsewhere."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    if context.worker.mode != ray.WORKER_MODE:  # the driver (fedbench run itself), not a task
        return None
    return {
        "node_id": context.get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "resources": dict(context.get_assigned_resources()),
        "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
    }


def slurm_info() -> dict[str, str] | None:
    """Inside a Slurm job (``--executor slurm``): the job, array task, requeue count and node that trained the run,
    as Slurm names them in the job's environment; None elsewhere."""
    if "SLURM_JOB_ID" not in os.environ:
        return None
    return {key: os.environ[name] for key, name in SLURM_VARIABLES.items() if name in os.environ}


def provenance(device: torch.device, **settings: Any) -> dict:
    """Where and with what a run was produced; ``settings``: the run's non-spec choices to record with it (the
    training path that trained it, TF32, ``torch.compile`` …)."""
    commit, dirty = git_state()
    gpu = gpu_info(device)
    ray = ray_info()
    slurm = slurm_info()
    return {
        "fedbench_version": fedbench.__version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "device": device_name(device),
        "host": socket.gethostname(),
        **({"gpu": gpu} if gpu is not None else {}),
        **({RAY: ray} if ray is not None else {}),
        **({SLURM: slurm} if slurm is not None else {}),
        **settings,
    }


class PeakMemory:
    """The peak memory of one run, recorded in its provenance as ``peak_memory`` (LG-Mix Table 9).

    CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` at the start — the peak of the
    tensors PyTorch allocated on the device during the run (the paper's measure), without the caching allocator's
    reserve or the CUDA context. CPU: the growth of the process's peak resident set during the run — Linux's
    VmHWM, reset at the start through ``/proc/self/clear_refs``, minus the resident set at the start; it counts
    every allocation of the process (data loaded before the run is in the start value), so it is not comparable
    with GPU numbers. Where the peak cannot be reset (not Linux, no permission) the value is None with the reason:
    a lifetime peak would mostly measure earlier runs of the same process.

    A resumed run measures the part trained after the resume.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.start_rss: int | None = None
        self.reason: str | None = None

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")  # Linux ≥ 4.0: reset the peak RSS (VmHWM) to the RSS
            self.start_rss = _status_bytes("VmRSS")
        except (OSError, ValueError) as exc:
            self.reason = f"the process's peak resident set cannot be reset here ({type(exc).__name__}: {exc})"

    def result(self) -> dict[str, Any]:
        """``{"bytes": int | None, "measure": ..., ["reason": ...]}``: the run's provenance entry ``PEAK_MEMORY``."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return {"bytes": int(torch.cuda.max_memory_allocated(self.device)), "measure": "cuda_max_allocated"}
        if self.start_rss is None:
            return {"bytes": None, "measure": "n/a", "reason": self.reason or "not started"}
        try:
            peak = _status_bytes("VmHWM")
        except (OSError, ValueError) as exc:
            return {"bytes": None, "measure": "n/a", "reason": f"VmHWM unreadable ({exc})"}
        return {"bytes": max(0, peak - self.start_rss), "measure": "cpu_peak_rss_growth"}


def _status_bytes(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` in bytes."""
    found = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    if found is None:
        raise ValueError(f"no {field} in /proc/self/status")
    return int(found.group(1)) * 1024
