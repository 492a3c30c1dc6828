"""Resolve a plug-in's parameters: the recipe's values with every default filled in.

A RunSpec stores its ``algorithm_params``, ``dataset_params``, ``model_params`` and ``partition_params``
resolved, so the spec (and its hash) says everything that determines the curve: changing a default
(FedTrip's ``mu``, Dirichlet's ``min_size``) changes the hash of every run that relied on it, and a
recipe that spells a default out compiles to the same run as one that leaves it implicit.

Algorithms declare parameters as pydantic models (``fedbench/algorithms/params.py``); datasets, models and
partitioners as keyword arguments with defaults (a model's: its builder in ``fedbench/models/zoo.py``). None of
them imports torch, so neither does resolving a spec (but for FedFomo's result revision, which builds the model to
see whether it has BatchNorm). A parameter added later, whose default keeps the old
behaviour, is marked ``Annotated[..., HashNeutral(old_value)]`` on the field itself: while it holds that
value it is left out of the canonical JSON, so existing spec hashes stay valid (``fedbench.spec``).

``resolve_spec`` is the one place a RunSpec meets the plug-in registries: it fills the defaults in and records
what hashing needs from the plug-ins (``RunSpec.neutral_params``, ``RunSpec.algorithm_revision``,
``RunSpec.plugin_code``), so the spec itself stays plain data.

A plug-in from outside fedbench (``fedbench.plugins.load_plugins``) is identified in the spec by the sha256 of its
source, or by the revision it declares (``FEDBENCH_REVISION``): ``RunSpec.plugin_code``, empty (so hash-neutral)
for fedbench's own. ``check_plugin_code`` is a worker's check that it loaded the code a run was planned with, and
``plugin_records`` what the run's provenance records of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from fedbench.algorithms import ALGORITHMS, params_class, validate_algorithm_params
from fedbench.data import DATASETS, LOADER_ARGUMENTS
from fedbench.data.partition import PARTITIONERS
from fedbench.models import MODELS
from fedbench.plugins import (
    PluginError,
    PluginRegistry,
    json_value,
    on_registry_change,
    parameter_defaults,
    parameter_hints,
    plugin_of,
    with_defaults,
)
from fedbench.spec import PLUGIN_KINDS, HashNeutral, RunSpec, neutral_fields

# Arguments the engine supplies itself: not parameters a recipe may set.
ENGINE_ARGUMENTS: dict[str, frozenset[str]] = {
    "dataset": LOADER_ARGUMENTS,
    "model": frozenset({"num_classes", "input_shape"}),
    "partition": frozenset({"labels", "groups", "num_clients", "rng"}),
}
_WHAT = {"dataset": "dataset", "model": "model", "partition": "partitioner"}


def _registry(kind: str) -> PluginRegistry[Any]:
    registries: dict[str, PluginRegistry[Any]] = {
        "algorithm": ALGORITHMS,
        "dataset": DATASETS,
        "model": MODELS,
        "partition": PARTITIONERS,
    }
    return registries[kind]


@cache
def _signature(kind: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(defaults, hash-neutral values) of a function plug-in's recipe parameters."""
    fn = _registry(kind).get(name)
    hints = parameter_hints(fn)
    defaults = parameter_defaults(fn, ENGINE_ARGUMENTS[kind])
    neutral = {
        key: marker.value
        for key in defaults
        for marker in getattr(hints.get(key), "__metadata__", ())
        if isinstance(marker, HashNeutral)
    }
    return defaults, neutral


on_registry_change(_signature.cache_clear)  # a plug-in loaded again may give a name another signature


def resolve_params(kind: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every default of plug-in ``name`` filled in; an unknown or missing parameter is a
    ConfigError naming it (an unknown plug-in name an UnknownNameError with close matches)."""
    if kind == "algorithm":
        return validate_algorithm_params(name, params).model_dump(mode="json")
    fn = _registry(kind).get(name)
    return with_defaults(
        name, fn, params, ENGINE_ARGUMENTS[kind], _WHAT[kind], f"{kind}_params", defaults=_signature(kind, name)[0]
    )


def non_default(kind: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a resolved dict that differ from the plug-in's defaults (what a recipe changed)."""
    defaults = resolve_params(kind, name, {})
    return {key: value for key, value in params.items() if key not in defaults or defaults[key] != value}


def neutral_params(kind: str, name: str) -> dict[str, Any]:
    """The plug-in's parameters marked ``HashNeutral`` and the value at which each is left out of the hash."""
    if kind == "algorithm":
        return neutral_fields(params_class(name))
    return _signature(kind, name)[1]


def plugin_code(kind: str, name: str) -> str | None:
    """What identifies the code of plug-in ``name`` of ``kind`` in a spec (``RunSpec.plugin_code``): None for
    fedbench's own."""
    plugin = plugin_of(_registry(kind), name)
    return plugin.code if plugin is not None else None


def _plugin_names(spec: RunSpec) -> dict[str, str]:
    return {kind: getattr(spec, kind) for kind in PLUGIN_KINDS}


def check_plugin_code(spec: RunSpec) -> None:
    """The plug-ins loaded here are the code ``spec`` was planned with; else a ``PluginError`` (a worker that loaded
    another version of a plug-in must not record its results under the spec)."""
    for kind, name in _plugin_names(spec).items():
        here, planned = plugin_code(kind, name), spec.plugin_code.get(kind)
        if here != planned:
            own = "fedbench's own"
            raise PluginError(
                f"{kind} {name!r}: this worker has {here or own}, the run was planned with {planned or own}; "
                "give every worker the same plug-in code (--plugin)"
            )


def plugin_records(spec: RunSpec) -> list[dict[str, Any]]:
    """The provenance of the plug-ins from outside fedbench that ``spec`` uses (``fedbench.plugins.Plugin.record``),
    each once, with the kinds it provides to the run."""
    records: dict[str, dict[str, Any]] = {}
    for kind, name in _plugin_names(spec).items():
        plugin = plugin_of(_registry(kind), name)
        if plugin is not None:
            records.setdefault(plugin.module, {**plugin.record(), "used_as": []})["used_as"].append(kind)
    return list(records.values())


# Resolved fields a stored spec keeps as it was trained (when it states them), instead of deriving them again.
_STATED_KEPT = ("algorithm_revision", "plugin_code")


def resolve_spec(data: Mapping[str, Any] | RunSpec) -> RunSpec:
    """The RunSpec ``data`` describes, resolved: every plug-in parameter's default filled in (an unknown or missing
    parameter is a ConfigError, an unknown plug-in an UnknownNameError, both before the spec's own checks), the
    plug-in parameters marked ``HashNeutral`` recorded, the code of the plug-ins from outside fedbench recorded
    (``plugin_code``) and the method's result revision set, the last two unless ``data`` states them (a stored
    spec keeps those it was trained at). Idempotent: a resolved spec resolves to itself."""
    if isinstance(data, RunSpec):
        stated = data.model_fields_set
        data = {key: value for key, value in data.model_dump().items() if key not in _STATED_KEPT or key in stated}
    fields = dict(data)
    marked: dict[str, dict[str, Any]] = {}
    codes: dict[str, str] = {}
    for kind in PLUGIN_KINDS:
        name = fields.get(kind, RunSpec.model_fields[kind].default)
        params = fields.get(f"{kind}_params") or {}
        if isinstance(name, str) and isinstance(params, dict):
            fields[f"{kind}_params"] = resolve_params(kind, name, params)
            if neutral := neutral_params(kind, name):
                marked[kind] = json_value(neutral)
            if (code := plugin_code(kind, name)) is not None:
                codes[kind] = code
    fields["neutral_params"] = marked
    fields.setdefault("plugin_code", codes)
    spec = RunSpec(**fields)
    if "algorithm_revision" in fields:
        return spec
    revision = params_class(spec.algorithm).result_revision(spec)
    return spec.model_copy(update={"algorithm_revision": revision})


__all__ = [
    "PLUGIN_KINDS",
    "ENGINE_ARGUMENTS",
    "check_plugin_code",
    "non_default",
    "neutral_params",
    "plugin_code",
    "plugin_records",
    "resolve_params",
    "resolve_spec",
]
