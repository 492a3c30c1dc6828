"""Model zoo: architectures registered by name.

Each builder has the signature ``builder(num_classes, input_shape, **model_params) -> FedModel`` and
is registered with ``@register_model(name, papers=..., input_shape=..., num_classes=...)`` where the
keyword info describes the paper configuration it is listed for: ``papers``, ``input_shape``,
``num_classes``, ``description``, ``feature`` (which activation ``features(x)`` returns), and optionally
``faithful=False`` (a stand-in for the paper's model) and ``task="segmentation"``.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

from fedbench.errors import ConfigError
from fedbench.plugins import PluginRegistry

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


@functools.lru_cache(maxsize=256)
def has_batchnorm(name: str, dataset: str, params_json: str) -> bool:
    """Whether model ``name`` (built for ``dataset``'s classes and input, with the JSON ``params``) has BatchNorm
    layers; cached, for decisions made from a spec alone (``Algorithm.result_revision``)."""
    import json

    from torch import nn

    from fedbench.data import dataset_meta

    meta = dataset_meta(dataset)
    model = build_model(name, meta.num_classes, tuple(meta.input_shape), **json.loads(params_json))
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def _check_switches(name: str, builder: Callable[..., Any], params: dict[str, Any]) -> None:
    """A boolean model parameter must get a boolean: the string "false" would silently mean True."""
    hints = typing.get_type_hints(builder)
    for key, value in params.items():
        hint = hints.get(key)
        is_switch = hint is bool or hint == bool | None
        if is_switch and not (isinstance(value, bool) or (value is None and hint is not bool)):
            raise ConfigError(f"model {name!r}: {key} must be true or false, got {value!r}")


# Import the model families so that they register themselves.
from fedbench.models import (  # noqa: E402,F401
    alexnet,
    cnn,
    covidnet,
    densenet,
    digits,
    lenet,
    mlp,
    mobilenet,
    resnet,
    unet,
    vgg,
)
