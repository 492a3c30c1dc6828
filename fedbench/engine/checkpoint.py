"""One atomic checkpoint file per run: everything a resumed run needs.

Training randomness is derived from (seed, stream, round, client) keys (``fedbench.seeding``), so a
checkpoint holds no RNG state: round, global weights and buffers, server state, client states.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)  # atomic on POSIX: a reader sees the old or the new file, never half
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, spec_hash: str, device: torch.device) -> dict[str, Any] | None:
    if not path.exists():
        return None
    payload = torch.load(path, map_location=device, weights_only=False)
    if payload.get("spec_hash") != spec_hash:
        return None
    return payload
