"""Where and with what a run was produced."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import torch

import fedbench


@lru_cache(maxsize=1)
def git_state() -> tuple[str | None, bool | None]:
    root = Path(fedbench.__file__).resolve().parent.parent
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


def provenance(device: torch.device) -> dict:
    commit, dirty = git_state()
    return {
        "fedbench_version": fedbench.__version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "device": device_name(device),
        "host": socket.gethostname(),
    }
