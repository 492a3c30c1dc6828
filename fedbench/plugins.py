"""Name registries for plug-ins (algorithms, models, datasets, partitioners), and the parameters of a function
plug-in (a dataset loader, model builder or partitioner).

Plug-ins register with a decorator, as torchvision's ``register_model`` does; looking up an unknown
name raises an error listing close matches.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import typing
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from fedbench.errors import ConfigError, UnknownNameError, field_error

T = TypeVar("T")


class PluginRegistry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._info: dict[str, dict[str, Any]] = {}

    def register(self, name: str, **info: Any) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = obj
            self._info[name] = info
            return obj

        return decorator

    def get(self, name: str) -> T:
        if name not in self._entries:
            close = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(self._entries))}"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; {hint}")
        return self._entries[name]

    def info(self, name: str) -> dict[str, Any]:
        self.get(name)
        return self._info[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


# ---------------------------------------------------------------------------------------- function plug-ins
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
def _parameter_adapter(fn: Callable[..., Any], key: str) -> TypeAdapter[Any] | None:
    """A pydantic validator for ``fn``'s parameter ``key``, or None where the annotation is missing or not one
    pydantic can check (tensors, modules)."""
    try:
        hints = typing.get_type_hints(fn.__init__ if inspect.isclass(fn) else fn)
        return TypeAdapter(hints[key]) if key in hints else None
    except Exception:  # an unresolvable or arbitrary annotation: the callee checks its own value
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
