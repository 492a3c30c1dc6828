"""Model zoo: architectures registered by name.

Each builder has the signature ``builder(num_classes, input_shape, **model_params) -> FedModel`` and
is registered with ``@register_model(name, papers=..., input_shape=..., num_classes=...)`` where the
keyword info describes the paper configuration it is listed for: ``papers``, ``input_shape``,
``num_classes``, ``description``, ``feature`` (which activation ``features(x)`` returns), and optionally
``faithful=False`` (a stand-in for the paper's model) and ``task="segmentation"``.

The registry lives in ``_registry.py``; importing this package imports every family, so each registers itself.
"""

from fedbench.models import (  # noqa: F401  (imported to register)
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
from fedbench.models._registry import MODELS, build_model, register_model

__all__ = ["MODELS", "build_model", "register_model"]
