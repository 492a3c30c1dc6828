"""Model zoo: architectures registered by name.

Each builder has the signature ``builder(num_classes, input_shape, **model_params) -> FedModel``; the built-in
ones are registered in ``zoo.py``, which imports no torch (a builder imports its architecture, ``<family>.py``,
when called), so a recipe's model parameters are checked and filled in without torch. The registry lives in
``_registry.py``.
"""

from fedbench.models import zoo  # noqa: F401  (imported to register)
from fedbench.models._registry import MODELS, build_model, register_model
from fedbench.plugins import register_catalogue

register_catalogue(MODELS)  # every built-in registered: a plug-in that fails to load leaves them (plugins/registry.py)

__all__ = ["MODELS", "build_model", "register_model"]
