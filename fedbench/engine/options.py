"""How a process trains a run: everything ``engine.run`` takes besides the spec and the sink.

None of it changes a run's result (the spec alone does). ``settings`` (``fedbench.settings.Settings``) says how the
run trains: its data root and verification, the training path, the speed switches, the evaluation batch size and
the client-state memory. The rest are this process's own objects, which no other process could use: the device, the
cache of loaded data sets, the checkpoint with its ledger and mirror, and who hears of the run's progress. A caller
(``execution``, a benchmark, a test) builds one ``EngineOptions`` with what it knows and leaves the rest at the
defaults, which train on the CPU, with the settings' defaults, without a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from fedbench.engine.accel import Acceleration
from fedbench.settings import Settings

if TYPE_CHECKING:
    from fedbench.checkpoint.format import CheckpointLedger, CheckpointMirror
    from fedbench.data.federated import ArraysCache
    from fedbench.engine.loop import RoundRecord


DEFAULT_SETTINGS = Settings()


@dataclass(frozen=True)
class EngineOptions:
    settings: Settings = DEFAULT_SETTINGS  # how the run trains (``fedbench.settings``)
    device: torch.device | str = "cpu"
    # the caller's cache of loaded data sets (a worker's, shared by the runs it trains; None: loaded anew)
    arrays: ArraysCache | None = None
    # CUDA speed switches (``engine/accel.py``); None: the settings' ``fast`` and ``compile`` for the device
    acceleration: Acceleration | None = None
    # the checkpoint written after every round and resumed from (None: none). The ledger (the registry) records the
    # sha256 of each one written and vouches for the one read back; without it a checkpoint is checked for format,
    # spec and layout only. The mirror is storage each checkpoint is copied to (``--checkpoints URL``) before the
    # ledger records it.
    checkpoint_path: Path | None = None
    checkpoint_ledger: CheckpointLedger | None = None
    checkpoint_mirror: CheckpointMirror | None = None
    on_round: Callable[[RoundRecord], None] | None = None  # each round, once it is logged and checkpointed
    on_warning: Callable[[str], None] | None = None  # one line, e.g. why a checkpoint was not used

    def with_settings(self, **changes: object) -> EngineOptions:
        """These options with the named settings changed (a test or the contract checker changes one or two)."""
        return replace(self, settings=replace(self.settings, **changes))  # type: ignore[arg-type]

    def accelerated(self, device: torch.device) -> Acceleration:
        """The speed switches this run trains with on ``device``: ``acceleration`` when given, else the settings'."""
        if self.acceleration is not None:
            return self.acceleration
        return Acceleration.for_device(device, fast=self.settings.fast, compile=self.settings.compile)


__all__ = ["EngineOptions"]
