"""The model registry (``fedbench/models/_registry.py``): ``build_model`` builds a registered model with its
``model_params``, refuses a parameter the builder lacks (naming what it accepts) and a switch given a non-boolean."""

from __future__ import annotations

import pytest
import torch

from fedbench.errors import ConfigError, UnknownNameError
from fedbench.models import MODELS, build_model


def test_build_model_passes_classes_shape_and_params_to_the_builder():
    with torch.device("meta"):
        model = build_model("mlp", 7, [1, 4, 4], hidden=[5, 3])  # a list shape: taken as a tuple
    assert [(m.in_features, m.out_features) for m in model.modules() if isinstance(m, torch.nn.Linear)] == [
        (16, 5),
        (5, 3),
        (3, 7),
    ]


def test_an_unknown_parameter_names_the_accepted_ones():
    with pytest.raises(ConfigError, match=r"model 'mlp' has no parameter\(s\) 'depth', 'width'; .*batch_norm, hidden"):
        build_model("mlp", 10, (1, 28, 28), width=3, depth=2)
    with pytest.raises(ConfigError, match="model_params accepts: nothing"):
        build_model("lenet5", 10, (1, 28, 28), hidden=3)


def test_an_unknown_model_is_an_unknown_name():
    with pytest.raises(UnknownNameError):
        build_model("no_such_model", 10, (1, 28, 28))


@pytest.mark.parametrize(
    "name,key,value,ok",
    [
        ("mlp", "batch_norm", "false", False),  # a string would mean True
        ("mlp", "batch_norm", 1, False),
        ("mlp", "batch_norm", None, False),  # a plain bool switch takes no None
        ("mlp", "batch_norm", True, True),
        ("vgg11", "classifier_bias", None, True),  # bool | None: None means "the classifier kind's default"
        ("vgg11", "classifier_bias", False, True),
        ("vgg11", "classifier_bias", "no", False),
    ],
)
def test_switches_take_booleans_only(name, key, value, ok):
    if ok:
        with torch.device("meta"):
            build_model(name, *MODELS_CONFIG[name], **{key: value})
    else:
        with pytest.raises(ConfigError, match=f"{key} must be true or false, got {value!r}"):
            build_model(name, *MODELS_CONFIG[name], **{key: value})


MODELS_CONFIG = {
    name: (MODELS.info(name)["num_classes"], tuple(MODELS.info(name)["input_shape"])) for name in ("mlp", "vgg11")
}
