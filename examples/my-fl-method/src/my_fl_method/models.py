"""The model ``tiny_cnn``, registered by its builder: ``builder(num_classes, input_shape, **model_params)``. The
builder's keyword parameters and their defaults are the model's ``model_params`` (``model_params = { hidden = 64
}``), read from its signature when a recipe compiles; it imports its network only when it is called."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedbench.models import register_model

if TYPE_CHECKING:
    from my_fl_method.nets import TinyCNN


@register_model(
    "tiny_cnn",
    input_shape=(1, 8, 8),
    num_classes=10,
    description="my-fl-method's CNN for 8×8 gray digits: conv 3×3 (8), max-pool 2, FC 32, FC 10",
    feature="32-d hidden layer after ReLU",
)
def tiny_cnn(num_classes: int, input_shape: tuple[int, ...], channels: int = 8, hidden: int = 32) -> TinyCNN:
    from my_fl_method.nets import TinyCNN  # local: keeps torch out of the start-up of commands that list plug-ins

    return TinyCNN(num_classes, input_shape, channels, hidden)
