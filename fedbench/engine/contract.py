"""The engine contract's checks moved to ``fedbench.execution.contract`` (they build their specs with the recipe
resolver, a layer above the engine). This old path still works: each name it is asked for is the new package's, with
a ``DeprecationWarning`` saying where to import it from."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    # local: the new package lies a layer above the engine (pyproject.toml's layers contract lets this path only)
    import fedbench.execution.contract as contract

    if name.startswith("__") or not hasattr(contract, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"fedbench.engine.contract.{name} moved: import it from fedbench.execution.contract",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(contract, name)
