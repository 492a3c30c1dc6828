"""The one KEY=VALUE parser of ``--set``, ``--only`` and ``--param`` (``fedbench/recipes/assignments.py``): TOML
values else strings, the flat, nested and label forms, and the error of an assignment without a key or ``=``."""

from __future__ import annotations

import pytest

from fedbench.errors import ConfigError
from fedbench.recipes.assignments import label_filters, nested_assignments, parse_assignment, parse_assignments


@pytest.mark.parametrize(
    "text, expected",
    [
        ("rounds=5", ("rounds", 5)),
        ("mu=0.1", ("mu", 0.1)),
        ("flag=true", ("flag", True)),
        ("shape=[3, 32, 32]", ("shape", [3, 32, 32])),
        ('name="CNN MNIST-90%"', ("name", "CNN MNIST-90%")),
        ("name=CNN MNIST-90%", ("name", "CNN MNIST-90%")),  # not TOML: the plain string
        ("opt={ lr = 0.1 }", ("opt", {"lr": 0.1})),
        (" key =a=b", ("key", "a=b")),  # the first '=' splits
        ("empty=", ("empty", "")),
    ],
)
def test_values_are_toml_else_strings(text, expected):
    assert parse_assignment(text, "--set") == expected


@pytest.mark.parametrize("text", ["rounds", "=5", " =5"])
def test_an_assignment_needs_a_key_and_an_equals_sign(text):
    with pytest.raises(ConfigError, match="--param .*expected KEY=VALUE"):
        parse_assignment(text, "--param")


def test_flat_nested_and_label_forms():
    assert parse_assignments(["a=1", "b=x", "a=2"], "--param") == {"a": 2, "b": "x"}
    assert nested_assignments(["algorithm_params.mu=0.5", "algorithm_params.tau=1", "rounds=3"], "--set") == {
        "algorithm_params": {"mu": 0.5, "tau": 1},
        "rounds": 3,
    }
    with pytest.raises(ConfigError, match="unknown setup key 'roundz'; valid keys: rounds"):
        nested_assignments(["roundz=3"], "--set", allowed=["rounds"], what="setup key")
    with pytest.raises(ConfigError, match="already set to a value"):
        nested_assignments(["a=1", "a.b=2"], "--set")
    assert label_filters(["algorithm=fedavg", "algorithm=fedprox", "mu=0.10", "seed=1"]) == {
        "algorithm": {"fedavg", "fedprox"},
        "mu": {"0.1"},
        "seed": {"1"},
    }
