"""Every method's hyperparameters (``fedbench.algorithms.params``): immutable once validated, no unknown keys,
no regularizer unless one is configured."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fedbench.algorithms import ALGORITHMS, build_algorithm, validate_algorithm_params
from fedbench.errors import ConfigError
from fedbench.report.plugin_catalog import algorithm_entries


@pytest.mark.parametrize("name", ["fedavg", "fedprox", "fedexp"])
def test_method_parameters_are_immutable(name):
    """A run's algorithm_params are part of its spec hash: the validated parameters cannot change afterwards."""
    params = build_algorithm(name, {}).params
    with pytest.raises(ValidationError, match="frozen"):
        params.regularizers = ({"name": "kd", "weight": 0.1},)
    assert params.regularizers == ()


def test_an_unknown_parameter_is_refused():
    for name in ("fedavg", "l2sgd"):
        with pytest.raises(ConfigError, match=rf"algorithm '{name}': algorithm_params\.lamda: "):
            validate_algorithm_params(name, {"lamda": 0.1})


def test_every_method_lists_no_regularizer_by_default():
    """``fedbench algorithms`` shows each method's defaults: regularizers are an empty list unless configured."""
    entries = {entry["name"]: entry["params"] for entry in algorithm_entries()}
    assert set(entries) == set(ALGORITHMS.names())
    assert all(params["regularizers"] == () for params in entries.values())
