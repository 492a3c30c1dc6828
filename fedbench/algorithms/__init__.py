"""FL methods, one per file, registered by name. The base class is FedAvg.

The registry lives in ``_registry.py``; importing this package imports every method, so each registers itself."""

from fedbench.algorithms import (  # noqa: F401  (imported to register)
    apfl,
    ditto,
    dot_regression,
    fedalt,
    fedavg,
    fedbabu,
    fedbn,
    feddyn,
    fedetf,
    fedexp,
    fedfomo,
    fedhkd,
    fedimpro,
    fednova,
    fedntd,
    fedper,
    fedprox,
    fedrep,
    fedtr,
    fedtrip,
    l2sgd,
    lgmix,
    local,
    moon,
    perfedavg,
    scaffold,
    slowmo,
    spherefed,
)
from fedbench.algorithms._registry import (
    ALGORITHMS,
    build_algorithm,
    finetune_objective,
    register_algorithm,
    validate_algorithm_params,
)

__all__ = ["ALGORITHMS", "build_algorithm", "finetune_objective", "register_algorithm", "validate_algorithm_params"]
