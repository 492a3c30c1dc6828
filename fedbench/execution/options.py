"""How a batch of runs is executed: one frozen object, built once by ``fedbench run`` (``cli/run.py``) and read by
every stage below it (``batch.prepare_batch`` checks it, ``local``/``cluster`` hand it to the workers,
``worker.train`` turns it into the engine's settings).

Nothing here is part of a run's spec (``fedbench/spec.py``): these options choose where and how fast a run trains,
never its result, so the same spec gives the same curve whatever they are (up to floating-point summation order
where a comment says so; provenance records those). The executor beyond this machine (``--executor``) and its
options are here too. No torch here: planning and dry runs read it too.

A new option that reaches the engine is a field here, a parameter of ``fedbench run`` named like the field (read by
name: ``cli/run.py``) and its use in ``worker.train``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from fedbench.errors import ConfigError


@dataclass(frozen=True)
class ExecutionOptions:
    # SQLAlchemy URL of the registry the workers claim runs from and record them in; None: the default registry
    # (``registry.default_registry_url``). ``prepare_batch`` resolves it, so every worker opens the same one.
    registry_url: str | None = None
    device: str = "auto"  # auto, cpu, cuda or cuda:N; each worker's own once placed (``devices.place_workers``)
    data_root: str | None = None  # None: $FEDBENCH_DATA or the user cache
    verify: bool = True  # --no-verify skips checksums; provenance records data.verified=false
    eval_batch_size: int | None = None  # None: the engine's (``algorithms.context.EVAL_BATCH_SIZE``)
    # Intra-op CPU threads per run. Fixed (not derived from --jobs) because floating-point reductions
    # depend on the thread count: with it fixed, a spec's curve is bit-identical whatever --jobs is.
    threads: int = 1
    # Which training path trains a run's clients (``engine.packed.choose_executor``): auto, packed or sequential.
    # Results agree up to floating-point summation order; provenance records the path and why.
    packing: str = "auto"
    # GPUs the workers of --device cuda are spread over (``devices.place_workers``); None: every visible one
    gpus: tuple[int, ...] | None = None
    # CUDA speed switches (``engine/accel.py``): channels-last + fused optimizers (``fast``), ``torch.compile``.
    # Results agree up to rounding; provenance records them. No effect on a CPU.
    fast: bool = True
    compile: bool = False
    # --checkpoints, resolved (``checkpoint.location.resolve_checkpoints``): a folder every worker sees (shared
    # storage), so that any worker resumes any run, or an object-storage URL mirrored from a local copy; None:
    # beside the registry (``checkpoint.location.run_checkpoint``)
    checkpoints: str | None = None
    # --client-state-memory in bytes: per-client state a run keeps in memory before the states its last checkpoint
    # filed leave it (``algorithms/client_states.py``); None: the engine's default.
    client_state_memory: int | None = None
    # The plug-ins every worker loads before it claims a run (``fedbench.plugins.load_plugins``; the installed
    # distributions' entry points load by themselves): absolute paths or module names, as ``prepare_batch`` finds
    # them loaded in the process that planned the batch (--plugin, the recipes' ``plugins``).
    plugins: tuple[str, ...] = ()


# --executor: where the --jobs workers run (local processes, Ray tasks, Slurm array jobs: ``cluster.py``), and the
# options of the latter two, checked by ``fedbench run`` before anything is registered.
EXECUTORS = ("local", "ray", "slurm")


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    time: str = "01:00:00"  # sbatch --time, HH:MM:SS (or D-HH:MM:SS)
    folder: Path | None = None  # submitit's job folder (scripts, logs, pickled calls): shared storage
    cluster: str = "slurm"  # submitit executor: "slurm", or "local" to try an array on this machine without Slurm
    gpus_per_job: int = 0
    cpus_per_job: int | None = None  # default: the --threads of one run


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # None: a local Ray started here; "auto": the running cluster; "ray://host:10001"
    gpus_per_run: float = 0.0  # a worker trains one run at a time: 0.25 packs four on one GPU
    cpus_per_run: float = 1.0


def slurm_minutes(text: str) -> int:
    """``--slurm-time`` as whole minutes (rounded up): HH:MM:SS, MM:SS or D-HH:MM:SS, as sbatch reads them."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if match is None:
        raise ConfigError(f"--slurm-time {text!r}: expected HH:MM:SS (or D-HH:MM:SS), e.g. --slurm-time 04:00:00")
    days, hours, minutes, seconds = (int(part) if part else 0 for part in match.groups())
    if match.group(2) is None:  # MM:SS
        hours, minutes, seconds = 0, minutes, seconds
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise ConfigError(f"--slurm-time {text!r}: a job needs some time, e.g. --slurm-time 04:00:00")
    return math.ceil(total / 60)


__all__ = ["EXECUTORS", "ExecutionOptions", "RayOptions", "SlurmOptions", "slurm_minutes"]
