"""How a process trains a run: everything ``engine.run`` takes besides the spec and the sink.

None of it changes a run's result (the spec alone does): where the run trains and with which speed switches, which
path trains its clients, where its data and its checkpoint lie, how much client state stays in memory, and who
hears of its progress. A caller (``execution``, a benchmark, a test) builds one ``EngineOptions`` with what it
knows and leaves the rest at the defaults, which train on the CPU, sequentially, without a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from fedbench.algorithms.client_states import DEFAULT_MEMORY_BUDGET
from fedbench.algorithms.context import EVAL_BATCH_SIZE
from fedbench.engine.accel import Acceleration

if TYPE_CHECKING:
    from fedbench.checkpoint.format import CheckpointLedger, CheckpointMirror
    from fedbench.data.federated import ArraysCache
    from fedbench.engine.loop import RoundRecord


@dataclass(frozen=True)
class EngineOptions:
    device: torch.device | str = "cpu"
    # the data: where data sets are kept (None: the default folder), whether their checksums are verified, and the
    # caller's cache of loaded data sets (a worker's, shared by the runs it trains; None: loaded anew)
    data_root: str | Path | None = None
    verify: bool = True
    arrays: ArraysCache | None = None
    eval_batch_size: int = EVAL_BATCH_SIZE  # test samples per forward pass (``engine/evaluation.py``)
    # which path trains the clients: sequential, packed or auto (``engine.packed.choose_executor``; a run that
    # cannot be packed trains sequentially, and the result says which path trained it and why)
    packing: str = "sequential"
    acceleration: Acceleration = Acceleration()  # CUDA speed switches (``engine/accel.py``); default none
    # the checkpoint written after every round and resumed from (None: none). The ledger (the registry) records the
    # sha256 of each one written and vouches for the one read back; without it a checkpoint is checked for format,
    # spec and layout only. The mirror is storage each checkpoint is copied to (``--checkpoints URL``) before the
    # ledger records it.
    checkpoint_path: Path | None = None
    checkpoint_ledger: CheckpointLedger | None = None
    checkpoint_mirror: CheckpointMirror | None = None
    # bytes of client state kept in memory; beyond it, states the last checkpoint filed leave memory
    # (``algorithms/client_states.py``; needs a checkpoint)
    client_state_memory: int = DEFAULT_MEMORY_BUDGET
    on_round: Callable[[RoundRecord], None] | None = None  # each round, once it is logged and checkpointed
    on_warning: Callable[[str], None] | None = None  # one line, e.g. why a checkpoint was not used
