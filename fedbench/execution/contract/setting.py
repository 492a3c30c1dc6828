"""The setting the contract's checks train (``SETUP``, ``contract_spec``) and its variants (a method's declared
FedAvg setting: ``fedavg_setting_spec``), each spec resolved by the recipe resolver (``fedbench.recipes.resolve``),
as a recipe's cells are.

**Declaring a FedAvg setting.** A method states, when it registers, the parameters (and, where needed, the run
settings) with which it is FedAvg: ``register_algorithm(name, fedavg_setting={"algorithm_params": {...}, "setup":
{...}})``, either part optional; e.g. FedProx's ``{"algorithm_params": {"mu": 0.0}}`` (Eq. 2 without its term),
FedNova's ``{"setup": {"local_steps": 2}}`` (equal step counts: every a_i equal). ``fedavg_setting_spec`` applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from fedbench.errors import ConfigError, field_error
from fedbench.recipes.resolve import resolve_spec
from fedbench.spec import RunSpec

# The setting the checks train (``contract_spec``): 3 rounds of 3 of 4 clients (so clients return with their state
# and others skip a round) on digits with a tiny MLP; unequal client sizes (Dirichlet 0.5), momentum, client test
# and validation splits, and both global and personal evaluation.
SETUP: dict[str, Any] = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 16},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 20},
    "num_clients": 4,
    "clients_per_round": 3,
    "rounds": 3,
    "batch_size": 32,
    "optimizer": {"lr": 0.05, "momentum": 0.5},
    "eval_mode": "both",
    "client_test_fraction": 0.2,
    "client_val_fraction": 0.1,
}

# What resolve_spec derives from the other fields (and keeps where they are stated): a variant leaves them out.
_DERIVED = ("algorithm_revision", "plugin_code", "neutral_params")


def _merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes``, nested tables merged key by key (``optimizer.momentum`` keeps ``optimizer.lr``)."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _spec(fields_: Mapping[str, Any]) -> RunSpec:
    """The spec ``fields_`` describe, resolved as a recipe's cell is (``resolve_spec``: every plug-in parameter's
    default filled in, the method's result revision, the plug-ins' code); an unknown plug-in or parameter, or a bad
    value, is one line (``ConfigError``)."""
    try:
        return resolve_spec(fields_)
    except ValidationError as exc:
        raise ConfigError(f"check setting: {field_error(exc).line()}") from None


def contract_spec(algorithm: str, algorithm_params: Mapping[str, Any] | None = None, **setup: Any) -> RunSpec:
    """The spec the checks train: ``SETUP`` with ``setup`` merged in (nested tables key by key). A model other than
    SETUP's starts from no ``model_params``; ``num_clients`` without ``clients_per_round`` trains all but one client
    per round. ``ConfigError`` (one line) for a bad value."""
    base = dict(SETUP)
    if setup.get("model", base["model"]) != base["model"]:
        base["model_params"] = {}
    if "num_clients" in setup and "clients_per_round" not in setup:
        base["clients_per_round"] = max(1, int(setup["num_clients"]) - 1)
    merged = _merge(base, setup)
    return _spec({**merged, "algorithm": algorithm, "algorithm_params": dict(algorithm_params or {})})


def _variant(spec: RunSpec, **changes: Any) -> RunSpec:
    """``spec`` with ``changes`` merged in, resolved again: what ``resolve_spec`` derives (``_DERIVED``) is derived
    anew, so that another method or setting gets its own."""
    return _spec(_merge(_stated(spec), changes))


def with_method(spec: RunSpec, algorithm: str, algorithm_params: Mapping[str, Any]) -> RunSpec:
    """``spec``'s setting trained by another method, with these parameters (none of the first method's)."""
    return _spec({**_stated(spec), "algorithm": algorithm, "algorithm_params": dict(algorithm_params)})


def _stated(spec: RunSpec) -> dict[str, Any]:
    """``spec``'s fields less those ``resolve_spec`` derives from them."""
    return {key: value for key, value in spec.model_dump().items() if key not in _DERIVED}


def fedavg_setting_spec(spec: RunSpec, setting: Mapping[str, Any]) -> RunSpec:
    """``spec`` in a method's declared FedAvg setting (``{"algorithm_params": {...}, "setup": {...}}``)."""
    unknown = set(setting) - {"algorithm_params", "setup"}
    if unknown:
        raise ConfigError(
            f"{spec.algorithm}: fedavg_setting has key(s) {', '.join(sorted(unknown))}; "
            "expected algorithm_params and/or setup"
        )
    return _variant(spec, **dict(setting.get("setup", {})), algorithm_params=dict(setting.get("algorithm_params", {})))


def setting_text(setting: Mapping[str, Any]) -> str:
    """A declared FedAvg setting in words: ``mu=0.0``, ``local_steps=2``; ``as it is`` for an empty one."""
    parts = [f"{k}={v!r}" for part in ("algorithm_params", "setup") for k, v in setting.get(part, {}).items()]
    return ", ".join(parts) or "as it is"
