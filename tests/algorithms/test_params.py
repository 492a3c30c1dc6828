"""Every method's hyperparameters (``fedbench.algorithms.params``): immutable once validated, no unknown keys,
no regularizer unless one is configured, the documented defaults and the bounds of each method's parameters."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fedbench.algorithms import ALGORITHMS, build_algorithm, validate_algorithm_params
from fedbench.errors import ConfigError
from fedbench.report.plugin_listing import algorithm_entries


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


BASELINES = (
    "scaffold",
    "feddyn",
    "moon",
    "fedntd",
    "fednova",
    "slowmo",
    "fedexp",
    "fedbabu",
    "spherefed",
    "fedetf",
    "dot_regression",
)


# ------------------------------------------------------------------------------------------- registry
@pytest.mark.usefixtures("linear_model")
def test_every_baseline_is_registered_and_accepts_regularizers():
    for name in BASELINES + ("fedavg", "fedprox"):
        assert name in ALGORITHMS
        params = validate_algorithm_params(name, {"regularizers": [{"name": "kd", "weight": 0.1, "tau": 2}]})
        (kd,) = params.regularizers
        assert (kd.name, kd.weight, kd.tau, kd.mode) == ("kd", 0.1, 2.0, "convex")
    assert (
        validate_algorithm_params("fedavg", {"regularizers": [{"name": "prox", "weight": 1}]}).regularizers[0].mode
        == "add"
    )
    with pytest.raises(ConfigError, match="regularizers"):
        validate_algorithm_params("moon", {"regularizers": [{"name": "kdd", "weight": 0.1}]})
    with pytest.raises(ConfigError, match="sum to more than 1"):
        validate_algorithm_params(
            "fedavg", {"regularizers": [{"name": "kd", "weight": 0.6}, {"name": "fd", "weight": 0.6}]}
        )
    with pytest.raises(ConfigError, match="weight"):
        validate_algorithm_params("fedavg", {"regularizers": [{"name": "ld"}]})
    with pytest.raises(ConfigError, match="alpha"):
        validate_algorithm_params("feddyn", {"alpha": 0})
    with pytest.raises(ConfigError, match="variant"):
        validate_algorithm_params("fedexp", {"variant": "nope"})


# ------------------------------------------------------------------------------------------- defaults and bounds
@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize(
    "name, defaults",
    [
        ("fedprox", {"mu": 0.01}),  # FedProx paper's smallest grid value; recipes set theirs
        ("scaffold", {"server_lr": 1.0, "control_update": "paper", "momentum_corrected_steps": True}),
        ("fedtrip", {"mu": 0.4, "xi_rule": "inverse_gap", "epoch_scaled": False}),  # FedTrip spec §1.3, §1.5
        ("fednova", {"normalize_buffers": True}),
        ("feddyn", {"alpha": 0.01}),
        ("moon", {"mu": 1.0, "tau": 0.5, "representation": "features"}),  # FedTrip [paper] μ = 1, τ = 0.5
        ("slowmo", {"beta": 0.9, "slow_lr": 1.0}),  # FedTrip [code] server_momentum
        ("fedntd", {"beta": 1.0, "tau": 3.0}),  # FedNTD's β = 1, τ = 3 (FedDr+ spec's baseline settings)
        ("fedetf", {"beta": 1.0}),  # balanced softmax with the plain class counts
        ("fedhkd", {"lam": 0.05, "gamma": 0.05, "temperature": 0.5, "noise_std": 2.0}),  # FedHKD [code], LG-Mix none
        ("local", {"loss": "ce"}),  # plain local training minimises the task loss
        ("fedexp", {"epsilon": 0.001, "variant": "original"}),  # ε = 0.001 (FedDr+ spec), the paper's Eq. 9
        ("fedfomo", {"m": 5, "val_fraction": 0.2}),  # M = 5, a 0.2 validation split (LG-Mix spec)
        ("l2sgd", {"lam": 0.1, "p": 0.5}),  # [proposal]: the LG-Mix spec leaves λ and p open
    ],
)
def test_method_defaults_are_the_documented_ones(name, defaults):
    params = build_algorithm(name, {}).params
    assert {key: getattr(params, key) for key in defaults} == defaults


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize(
    "name, accepted, rejected",
    [
        ("fedprox", {"mu": 0.0}, {"mu": -1e-9}),
        ("scaffold", {"server_lr": 1e-9}, {"server_lr": 0.0}),
        ("fedtrip", {"mu": 0.0}, {"mu": -1e-9}),
        ("feddyn", {"alpha": 1e-9}, {"alpha": 0.0}),
        ("moon", {"mu": 0.0, "tau": 1e-9}, {"tau": 0.0}),
        ("moon", {"mu": 0.0}, {"mu": -1e-9}),
        ("slowmo", {"beta": 0.0, "slow_lr": 1e-9}, {"beta": 1.0}),
        ("slowmo", {"beta": 0.999}, {"beta": -1e-9}),
        ("slowmo", {"slow_lr": 1e-9}, {"slow_lr": 0.0}),
        ("fedntd", {"beta": 0.0, "tau": 1e-9}, {"tau": 0.0}),
        ("fedntd", {"beta": 0.0}, {"beta": -1e-9}),
        ("fedetf", {"beta": 0.0}, {"beta": -1e-9}),
        ("fedfomo", {"m": 1, "val_fraction": 0.999}, {"val_fraction": 1.0}),  # M ≥ 1 peer, a split of the data
        ("fedfomo", {"val_fraction": 1e-9}, {"m": 0}),
        ("fedhkd", {"noise_std": 0.0}, {"noise_std": -1e-9}),  # no noise allowed
        ("l2sgd", {"p": 1.0, "lam": 0.0}, {"p": 1 + 1e-9}),  # a probability; p = 1: average every round
        ("l2sgd", {"p": 1e-9}, {"p": 0.0}),
        ("mofedsam", {"alpha": 1.0}, {"alpha": 1 + 1e-9}),  # α weighs g̃ against Δ: a share
        ("mofedsam", {"alpha": 1e-9}, {"alpha": 0.0}),
    ],
)
def test_method_parameter_bounds(name, accepted, rejected):
    from fedbench.algorithms import validate_algorithm_params
    from fedbench.errors import ConfigError

    validate_algorithm_params(name, accepted)
    with pytest.raises(ConfigError, match=next(iter(rejected))):
        validate_algorithm_params(name, rejected)


# ------------------------------------------------------------------------------------------- defaults and bounds
@pytest.mark.parametrize(
    "name, defaults",
    [
        ("fedrep", {"head_epochs": None, "body_epochs": 1}),
        ("fedalt", {"personal_fraction": 0.5}),
        ("ditto", {"lam": 0.75, "personal_epochs": None}),
        ("apfl", {"alpha": 0.5, "adaptive_alpha": True, "alpha_lr": None}),
        ("perfedavg", {"beta": 1e-3, "adapt_steps": 1}),
        ("local", {"loss": "ce"}),
    ],
)
def test_personalised_method_defaults_are_the_documented_ones(name, defaults):
    params = build_algorithm(name, {}).params
    assert {key: getattr(params, key) for key in defaults} == defaults


@pytest.mark.parametrize(
    "name, accepted, rejected",
    [
        ("fedrep", {"head_epochs": 0, "body_epochs": 0}, {"head_epochs": -1}),
        ("fedrep", {"body_epochs": 0}, {"body_epochs": -1}),
        ("fedalt", {"personal_fraction": 0.0}, {"personal_fraction": -1e-9}),
        ("fedalt", {"personal_fraction": 1.0}, {"personal_fraction": 1 + 1e-9}),
        ("ditto", {"lam": 0.0, "personal_epochs": 0}, {"lam": -1e-9}),
        ("ditto", {"personal_epochs": 0}, {"personal_epochs": -1}),
        ("apfl", {"alpha": 0.0, "alpha_lr": 1e-9}, {"alpha": -1e-9}),
        ("apfl", {"alpha": 1.0}, {"alpha": 1 + 1e-9}),
        ("apfl", {"alpha_lr": 1e-9}, {"alpha_lr": 0.0}),
        ("perfedavg", {"beta": 1e-9, "adapt_steps": 0}, {"beta": 0.0}),
        ("perfedavg", {"adapt_steps": 0}, {"adapt_steps": -1}),
        ("local", {"loss": "dr"}, {"loss": "mse"}),
    ],
)
def test_personalised_method_parameter_bounds(name, accepted, rejected):
    validate_algorithm_params(name, accepted)
    with pytest.raises(ConfigError, match=next(iter(rejected))):
        validate_algorithm_params(name, rejected)


def test_feddr_plus_is_dot_regression_with_the_feature_distillation_weight_of_eq_4():
    """FedDr+ Eq. 4 with β = 0.9: L_Dr+ = β·L_DR + (1 − β)·L_FD, the FD term a convex regularizer of weight 0.1."""
    from fedbench.algorithms import validate_algorithm_params
    from fedbench.algorithms.params import FEDDR_PLUS_PARAMS

    assert FEDDR_PLUS_PARAMS == {"regularizers": [{"name": "fd", "weight": 0.1}]}
    (regularizer,) = validate_algorithm_params("dot_regression", FEDDR_PLUS_PARAMS).regularizers
    assert (regularizer.name, regularizer.weight, regularizer.mode) == ("fd", 0.1, "convex")


@pytest.mark.parametrize(
    "name, choices, rejected",
    [
        ("fedimpro", {"sample_from": ["local", "global"]}, {"sample_from": "server"}),
        ("local", {"loss": ["ce", "dr"]}, {"loss": "mse"}),
        ("fedexp", {"variant": ["original", "feddrplus_code"]}, {"variant": "code"}),
        ("fedimpro", {"stat_weight": ["code", "count", "beta"]}, {"stat_weight": "paper"}),
        ("fedimpro", {"feature_weight_sched": ["gradual", "capped", "constant"]}, {"feature_weight_sched": "linear"}),
        (
            "fedtr",
            {"r_reduction": ["mse", "sum_dim_mean_batch"], "drift_update": ["feddc", "grad"]},
            {"r_reduction": "l1"},
        ),
        ("fedtrip", {"xi_rule": ["inverse_gap", "gap", "const"]}, {"xi_rule": "linear"}),
        ("moon", {"representation": ["features", "pre_activation"]}, {"representation": "logits"}),
    ],
)
def test_every_documented_choice_is_accepted(name, choices, rejected):
    from fedbench.algorithms import validate_algorithm_params
    from fedbench.errors import ConfigError

    for key, values in choices.items():
        for value in values:
            assert getattr(validate_algorithm_params(name, {key: value}), key) == value
    with pytest.raises(ConfigError, match=next(iter(rejected))):
        validate_algorithm_params(name, rejected)


def test_importing_the_parameters_builds_no_validator():
    """Every method's validator is built when its parameters are first checked (pydantic's defer_build), not all of
    them when the module is imported: a command that resolves one spec builds one."""
    import subprocess
    import sys

    code = (
        "from fedbench.algorithms import params as p\n"
        "classes = [p.RegularizerSpec, p.NoParams, *p.NoParams.__subclasses__()]\n"
        "print(len(classes), sorted(c.__name__ for c in classes if c.__pydantic_complete__))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(
        " ", 1
    )
    assert int(found[0]) > 20 and found[1].strip() == "[]"
