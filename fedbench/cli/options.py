"""The options of ``fedbench run`` and ``fedbench plan`` (and those other commands share), each declared once as an
``Annotated`` alias.

A command declares a parameter with the alias (``scale: Scale = "full"``), so its names, type, bounds and help are
written here only; a command for which an option means something more specific says so with ``reworded`` (same
option, its own help line). The defaults of the options that say how a run trains are ``DEFAULTS``'s fields
(``fedbench.settings.Settings``), so a flag and the library never disagree on one. Choices are enums
(``Packing``, ``Launcher``, ``SlurmCluster``), which Typer checks before a command starts, in a dry run too.

``parse_seeds`` reads ``--seeds``; ``additions`` reads ``--add`` and ``--set-for``; ``compile_options`` turns the
options ``run`` and ``plan`` share into the keyword arguments that compile their recipes. ``--plugin``
(``Plugins``) is on every command that compiles recipes or lists plug-ins; ``load_plugins`` loads them (and the
installed entry points) at the command's start.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fedbench.cli import completion
from fedbench.cli.common import RegistryOption
from fedbench.errors import FedbenchError
from fedbench.execution.options import Launch, Launcher, SlurmCluster
from fedbench.settings import DEFAULT_MEMORY_BUDGET, Packing, Settings

if TYPE_CHECKING:
    from fedbench.recipes.additions import Additions

RECIPES: Any = typer.Argument(help="Recipe TOML files.", show_default=False, autocompletion=completion.recipe_files)
SCALE: Any = typer.Option("--scale", help="Scale profile of the recipe (e.g. smoke); 'full' is the paper's setting.")
SEEDS: Any = typer.Option("--seeds", help="Comma-separated seeds replacing the recipe's.")
ONLY: Any = typer.Option(
    "--only",
    help="Keep runs whose labels match KEY=VALUE (repeatable; values of one key are alternatives).",
    autocompletion=completion.assignments,
)
SET: Any = typer.Option(
    "--set",
    help="Override a setup key for every run, dotted for nested keys (repeatable).",
    autocompletion=completion.assignments,
)
SYNTHETIC: Any = typer.Option("--synthetic", help="Replace every dataset with generated stand-in data (smoke tests).")
DEVICE: Any = typer.Option("--device", help="auto, cpu, cuda or cuda:N.")
JOBS: Any = typer.Option(
    "--jobs", "-j", min=1, help="Worker processes claiming runs from the registry (use one per core)."
)
THREADS: Any = typer.Option(
    "--threads", min=1, help="CPU threads per run. Curves are bit-identical for the same --threads whatever --jobs is."
)
DATA_DIR: Any = typer.Option("--data-dir", help="Data root [default: $FEDBENCH_DATA or the user cache].")
PLUGIN: Any = typer.Option(
    "--plugin",
    help="Load a plug-in first (repeatable): a .py file, a package folder or a module name that registers methods, "
    "models, data sets or partitioners. Installed packages' `fedbench.plugins` entry points load too.",
    show_default=False,
)
ADD: Any = typer.Option(
    "--add",
    metavar="AXIS=VALUE",
    help="Add a value to an axis of the recipe (repeatable), e.g. algorithm=scaffold: every cell of the recipe with "
    "it too, labelled added; the recipe's own runs are unchanged.",
    autocompletion=completion.assignments,
)
SET_FOR: Any = typer.Option(
    "--set-for",
    metavar="AXIS=LABEL:KEY=VALUE",
    help="Set a setup key (as --set) only in the cells whose AXIS label is LABEL, e.g. "
    "algorithm=scaffold:optimizer.lr=0.05 (repeatable).",
)

REGISTRY: Any = copy.copy(RegistryOption)  # the option other commands declare as a default, as an alias here
REGISTRY.default = ...  # Typer's "none given in the annotation": the command's own ``= None`` is the default
GPUS: Any = typer.Option(
    "--gpus",
    help="With --device cuda: the GPUs the workers are spread over, round-robin, e.g. 0,2,3 [default: every "
    "visible GPU]. Several workers may share one.",
)
PACKING: Any = typer.Option(
    "--packing",
    help="How a run's clients train: packed (a round's clients at once, stacked), sequential, or auto (packed "
    "on CUDA where the method and model allow it). Not part of the spec; provenance records the path.",
)
FAST: Any = typer.Option(
    "--fast/--no-fast",
    help="On CUDA: conv models in channels-last memory format and fused optimizers (same results up to "
    "rounding; not part of the spec). No effect on a CPU.",
)
COMPILE: Any = typer.Option(
    "--compile", help="On CUDA: torch.compile the working model (the first rounds pay the compilation)."
)
NO_VERIFY: Any = typer.Option("--no-verify", help="Skip data checksum verification (recorded as unverified).")
FORCE: Any = typer.Option("--force", help="Re-run specs that are already done.")
DRY_RUN: Any = typer.Option("--dry-run", help="Print the compiled runs and whether they are done; train nothing.")
LOG_TO: Any = typer.Option(
    "--log-to",
    metavar="TRACKER",
    help="Copy each run into an experiment tracker as soon as it finishes, as `fedbench export --to TRACKER` "
    "would: `mlflow`, `mlflow:TRACKING_URI` or `tensorboard:DIR`.",
)
CHECKPOINTS: Any = typer.Option(
    "--checkpoints",
    help="Folder for run checkpoints on storage every worker sees, so any worker resumes any run "
    "[default: $FEDBENCH_CHECKPOINTS, else beside the registry].",
)
CLIENT_STATE_MEMORY: Any = typer.Option(
    "--client-state-memory",
    min=0,
    help="MiB of per-client state (SCAFFOLD controls, personal models) a run keeps in memory; beyond it, states "
    "already in the run's checkpoint are read back from disk when needed. Not part of the spec.",
)
EVAL_BATCH_SIZE: Any = typer.Option(
    "--eval-batch-size",
    min=1,
    help="Test samples per forward pass when a model is evaluated: lower it when evaluation runs out of GPU memory "
    "(results agree up to summation order; not part of the spec).",
)
EXECUTOR: Any = typer.Option(
    "--executor",
    help="Where the --jobs workers run: local (processes here), ray (Ray tasks) or slurm (a Slurm array job).",
)
ADDRESS: Any = typer.Option(
    "--address", help="Ray: auto (the running cluster) or ray://HOST:10001 [default: a local Ray]."
)
GPUS_PER_RUN: Any = typer.Option(
    "--gpus-per-run", min=0.0, help="Ray: GPUs each worker (one run at a time) takes, e.g. 0.25."
)
SLURM_PARTITION: Any = typer.Option("--slurm-partition", help="Slurm: partition of the jobs.")
SLURM_TIME: Any = typer.Option("--slurm-time", help="Slurm: time limit per job, HH:MM:SS.")
SLURM_GPUS: Any = typer.Option("--slurm-gpus", min=0, help="Slurm: GPUs per worker job.")
SLURM_FOLDER: Any = typer.Option(
    "--slurm-folder", help="Slurm: job scripts and logs, on shared storage [default: registry/slurm]."
)
SLURM_CLUSTER: Any = typer.Option(
    "--slurm-cluster", help="Slurm: 'local' runs the array as processes here (a try without Slurm)."
)
THROUGHPUT: Any = typer.Option(
    "--throughput",
    min=0.0,
    help="Assume this sustained TFLOP/s for every model instead of calibrating (no timing).",
)
AS_JSON: Any = typer.Option("--json", help="Machine-readable output.")

# The one default of each setting a flag gives: the command declares ``threads: Threads = DEFAULTS.threads``; the
# launch flags' defaults are ``DEFAULT_LAUNCH``'s alike.
DEFAULTS = Settings()
DEFAULT_LAUNCH = Launch()
DEFAULT_CLIENT_STATE_MIB = DEFAULT_MEMORY_BUDGET >> 20  # --client-state-memory is in MiB

Recipes = Annotated[list[Path], RECIPES]
Scale = Annotated[str, SCALE]
Seeds = Annotated[str | None, SEEDS]
Only = Annotated[list[str], ONLY]
Overrides = Annotated[list[str], SET]
Synthetic = Annotated[bool, SYNTHETIC]
Device = Annotated[str, DEVICE]
Jobs = Annotated[int, JOBS]
Threads = Annotated[int, THREADS]
DataDir = Annotated[Path | None, DATA_DIR]
Plugins = Annotated[list[str], PLUGIN]
Add = Annotated[list[str], ADD]
SetFor = Annotated[list[str], SET_FOR]
RegistryUrl = Annotated[str | None, REGISTRY]
Gpus = Annotated[str | None, GPUS]
PackingChoice = Annotated[Packing, PACKING]
Fast = Annotated[bool, FAST]
Compile = Annotated[bool, COMPILE]
NoVerify = Annotated[bool, NO_VERIFY]
Force = Annotated[bool, FORCE]
DryRun = Annotated[bool, DRY_RUN]
LogTo = Annotated[str | None, LOG_TO]
Checkpoints = Annotated[str | None, CHECKPOINTS]
ClientStateMemory = Annotated[int, CLIENT_STATE_MEMORY]
EvalBatchSize = Annotated[int, EVAL_BATCH_SIZE]
LauncherChoice = Annotated[Launcher, EXECUTOR]  # --executor: where the workers run
Address = Annotated[str | None, ADDRESS]
GpusPerRun = Annotated[float, GPUS_PER_RUN]
SlurmPartition = Annotated[str | None, SLURM_PARTITION]
SlurmTime = Annotated[str | None, SLURM_TIME]
SlurmGpus = Annotated[int, SLURM_GPUS]
SlurmFolder = Annotated[Path | None, SLURM_FOLDER]
SlurmClusterChoice = Annotated[SlurmCluster, SLURM_CLUSTER]
Throughput = Annotated[float | None, THROUGHPUT]
AsJson = Annotated[bool, AS_JSON]


def parse_seeds(text: str | None) -> list[int] | None:
    """``--seeds 0,1,2``."""
    if text is None:
        return None
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds:  # an empty list would train nothing and blame the recipe or --only for it
        raise FedbenchError(f"--seeds {text!r}: expected comma-separated integers, e.g. --seeds 0,1,2")
    from fedbench.spec import seed_out_of_range

    unstorable = seed_out_of_range(seeds)
    if unstorable:
        raise FedbenchError(f"--seeds {text!r}: {unstorable}")
    return seeds


def load_plugins(sources: list[str]) -> None:
    """Load ``--plugin`` sources (paths relative to the working directory) and the installed entry points; a plug-in
    that fails is a ``PluginError`` (one line, exit 2)."""
    from fedbench.plugins import load_plugins as load

    load(sources)


def additions(add: list[str], set_for: list[str]) -> Additions:
    """``--add`` and ``--set-for``, their syntax checked (``fedbench.recipes.additions``)."""
    from fedbench.recipes.additions import Additions  # local: the CLI's start-up imports no library (cli/__init__.py)

    return Additions.parse(add, set_for)


def compile_options(
    scale: str, seeds: str | None, only: list[str], set_: list[str], synthetic: bool, add: list[str], set_for: list[str]
) -> dict[str, Any]:
    """The keyword arguments that compile recipes into runs (``select_runs``, ``plan_recipes``) from the options
    ``run`` and ``plan`` share: ``--scale``, ``--seeds``, ``--only``, ``--set``, ``--synthetic``, ``--add`` and
    ``--set-for``, each parsed and checked in that order."""
    from fedbench.recipes.assignments import label_filters
    from fedbench.recipes.expand import assignments_to_dict  # local: the CLI's start-up imports no library

    return {
        "scale": scale,
        "seeds": parse_seeds(seeds),
        "only": label_filters(only, "--only"),
        "overrides": assignments_to_dict(set_, "--set"),
        "synthetic": synthetic,
        "additions": additions(add, set_for),
    }


def reworded(option: Any, help: str) -> Any:
    """``option`` (its names, type bounds and parsing) with another help line, for a command where it means
    something more specific (``fedbench plan --jobs``: the workers its wall time is divided over)."""
    copied = copy.copy(option)
    copied.help = help
    return copied


__all__ = [
    "DEFAULTS",
    "DEFAULT_CLIENT_STATE_MIB",
    "DEFAULT_LAUNCH",
    "Add",
    "Address",
    "AsJson",
    "Checkpoints",
    "ClientStateMemory",
    "Compile",
    "DryRun",
    "EvalBatchSize",
    "Fast",
    "Force",
    "Gpus",
    "GpusPerRun",
    "LauncherChoice",
    "NoVerify",
    "PackingChoice",
    "RegistryUrl",
    "SlurmClusterChoice",
    "SlurmFolder",
    "SlurmGpus",
    "SlurmPartition",
    "SlurmTime",
    "Throughput",
    "DataDir",
    "Device",
    "Jobs",
    "Only",
    "Recipes",
    "Scale",
    "Seeds",
    "SetFor",
    "Overrides",
    "Plugins",
    "Synthetic",
    "Threads",
    "load_plugins",
    "additions",
    "compile_options",
    "parse_seeds",
    "reworded",
]
