"""The algorithm registry: the built-in methods are declared by name in ``fedbench/algorithms/__init__.py`` (their
modules imported on first use); a plug-in class registers with ``@register_algorithm(name, **info)``. Either way
the registry records the method's ``Params`` (``params_class``), so its hyperparameters are checked and filled in
without importing the method; ``build_algorithm`` validates a method's ``algorithm_params`` and builds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fedbench.algorithms.params import NoParams
from fedbench.errors import ConfigError, field_error
from fedbench.plugins import PluginRegistry

if TYPE_CHECKING:
    from fedbench.algorithms.base import Algorithm

# A method's class states its Params; a declared method states the same class, checked when its module is imported.
ALGORITHMS: PluginRegistry[type[Algorithm]] = PluginRegistry("algorithm", describe=lambda cls: {"params": cls.Params})
register_algorithm = ALGORITHMS.register


def params_class(name: str) -> type[NoParams]:
    """The hyperparameters (pydantic class) of method ``name``, read without importing the method."""
    return ALGORITHMS.info(name)["params"]


def validate_algorithm_params(name: str, params: dict[str, Any]) -> NoParams:
    try:
        return params_class(name)(**params)
    except ValidationError as exc:
        raise ConfigError(f"algorithm {name!r}: {field_error(exc).line('algorithm_params.', '?')}") from None


def build_algorithm(name: str, params: dict[str, Any]):
    return ALGORITHMS.get(name)(validate_algorithm_params(name, params))


def finetune_objective(loss: str) -> tuple[str, dict[str, Any]]:
    """(algorithm, algorithm_params) whose local objective is the fine-tuning loss ``loss`` (``finetune.loss``), as
    the method's entry declares it: ``finetune_losses={loss: params}``."""
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
