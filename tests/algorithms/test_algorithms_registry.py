"""The method registry (``fedbench.algorithms``: the catalogue and ``_registry.py``): names, the error a bad
parameter gives, which method owns a fine-tuning loss, and which paper trains each method."""

from __future__ import annotations

import importlib
import sys

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


# ------------------------------------------------------------------------------------------- catalogue
def algorithm_names(node) -> set[str]:
    """Every algorithm a recipe's runs name: the values of each ``algorithm`` key, at any depth (but not in a
    combination's ``match``, which names axis labels)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "match":
                continue
            if key == "algorithm":
                values = value if isinstance(value, list) else [value]
                found |= {v for v in values if isinstance(v, str)}
                found |= set().union(*(algorithm_names(v) for v in values if isinstance(v, dict)))
            else:
                found |= algorithm_names(value)
    elif isinstance(node, list):
        found |= set().union(*(algorithm_names(v) for v in node))
    return found


@pytest.mark.usefixtures("linear_model", "float64")
def test_every_method_a_paper_trains_is_listed_under_that_paper():
    """``fedbench algorithms`` lists each method with the papers whose recipes train it (the catalogue's
    ``papers``): a method missing there is missing from the paper's listing."""
    from pathlib import Path

    from fedbench.algorithms import ALGORITHMS
    from fedbench.recipes.extends import read_recipe_table

    missing = []
    for path in sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.toml")):
        recipe = read_recipe_table(path)  # a variant's keys with its base's
        if recipe["paper"] == "quickstart":
            continue
        runs = {key: recipe.get(key, {}) for key in ("setup", "matrix", "overrides", "combination")}
        missing += [
            (path.name, name)
            for name in sorted(algorithm_names(runs))
            if recipe["paper"] not in ALGORITHMS.info(name)["papers"]
        ]
    assert missing == []


# ------------------------------------------------------------------------------------------- the catalogue
@pytest.mark.parametrize(
    "name, papers",
    [
        ("fedper", {"feddrplus", "bench"}),
        ("fedbn", {"lgmix", "bench"}),
        ("fedbabu", {"feddrplus", "lgmix", "bench"}),
        ("fedalt", {"lgmix", "bench"}),
        ("fedrep", {"lgmix", "feddrplus", "bench"}),
        # LG-Mix Fig. 2b's "client standalone training" (shared/papers/lgmix.md: a figure-only baseline, no
        # recipe trains it yet); FedDr+ Table 3's "Local only" rows
        ("local", {"lgmix", "feddrplus", "bench"}),
        ("perfedavg", {"lgmix", "feddrplus", "bench"}),
        ("ditto", {"feddrplus", "bench"}),
        ("apfl", {"lgmix", "bench"}),
        # the personalised baselines of recipes/baselines_personal_mnist.toml, whose paper id is "bench"
        ("fedproto", {"bench"}),
        ("fedrod", {"bench"}),
        ("fedala", {"bench"}),
        ("pfedme", {"bench"}),
    ],
)
def test_each_personalised_baseline_is_listed_under_the_papers_that_compare_it(name, papers):
    from fedbench.algorithms import ALGORITHMS

    assert set(ALGORITHMS.info(name)["papers"]) == papers


def test_a_methods_old_import_path_gives_its_module_with_a_deprecation_warning(monkeypatch):
    import fedbench.algorithms.methods.fedprox as moved

    monkeypatch.delitem(sys.modules, "fedbench.algorithms.fedprox", raising=False)
    with pytest.warns(
        DeprecationWarning,
        match=r"^fedbench\.algorithms\.fedprox moved: import it from fedbench\.algorithms\.methods\.fedprox$",
    ):
        old = importlib.import_module("fedbench.algorithms.fedprox")
    assert old is moved and old.FedProx is ALGORITHMS.get("fedprox")
    with pytest.raises(ModuleNotFoundError):  # only the built-in methods' modules moved
        importlib.import_module("fedbench.algorithms.nosuchmethod")
