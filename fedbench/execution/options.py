"""How a batch of runs is executed: one frozen object, built once by ``fedbench run`` (``cli/run.py``) and read by
every stage below it (``batch.prepare_batch`` checks it, ``local``/``cluster`` hand it to the workers,
``worker.train`` gives the engine its settings).

Nothing here is part of a run's spec (``fedbench/spec.py``): these options choose where and how fast a run trains,
never its result, so the same spec gives the same curve whatever they are (up to floating-point summation order
where a comment says so; provenance records those). They are the registry and the device, where checkpoints lie,
the plug-ins every worker loads, how each run trains (``settings``: ``fedbench.settings.Settings``) and how the
workers are launched (``launch``: how many, and on this machine, on Slurm or on Ray). No torch here: planning and
dry runs read it too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from fedbench.errors import ConfigError
from fedbench.settings import Settings


class Launcher(StrEnum):
    """Where the workers run (``--executor``): processes here (``local.py``), Ray tasks or Slurm array jobs
    (``cluster.py``)."""

    LOCAL = "local"
    RAY = "ray"
    SLURM = "slurm"


class SlurmCluster(StrEnum):
    """submitit's executor for ``--executor slurm``: Slurm, or ``local`` to try an array here without Slurm."""

    SLURM = "slurm"
    LOCAL = "local"


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    time: str | None = None  # sbatch --time, HH:MM:SS (or D-HH:MM:SS); required with --executor slurm
    folder: Path | None = None  # submitit's job folder (scripts, logs, pickled calls): shared storage
    cluster: SlurmCluster = SlurmCluster.SLURM
    gpus_per_job: int = 0
    cpus_per_job: int | None = None  # None: the threads of one run (``Settings.threads``)


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # None: a local Ray started here; "auto": the running cluster; "ray://host:10001"
    gpus_per_run: float = 0.0  # a worker trains one run at a time: 0.25 packs four on one GPU
    cpus_per_run: float | None = None  # None: the threads of one run (``Settings.threads``)


@dataclass(frozen=True)
class Launch:
    """How the batch's workers are launched: ``jobs`` of them, each claiming runs from the registry, where
    ``launcher`` says, with the options of that launcher. Checked when built, before anything is registered: the
    options of another launcher than the chosen one are a user error, not silently ignored."""

    launcher: Launcher = Launcher.LOCAL
    jobs: int = 1
    slurm: SlurmOptions = SlurmOptions()
    ray: RayOptions = RayOptions()

    def __post_init__(self) -> None:
        try:  # a name from a caller outside the CLI (whose flag Typer checks) is checked here
            object.__setattr__(self, "launcher", Launcher(self.launcher))
        except ValueError:
            expected = ", ".join(launcher.value for launcher in Launcher)
            raise ConfigError(f"--executor {self.launcher!r}: expected one of {expected}") from None
        if self.jobs < 1:
            raise ConfigError(f"--jobs {self.jobs}: expected at least 1")
        if self.launcher != Launcher.SLURM and self.slurm != SlurmOptions():
            raise ConfigError("--slurm-* options need --executor slurm")
        if self.launcher != Launcher.RAY and self.ray != RayOptions():
            raise ConfigError("--address and --gpus-per-run need --executor ray")
        if self.launcher == Launcher.SLURM:
            if self.slurm.time is None:
                raise ConfigError("--executor slurm needs --slurm-time HH:MM:SS (each worker job's time limit)")
            slurm_minutes(self.slurm.time)

    @property
    def cluster(self) -> SlurmOptions | RayOptions | None:
        """The options of the launcher beyond this machine; None: local workers."""
        if self.launcher == Launcher.SLURM:
            return self.slurm
        if self.launcher == Launcher.RAY:
            return self.ray
        return None


@dataclass(frozen=True)
class ExecutionOptions:
    # SQLAlchemy URL of the registry the workers claim runs from and record them in; None: the default registry
    # (``registry.default_registry_url``). ``prepare_batch`` resolves it, so every worker opens the same one.
    registry_url: str | None = None
    device: str = "auto"  # auto, cpu, cuda or cuda:N; each worker's own once placed (``devices.place_workers``)
    # GPUs the workers of --device cuda are spread over (``devices.place_workers``); None: every visible one
    gpus: tuple[int, ...] | None = None
    # --checkpoints, resolved (``checkpoint.location.resolve_checkpoints``): a folder every worker sees (shared
    # storage), so that any worker resumes any run, or an object-storage URL mirrored from a local copy; None:
    # beside the registry (``checkpoint.location.run_checkpoint``)
    checkpoints: str | None = None
    # The plug-ins every worker loads before it claims a run (``fedbench.plugins.load_plugins``; the installed
    # distributions' entry points load by themselves): absolute paths or module names, as ``prepare_batch`` finds
    # them loaded in the process that planned the batch (--plugin, the recipes' ``plugins``).
    plugins: tuple[str, ...] = ()
    settings: Settings = Settings()  # how every run trains
    launch: Launch = Launch()  # how the workers are launched


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


__all__ = ["ExecutionOptions", "Launch", "Launcher", "RayOptions", "SlurmCluster", "SlurmOptions", "slurm_minutes"]
