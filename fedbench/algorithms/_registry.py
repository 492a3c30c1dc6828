"""The algorithm registry: methods register by name with ``@register_algorithm(name, **info)``; ``build_algorithm``
validates a method's ``algorithm_params`` and builds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fedbench.errors import ConfigError, field_error
from fedbench.plugins import PluginRegistry

if TYPE_CHECKING:
    from fedbench.algorithms.base import Algorithm

ALGORITHMS: PluginRegistry[type[Algorithm]] = PluginRegistry("algorithm")
register_algorithm = ALGORITHMS.register


def validate_algorithm_params(name: str, params: dict[str, Any]):
    cls = ALGORITHMS.get(name)
    try:
        return cls.Params(**params)
    except ValidationError as exc:
        raise ConfigError(f"algorithm {name!r}: {field_error(exc).line('algorithm_params.', '?')}") from None


def build_algorithm(name: str, params: dict[str, Any]):
    return ALGORITHMS.get(name)(validate_algorithm_params(name, params))


def finetune_objective(loss: str) -> tuple[str, dict[str, Any]]:
    """(algorithm, algorithm_params) whose local objective is the fine-tuning loss ``loss`` (``finetune.loss``), as
    the method declares it when it registers: ``register_algorithm(name, finetune_losses={loss: params})``."""
    owners = [
        (name, ALGORITHMS.info(name)["finetune_losses"][loss])
        for name in ALGORITHMS.names()
        if loss in ALGORITHMS.info(name).get("finetune_losses", {})
    ]
    if len(owners) != 1:
        raise ConfigError(
            f"finetune.loss = {loss!r} is declared by {len(owners)} algorithms "
            f"({', '.join(n for n, _ in owners) or 'none'}); exactly one must declare it"
        )
    return owners[0]
