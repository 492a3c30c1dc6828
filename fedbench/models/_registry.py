"""The model registry: architectures register by name with ``@register_model(name, **info)``; ``build_model``
checks a model's ``model_params`` and builds it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fedbench.errors import ConfigError
from fedbench.plugins import PluginRegistry, parameter_hints

MODELS: PluginRegistry[Callable[..., Any]] = PluginRegistry("model")
register_model = MODELS.register


def build_model(name: str, num_classes: int, input_shape: tuple[int, ...], **params: Any):
    builder = MODELS.get(name)
    allowed = set(inspect.signature(builder).parameters) - {"num_classes", "input_shape"}
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(
            f"model {name!r} has no parameter(s) {', '.join(map(repr, sorted(unknown)))}; "
            f"model_params accepts: {', '.join(sorted(allowed)) or 'nothing'}"
        )
    _check_switches(name, builder, params)
    return builder(num_classes=num_classes, input_shape=tuple(input_shape), **params)


def _check_switches(name: str, builder: Callable[..., Any], params: dict[str, Any]) -> None:
    """A boolean model parameter must get a boolean: the string "false" would silently mean True."""
    hints = parameter_hints(builder, include_extras=False)
    for key, value in params.items():
        hint = hints.get(key)
        is_switch = hint is bool or hint == bool | None
        if is_switch and not (isinstance(value, bool) or (value is None and hint is not bool)):
            raise ConfigError(f"model {name!r}: {key} must be true or false, got {value!r}")
