"""A resolved RunSpec (``resolve_spec``, called when recipes are compiled) holds every plug-in parameter, default
included, in the spec and its hash, so a changed default changes the hash of every run that relied on it; a
parameter added later is HashNeutral."""

from __future__ import annotations

import inspect
from typing import Annotated

import pytest
from pydantic import create_model

from fedbench.algorithms import ALGORITHMS, params_class
from fedbench.data import DATASETS
from fedbench.data.partition import PARTITIONERS
from fedbench.errors import ConfigError, UnknownNameError
from fedbench.models import MODELS
from fedbench.recipes import resolve
from fedbench.recipes.resolve import resolve_spec
from fedbench.spec import HashNeutral, RunSpec

BASE = dict(
    algorithm="fedprox",
    dataset="digits",
    model="digits_mlp",
    partition="dirichlet",
    partition_params={"alpha": 0.5},
    num_clients=4,
    clients_per_round=2,
    rounds=2,
)
REGISTRIES = {"algorithm": ALGORITHMS, "dataset": DATASETS, "model": MODELS, "partition": PARTITIONERS}


def test_defaults_are_filled_in_and_spelled_out_defaults_give_the_same_run():
    spec = resolve_spec(BASE)
    assert spec.algorithm_params == {"mu": 0.01, "regularizers": []}
    assert (
        spec.partition_params["min_size"]
        == inspect.signature(PARTITIONERS.get("dirichlet")).parameters["min_size"].default
    )
    explicit = resolve_spec(
        {
            **BASE,
            "algorithm_params": {"mu": 0.01},
            "partition_params": {**spec.partition_params},
            "model_params": dict(spec.model_params),
            "dataset_params": dict(spec.dataset_params),
        }
    )
    assert explicit.spec_hash == spec.spec_hash
    assert resolve_spec(spec.model_dump()) == resolve_spec(spec) == spec  # a stored spec resolves to itself
    assert RunSpec(**spec.model_dump()).spec_hash == spec.spec_hash  # and loads as plain data with the same hash
    assert resolve_spec({**BASE, "algorithm_params": {"mu": 0.02}}).spec_hash != spec.spec_hash


def _every_function_parameter():
    for kind in ("dataset", "model", "partition"):
        for name in REGISTRIES[kind].names():
            for parameter, default in resolve._signature(kind, name)[0].items():
                if default is not inspect.Parameter.empty:  # a required parameter has no default to change
                    yield kind, name, parameter


@pytest.mark.parametrize("kind, name, parameter", list(_every_function_parameter()))
def test_changing_any_dataset_model_or_partition_default_changes_the_hash(monkeypatch, kind, name, parameter):
    defaults, neutral = resolve._signature(kind, name)
    # a required parameter (a team's own data set's path) gets a value; it has no default to change
    required = {key: "some/path" for key, default in defaults.items() if default is inspect.Parameter.empty}
    setup = {**BASE, kind: name, f"{kind}_params": required}
    if kind != "partition":
        setup.update(partition="iid", partition_params={})
    before = resolve_spec(setup)
    changed = {**defaults, parameter: ["a default", "that changed"]}
    original = resolve._signature
    monkeypatch.setattr(
        resolve, "_signature", lambda k, n: (changed, neutral) if (k, n) == (kind, name) else original(k, n)
    )
    after = resolve_spec(setup)
    assert after.spec_hash != before.spec_hash, f"{kind} {name}.{parameter}"


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_changing_any_algorithm_default_changes_the_hash(monkeypatch, name):
    cls = params_class(name)
    before = resolve_spec({**BASE, "algorithm": name, "algorithm_params": {}})
    for field in cls.model_fields:
        if field == "regularizers":
            continue
        value = before.algorithm_params[field]
        other = (not value) if isinstance(value, bool) else (value + 1 if isinstance(value, (int, float)) else value)
        if other == value:  # a choice or an optional value: any other accepted value will do
            continue
        params = create_model(f"Changed{name}", __base__=cls, **{field: (type(other), other)})
        monkeypatch.setitem(ALGORITHMS._info, name, {**ALGORITHMS.info(name), "params": params})
        after = resolve_spec({**BASE, "algorithm": name, "algorithm_params": {}})
        assert after.algorithm_params[field] == other and after.spec_hash != before.spec_hash, f"{name}.{field}"
        monkeypatch.setitem(ALGORITHMS._info, name, {**ALGORITHMS.info(name), "params": cls})


def test_hash_neutral_parameters_are_left_out_while_they_hold_their_value(monkeypatch):
    def loader_before(root, verify=True, test_fraction: float = 0.2):
        raise AssertionError("never loaded")

    def loader_after(root, verify=True, test_fraction: float = 0.2, crop: Annotated[int, HashNeutral(0)] = 0):
        raise AssertionError("never loaded")

    setup = {**BASE, "dataset": "test_only_set", "partition": "iid", "partition_params": {}}
    monkeypatch.setitem(DATASETS._entries, "test_only_set", loader_before)
    resolve._signature.cache_clear()
    before = resolve_spec(setup)
    monkeypatch.setitem(DATASETS._entries, "test_only_set", loader_after)
    resolve._signature.cache_clear()
    try:
        after = resolve_spec(setup)
        assert after.dataset_params == {"test_fraction": 0.2, "crop": 0}  # stored resolved...
        assert after.spec_hash == before.spec_hash  # ...but hash-neutral at 0
        assert after.neutral_params == {"dataset": {"crop": 0}}  # what hashing needs, recorded in the spec
        assert RunSpec.model_validate_json(after.model_dump_json()).spec_hash == before.spec_hash  # without plug-ins
        assert resolve_spec({**setup, "dataset_params": {"crop": 2}}).spec_hash != before.spec_hash
    finally:
        resolve._signature.cache_clear()


def test_hash_neutral_spec_fields_live_on_the_field():
    from fedbench.spec import AugmentationSpec, neutral_fields

    assert neutral_fields(RunSpec) == {
        "client_test": "split",
        "client_test_params": {},
        "client_split": "random",
        "precision": "fp32",
        "client_weighting": "samples",
        "batch_order": "shuffle",
        "diagnostics": (),
        "diagnostics_every": 1,
        "diagnostics_rounds": (),
        "algorithm_revision": 1,
        "plugin_code": {},
    }
    assert neutral_fields(AugmentationSpec) == {"cutout": 0}
    canonical = resolve_spec(BASE).canonical_json()
    assert '"client_test"' not in canonical and '"cutout"' not in canonical and '"precision"' not in canonical
    assert '"diagnostics' not in canonical and '"client_weighting"' not in canonical
    assert '"client_split"' not in canonical


def test_personalizedfl_s_partition_options_keep_every_earlier_hash_at_their_defaults():
    """dirichlet_pfl's equal_slices and the spec's client_split came after runs were stored: at their old
    behaviour (off, "random") they leave the hash alone, and either one set moves it."""
    pfl = {**BASE, "partition": "dirichlet_pfl", "partition_params": {"alpha": 0.1}}
    before = resolve_spec(pfl)
    assert before.partition_params["equal_slices"] is False
    assert '"equal_slices"' not in before.canonical_json()
    assert (
        resolve_spec({**pfl, "partition_params": {"alpha": 0.1, "equal_slices": False}}).spec_hash == before.spec_hash
    )
    assert resolve_spec({**pfl, "partition_params": {"alpha": 0.1, "equal_slices": True}}).spec_hash != before.spec_hash
    split = {**pfl, "eval_mode": "personal", "client_test_fraction": 0.3, "client_val_fraction": 0.3}
    assert resolve_spec({**split, "client_split": "random"}).spec_hash == resolve_spec(split).spec_hash
    assert resolve_spec({**split, "client_split": "class_ordered"}).spec_hash != resolve_spec(split).spec_hash


@pytest.mark.parametrize(
    "setup, error, message",
    [
        ({"partition_params": {"alpha": 0.5, "min_sise": 3}}, ConfigError, "partitioner 'dirichlet' has no parameter"),
        ({"model_params": {"hiden": 3}}, ConfigError, "model 'digits_mlp' has no parameter"),
        ({"algorithm_params": {"muu": 3}}, ConfigError, "algorithm_params.muu"),
        ({"model": "digits_mpl"}, UnknownNameError, "did you mean digits_mlp"),
    ],
)
def test_bad_parameters_fail_when_the_spec_is_built(setup, error, message):
    with pytest.raises(error, match=message):
        resolve_spec({**BASE, **setup})


@pytest.mark.parametrize(
    "setup, revision",
    [
        ({"algorithm": "lgmix", "num_clients": 4, "clients_per_round": 2}, 2),  # the partial-participation fix
        ({"algorithm": "lgmix", "num_clients": 4, "clients_per_round": 4}, 1),  # full participation: unchanged
        ({"algorithm": "fedfomo", "model": "fedbn_digit_cnn", "model_params": {}, "dataset": "digits5"}, 2),  # BN peers
        ({"algorithm": "fedfomo"}, 1),  # no BatchNorm: unchanged
        ({"algorithm": "fedavg"}, 1),
        ({"algorithm": "fednova"}, 2),  # equal a_i: FedAvg's own aggregation (rounds depend on the data)
        ({"algorithm": "slowmo", "algorithm_params": {"beta": 0.0, "slow_lr": 1.0}}, 2),  # its FedAvg setting
        ({"algorithm": "slowmo", "algorithm_params": {"beta": 0.0, "slow_lr": 0.5}}, 1),
        ({"algorithm": "slowmo", "algorithm_params": {"beta": 0.9}}, 1),
    ],
)
def test_a_fix_that_changes_a_specs_result_changes_its_hash(setup, revision):
    spec = resolve_spec({**BASE, "algorithm_params": {}, **setup})
    assert params_class(spec.algorithm).result_revision(spec) == revision == spec.algorithm_revision
    first = spec.model_copy(update={"algorithm_revision": 1})
    assert (spec.spec_hash != first.spec_hash) == (revision != 1)
    assert ('"algorithm_revision"' in spec.canonical_json()) == (revision != 1)
    assert resolve_spec(first.model_dump()).algorithm_revision == 1  # a stored spec keeps the revision it states
    assert resolve_spec(spec.model_dump(exclude={"algorithm_revision"})).algorithm_revision == revision
