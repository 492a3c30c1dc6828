"""Name registries for plug-ins (algorithms, models, datasets, partitioners), and the parameters of a function
plug-in (a dataset loader, model builder or partitioner).

Plug-ins register with a decorator, as torchvision's ``register_model`` does, or are declared by name and entry
point (``"package.module:attribute"``) and imported on first use, as gymnasium's ``register(id, entry_point=...)``
does: what a declaration states (``info``) is known without importing the module, so compiling a recipe or
listing the plug-ins need not import torch. Looking up an unknown name raises an error listing close matches.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib
import importlib.util
import inspect
import json
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from fedbench.errors import ConfigError, UnknownNameError, field_error

T = TypeVar("T")


class PluginRegistry(Generic[T]):
    """Plug-ins of one kind by name, each with its ``info`` (papers, defaults: whatever the kind records).

    ``describe``: the info a plug-in's object states itself (an algorithm's ``Params``): recorded when it registers,
    and checked against the declaration when a declared entry is imported.
    """

    def __init__(self, kind: str, describe: Callable[[T], dict[str, Any]] | None = None):
        self.kind = kind
        self._describe = describe or (lambda obj: {})
        self._entries: dict[str, T] = {}  # the plug-ins imported so far
        self._entry_points: dict[str, str] = {}  # name -> "package.module:attribute" of a declared plug-in
        self._info: dict[str, dict[str, Any]] = {}  # every name, registered or declared

    def register(self, name: str, **info: Any) -> Callable[[T], T]:
        """Decorator: register the plug-in it decorates as ``name`` now."""

        def decorator(obj: T) -> T:
            self._add(name, {**info, **self._describe(obj)})
            self._entries[name] = obj
            return obj

        return decorator

    def declare(self, name: str, entry_point: str, **info: Any) -> None:
        """Declare plug-in ``name`` without importing it: ``entry_point`` (``"package.module:attribute"``) is imported
        by the first ``get(name)``; ``names``, ``info`` and ``doc`` never import it."""
        module, _, attribute = entry_point.partition(":")
        if not module or not attribute:
            raise ValueError(f"{self.kind} {name!r}: entry point {entry_point!r} is not 'package.module:attribute'")
        self._add(name, info)
        self._entry_points[name] = entry_point

    def _add(self, name: str, info: dict[str, Any]) -> None:
        if name in self._info:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._info[name] = info

    def get(self, name: str) -> T:
        """The plug-in ``name``, imported now if it was declared."""
        if name not in self._entries:
            self._entries[name] = self._load(name)
        return self._entries[name]

    def _load(self, name: str) -> T:
        if name not in self._info:
            close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(self.names())}"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; {hint}")
        entry_point = self._entry_points[name]
        module, _, attribute = entry_point.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attribute)
        except ModuleNotFoundError as exc:
            if exc.name is None or not f"{module}.".startswith(f"{exc.name}."):
                raise  # a dependency of the module is missing: its own error says which
            raise ConfigError(f"{self.kind} {name!r}: no module {module} (entry point {entry_point})") from None
        except AttributeError:
            raise ConfigError(
                f"{self.kind} {name!r}: module {module} has no {attribute} (entry point {entry_point})"
            ) from None
        for key, value in self._describe(obj).items():
            if self._info[name].get(key) != value:
                raise ConfigError(
                    f"{self.kind} {name!r}: {entry_point} has {key} {value!r}, declared {self._info[name].get(key)!r}"
                )
        return obj

    def info(self, name: str) -> dict[str, Any]:
        if name not in self._info:
            self._load(name)  # raises the error that lists close matches
        return self._info[name]

    def doc(self, name: str) -> str:
        """The plug-in's docstring, else its module's (``""`` if neither has one); of a declared plug-in not yet
        imported, read from its module's source without running it."""
        if name in self._entries:
            obj = self._entries[name]
            return obj.__doc__ or getattr(sys.modules.get(obj.__module__), "__doc__", None) or ""
        self.info(name)  # an unknown name: the error that lists close matches
        module, _, attribute = self._entry_points[name].partition(":")
        found = importlib.util.find_spec(module)
        if found is None or found.origin is None:
            return ""
        tree = ast.parse(Path(found.origin).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == attribute:
                return ast.get_docstring(node, clean=False) or ast.get_docstring(tree, clean=False) or ""
        return ast.get_docstring(tree, clean=False) or ""

    def names(self) -> list[str]:
        return sorted(self._info)

    def __contains__(self, name: object) -> bool:
        return name in self._info

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
