"""The method registry (``fedbench.algorithms``): names, the error a bad parameter gives, and which method owns a
fine-tuning loss."""

from __future__ import annotations

import pytest

from fedbench.algorithms import ALGORITHMS, build_algorithm, finetune_objective, validate_algorithm_params
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.params import FEDDR_PLUS_PARAMS
from fedbench.errors import ConfigError, UnknownNameError


def test_an_unknown_method_name_is_refused_with_the_close_names():
    with pytest.raises(UnknownNameError, match=r"^unknown algorithm 'fedavgg'; did you mean fedavg"):
        build_algorithm("fedavgg", {})


def config_error(name: str, params: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_algorithm_params(name, params)
    return str(caught.value)


def test_a_bad_parameter_is_named_by_its_path_in_algorithm_params():
    """``algorithm 'NAME': algorithm_params.PATH: what is wrong``, the path dotted down nested lists."""
    message = config_error("fedexp", {"epsilon": -1.0})
    assert (
        message.startswith("algorithm 'fedexp': algorithm_params.epsilon: ") and "greater than or equal to 0" in message
    )
    message = config_error("fedavg", {"regularizers": [{"name": "kd", "weight": 0.1}, {"name": "kd"}]})
    assert message.startswith("algorithm 'fedavg': algorithm_params.regularizers.1.weight: "), message
    assert "required" in message.lower()


def test_of_several_bad_parameters_the_first_is_reported():
    message = config_error("fedexp", {"epsilon": -1.0, "variant": "nope"})
    assert message.startswith("algorithm 'fedexp': algorithm_params.epsilon: ") and "variant" not in message


def test_each_fine_tuning_loss_belongs_to_the_one_method_that_declares_it(monkeypatch):
    assert finetune_objective("ce") == ("fedavg", {})
    assert finetune_objective("dr_plus") == ("dot_regression", FEDDR_PLUS_PARAMS)
    with pytest.raises(ConfigError) as caught:
        finetune_objective("nope")
    assert str(caught.value) == "finetune.loss = 'nope' is declared by 0 algorithms (none); exactly one must declare it"
    monkeypatch.setitem(ALGORITHMS._entries, "zz_second_ce", Algorithm)
    monkeypatch.setitem(ALGORITHMS._info, "zz_second_ce", {"papers": ("tests",), "finetune_losses": {"ce": {}}})
    with pytest.raises(ConfigError) as caught:
        finetune_objective("ce")
    assert str(caught.value) == (
        "finetune.loss = 'ce' is declared by 2 algorithms (fedavg, zz_second_ce); exactly one must declare it"
    )
