"""How a run trains, never what it trains: the one frozen ``Settings`` value and the one default of each setting.

A spec (``fedbench/spec.py``) decides a run's result; these settings decide only where its data are read from, how
fast it trains and how much memory it keeps, so nothing here enters a spec or its hash. Runs trained with other
settings agree up to floating-point summation order where a comment says so, and provenance records those choices
(the training path, the speed switches, ``data.verified``).

``fedbench run`` builds one from its flags (``cli/run.py``: each flag's default is the field's default here), the
execution options carry it to every worker (``execution/options.py``) and the engine reads it (``engine/options.py``).
A new way to train is a field here, a flag alias in ``cli/options.py`` and the line that reads it. No torch here:
planning and dry runs read it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from fedbench.errors import ConfigError

# Test samples per forward pass when a model is evaluated (global and personalised evaluation, ``engine/``), also
# the default of ``RunState.eval_batch_size`` and of the evaluation functions. Results do not depend on it beyond
# summation order; segmentation caps it by pixels (``engine/evaluation.py``).
EVAL_BATCH_SIZE = 1000
# Bytes of per-client state (SCAFFOLD controls, personal models) a run keeps in memory; beyond it, states its last
# checkpoint filed leave memory and are read back when needed (``engine/client_states.py``).
DEFAULT_MEMORY_BUDGET = 1 << 30


class Packing(StrEnum):
    """Which training path trains a run's clients (``engine.packed.choose_training_path``): ``packed`` (a round's
    clients at once, stacked), ``sequential`` (one after another), or ``auto`` (packed on CUDA where the method and
    model allow it). Results agree up to floating-point summation order; provenance records the path and why."""

    AUTO = "auto"
    PACKED = "packed"
    SEQUENTIAL = "sequential"


@dataclass(frozen=True)
class Settings:
    # where data sets are kept (None: $FEDBENCH_DATA or the user cache), and whether their checksums are verified
    # (False: provenance records data.verified=false)
    data_root: str | None = None
    verify: bool = True
    # Intra-op CPU threads per run. Fixed (not derived from the number of workers) because floating-point
    # reductions depend on the thread count: with it fixed, a spec's curve is bit-identical whatever --jobs is.
    threads: int = 1
    packing: Packing = Packing.AUTO
    # CUDA speed switches (``engine/accel.py``): channels-last + fused optimizers (``fast``), ``torch.compile``.
    # Results agree up to rounding; provenance records them. No effect on a CPU.
    fast: bool = True
    compile: bool = False
    eval_batch_size: int = EVAL_BATCH_SIZE
    client_state_memory: int = DEFAULT_MEMORY_BUDGET  # bytes (``DEFAULT_MEMORY_BUDGET``)

    def __post_init__(self) -> None:
        try:  # a name from a caller outside the CLI (whose flag Typer checks) is checked here
            object.__setattr__(self, "packing", Packing(self.packing))
        except ValueError:
            expected = ", ".join(p.value for p in Packing)
            raise ConfigError(f"--packing {self.packing!r}: expected one of {expected}") from None
        for name, value, least in (
            ("threads", self.threads, 1),
            ("eval_batch_size", self.eval_batch_size, 1),
            ("client_state_memory", self.client_state_memory, 0),
        ):
            if value < least:
                raise ConfigError(f"{name} {value}: expected at least {least}")


__all__ = ["DEFAULT_MEMORY_BUDGET", "EVAL_BATCH_SIZE", "Packing", "Settings"]
