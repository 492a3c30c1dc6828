"""The setting the contract's checks train (``fedbench.execution.contract.setting``): the small default, changes merged
in, a declared FedAvg setting applied, every spec resolved as a recipe's cells are (``resolve_spec``)."""

from __future__ import annotations

import pytest

from fedbench.algorithms import ALGORITHMS, params_class
from fedbench.errors import ConfigError
from fedbench.execution.contract.check import check_method
from fedbench.execution.contract.properties import (
    PROPERTIES,
)
from fedbench.execution.contract.setting import SETUP, contract_spec, fedavg_setting_spec, setting_text, with_method
from fedbench.recipes.resolve import resolve_params, resolve_spec


def register(monkeypatch, name: str, cls: type, **info) -> str:
    """A test-only method, registered for one test (as a plug-in registers, with its info)."""
    monkeypatch.setitem(ALGORITHMS._entries, name, cls)
    monkeypatch.setitem(ALGORITHMS._info, name, {"papers": ("tests",), "params": cls.Params, **info})
    return name


def check(name: str, *properties: str, **setup) -> dict[str, object]:
    results = check_method(contract_spec(name, **setup), properties or None)
    assert [r.name for r in results] == list(properties or PROPERTIES)
    return {r.name: r for r in results}


# ------------------------------------------------------------------------ the setting and the comparisons
def test_the_check_setting_has_clients_that_skip_a_round_and_clients_that_return():
    """3 rounds of 3 of 4 clients: a client trains again with the state it kept, and another sits a round out."""
    from fedbench.engine.loop import client_schedule

    spec = contract_spec("fedavg")
    schedule = client_schedule(spec)
    assert (spec.rounds, spec.num_clients, spec.clients_per_round) == (3, 4, 3)
    assert any(set(a) & set(b) for a, b in zip(schedule, schedule[1:]))  # a client returns
    assert all(len(set(clients)) < spec.num_clients for clients in schedule)  # and one sits out, every round


def test_the_check_setting_trains_all_but_one_client_unless_told_and_takes_tables_it_lacks():
    assert [contract_spec("fedavg", num_clients=n).clients_per_round for n in (1, 2, 5)] == [1, 1, 4]
    assert contract_spec("fedavg", num_clients=5, clients_per_round=2).clients_per_round == 2
    finetune = {"epochs": 1, "lr": 0.1, "loss": "ce", "start": "final"}
    spec = contract_spec("fedavg", finetune=finetune)  # a table SETUP does not have: taken as it is
    assert (spec.finetune.epochs, spec.finetune.lr) == (1, 0.1)


def test_a_fedavg_setting_with_an_unknown_part_is_a_config_error_naming_it():
    with pytest.raises(ConfigError) as error:
        fedavg_setting_spec(contract_spec("fedprox"), {"algorithm_param": {"mu": 0.0}, "set_up": {}})
    assert str(error.value) == (
        "fedprox: fedavg_setting has key(s) algorithm_param, set_up; expected algorithm_params and/or setup"
    )


def test_a_declared_fedavg_setting_reads_as_its_values():
    assert setting_text({"algorithm_params": {"mu": 0.0}, "setup": {"local_steps": 2}}) == "mu=0.0, local_steps=2"
    assert setting_text({"setup": {"local_steps": 2}}) == "local_steps=2"
    assert setting_text({}) == "as it is"


def test_the_check_setting_merges_changes_into_the_small_default():
    spec = contract_spec("fedprox", {"mu": 0.1}, optimizer={"momentum": 0.0}, num_clients=6)
    assert (spec.algorithm, spec.algorithm_params) == ("fedprox", {"regularizers": [], "mu": 0.1})  # resolved
    assert spec.optimizer.lr == SETUP["optimizer"]["lr"] and spec.optimizer.momentum == 0.0
    assert (spec.num_clients, spec.clients_per_round, spec.rounds, spec.dataset) == (6, 5, 3, "digits")
    cnn = contract_spec("fedavg", model="digits_cnn")  # digits_mlp's hidden size left behind: digits_cnn's defaults
    assert cnn.model_params == resolve_params("model", "digits_cnn", {})
    nova = fedavg_setting_spec(contract_spec("fednova"), ALGORITHMS.info("fednova")["fedavg_setting"])
    assert nova.local_steps == 2 and nova.optimizer.momentum == SETUP["optimizer"]["momentum"]


def test_the_checks_specs_are_resolved_as_a_recipes_cells_are():
    """Every plug-in parameter's default filled in, the method's result revision and the plug-ins' code recorded:
    the spec the recipe resolver gives for the same fields, and a variant for another method derives its own."""
    spec = contract_spec("fedfomo", model="fedbn_digit_cnn")
    fields = {
        key: value for key, value in spec.model_dump().items() if key not in ("algorithm_revision", "plugin_code")
    }
    assert spec == resolve_spec(fields) == resolve_spec(spec)
    assert spec.model_params == resolve_params("model", "fedbn_digit_cnn", {})
    assert spec.partition_params == resolve_params("partition", "dirichlet", {"alpha": 0.5, "min_size": 20})
    assert spec.algorithm_revision == params_class("fedfomo").result_revision(spec)
    fedavg = with_method(spec, "fedavg", {})
    assert (fedavg.algorithm, fedavg.algorithm_params) == ("fedavg", resolve_params("algorithm", "fedavg", {}))
    assert fedavg.algorithm_revision == params_class("fedavg").result_revision(fedavg)
    assert fedavg == resolve_spec({**fields, "algorithm": "fedavg", "algorithm_params": {}})


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"rounds": 0}, "check setting: rounds: Input should be greater than or equal to 1"),
        ({"algorithm_params": {"mu": "much"}}, "algorithm 'fedprox': algorithm_params.mu: Input should be a valid"),
    ],
)
def test_a_bad_setting_is_one_config_error(setup, message):
    params = setup.pop("algorithm_params", None)
    with pytest.raises(ConfigError, match=f"^{message}"):
        contract_spec("fedprox", params, **setup)
