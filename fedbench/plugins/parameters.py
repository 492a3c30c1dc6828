"""The parameters of a function plug-in (a dataset loader, model builder or partitioner): its recipe parameters
and their defaults read from its signature, values checked against its annotations (strict JSON: as TOML or JSON
write them), and a recipe's values with every default filled in (``with_defaults``, used by
``fedbench.recipes.resolve``)."""

from __future__ import annotations

import functools
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from fedbench.errors import ConfigError, field_error


@functools.cache
def parameter_defaults(fn: Callable[..., Any], skip: frozenset[str]) -> dict[str, Any]:
    """{parameter: default} of a function plug-in's recipe parameters (``inspect.Parameter.empty`` where one is
    required), less those its caller supplies (``skip``) and ``*args`` / ``**kwargs``."""
    return {
        param.name: param.default
        for param in inspect.signature(fn).parameters.values()
        if param.name not in skip and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL)
    }


@functools.cache
def _parameter_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The parameters of a registered plug-in function (fixed: computed once; expanding a recipe checks thousands)."""
    return tuple(inspect.signature(fn).parameters)


def check_params(name: str, fn: Callable[..., Any], params: dict[str, Any], skip: set[str], what: str) -> None:
    """Every key of ``params`` is a parameter of ``fn`` (a loader, partitioner or model) and every value fits the
    parameter's annotation (checked, not converted: the values stay as given); else ``ConfigError``."""
    allowed = set(_parameter_names(fn)) - skip
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(
            f"{what} {name!r} has no parameter(s) {', '.join(map(repr, sorted(unknown)))}; "
            f"accepted: {', '.join(sorted(allowed)) or 'none'}"
        )
    for key, value in params.items():
        adapter = _parameter_adapter(fn, key)
        if adapter is None:
            continue
        try:
            as_json = json.dumps(value)
        except (TypeError, ValueError):
            continue  # a Python caller's own object (a path, an array): the callee checks it
        try:
            # strict JSON mode: the value must already be of the annotated type as TOML or JSON write it
            # ("0.5" is not a float, 2.0 is not an int), since the callee receives it unconverted
            adapter.validate_json(as_json, strict=True)
        except ValidationError as exc:
            raise ConfigError(f"{what} {name!r}: parameter {key} = {value!r}: {field_error(exc).message}") from None


@functools.cache
def parameter_hints(fn: Callable[..., Any], include_extras: bool = True) -> dict[str, Any]:
    """{parameter: annotation} of a function plug-in (of a class: of its ``__init__``), with ``Annotated`` extras
    (``HashNeutral``) unless ``include_extras`` is False; {} where one cannot be evaluated. The return annotation is left out: a model builder names
    its torch return type for type checkers only, so that reading its parameters imports no torch."""
    target = fn.__init__ if inspect.isclass(fn) else fn
    parameters = {key: hint for key, hint in inspect.get_annotations(target).items() if key != "return"}
    try:
        # typing evaluates the annotations of any object that has them, in the function's global namespace
        return typing.get_type_hints(
            types.SimpleNamespace(__annotations__=parameters),
            globalns=getattr(inspect.unwrap(target), "__globals__", {}),
            include_extras=include_extras,
        )
    except Exception:  # an unresolvable annotation: no checks nor markers from annotations, the callee checks values
        return {}


@functools.cache
def _parameter_adapter(fn: Callable[..., Any], key: str) -> TypeAdapter[Any] | None:
    """A pydantic validator for ``fn``'s parameter ``key``, or None where the annotation is missing or not one
    pydantic can check (tensors, modules)."""
    hint = parameter_hints(fn, include_extras=False).get(key)
    try:
        return TypeAdapter(hint) if hint is not None else None
    except Exception:  # an arbitrary annotation: the callee checks its own value
        return None


def json_value(value: Any) -> Any:
    """A default as JSON would hold it (tuples as lists, pydantic models as dicts), so a resolved dict round-trips."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return value


def with_defaults(
    name: str,
    fn: Callable[..., Any],
    params: dict[str, Any],
    skip: frozenset[str],
    what: str,
    section: str,
    defaults: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``params`` of function plug-in ``name`` checked (``check_params``) with every default filled in (``defaults``,
    else ``fn``'s own), as JSON would hold them; a missing required parameter is a ConfigError naming
    ``section.key``."""
    defaults = parameter_defaults(fn, skip) if defaults is None else defaults
    check_params(name, fn, params, set(skip), what)  # names, and values against the annotations
    missing = sorted(k for k, v in defaults.items() if v is inspect.Parameter.empty and k not in params)
    if missing:
        raise ConfigError(f"{what} {name!r} needs {section}.{missing[0]}")
    return {key: json_value(params[key] if key in params else default) for key, default in defaults.items()}
