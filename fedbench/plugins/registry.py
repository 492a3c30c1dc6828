"""Name registries for plug-ins (algorithms, models, datasets, partitioners): ``PluginRegistry``.

Plug-ins register with a decorator, as torchvision's ``register_model`` does, or are declared by name and entry
point (``"package.module:attribute"``) and imported on first use, as gymnasium's ``register(id, entry_point=...)``
does: what a declaration states (``info``) is known without importing the module, so compiling a recipe or
listing the plug-ins need not import torch. Looking up an unknown name raises an error listing close matches.

**All or nothing.** ``Snapshot`` records what every registry holds and ``restore`` puts it back: a plug-in that
fails halfway through registering leaves none of its names (``fedbench.plugins.loading``). The built-in catalogues
(``fedbench.algorithms``, ``fedbench.models``, ``fedbench.data``) register themselves here once their built-ins are
in (``register_catalogue``): a catalogue first imported by the plug-in being loaded is recorded with its built-ins,
so restoring keeps them. This module imports none of them (they import it).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import importlib
import importlib.util
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from fedbench.errors import ConfigError, UnknownNameError

T = TypeVar("T")


class RegistryState(NamedTuple):
    """What a registry holds at one time (``PluginRegistry.state``)."""

    entries: dict[str, Any]
    entry_points: dict[str, str]
    info: dict[str, dict[str, Any]]


class PluginError(ConfigError):
    """A plug-in that cannot be loaded (it fails to import, or registers a name that exists), or whose code is not
    the code a run was planned with: one line naming the plug-in and the cause."""


class DuplicateName(ValueError):
    """A name registered (or declared) twice in one registry."""


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
        _REGISTRIES.add(self)  # so that a plug-in that fails to load leaves every registry as it was (``Snapshot``)

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
            raise DuplicateName(f"{self.kind} {name!r} registered twice: {self._owner(name)}")
        self._info[name] = info

    def _owner(self, name: str) -> str:
        """Who has ``name`` already, for the collision's message: fedbench itself (a built-in: its module is in the
        fedbench package) or the module of another plug-in."""
        entry = self._entry_points.get(name, "").partition(":")[0] or getattr(self._entries.get(name), "__module__", "")
        if entry == "fedbench" or entry.startswith("fedbench."):
            return f"{name!r} is a built-in {self.kind} of fedbench"
        return f"{name!r} is registered by {entry}" if entry else f"{name!r} is registered already"

    def get(self, name: str) -> T:
        """The plug-in ``name``, imported now if it was declared."""
        if name not in self._entries:
            self._entries[name] = self._load(name)
        return self._entries[name]

    def _load(self, name: str) -> T:
        if name not in self._info:
            close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(self.names())}"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; {hint}", self.kind, name)
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

    def origin(self, name: str) -> str | None:
        """The module that defines plug-in ``name`` (of a declared one not imported yet: its entry point's, read
        without importing it); None for an object that names no module."""
        if name in self._entries:
            return getattr(self._entries[name], "__module__", None)
        self.info(name)  # an unknown name: the error that lists close matches
        return self._entry_points[name].partition(":")[0]

    def _remove(self, names: Iterable[str]) -> None:
        """Forget ``names`` (a plug-in loaded again: the new code registers them anew)."""
        for name in names:
            self._entries.pop(name, None)
            self._entry_points.pop(name, None)
            self._info.pop(name, None)

    def state(self) -> RegistryState:
        """What the registry holds now (copies), for ``restore``."""
        return RegistryState(dict(self._entries), dict(self._entry_points), dict(self._info))

    def restore(self, state: RegistryState) -> None:
        """Hold what it held when ``state`` was taken: names added since are forgotten."""
        self._entries, self._entry_points, self._info = dict(state.entries), dict(state.entry_points), dict(state.info)

    def __contains__(self, name: object) -> bool:
        return name in self._info

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


_REGISTRIES: weakref.WeakSet[PluginRegistry[Any]] = weakref.WeakSet()
_CATALOGUES: weakref.WeakSet[PluginRegistry[Any]] = weakref.WeakSet()
_OPEN: list[Snapshot] = []  # the snapshots taken and not closed yet: a catalogue completing now joins them
_CHANGE_HOOKS: list[Callable[[], None]] = []


def registries() -> list[PluginRegistry[Any]]:
    """Every registry alive now."""
    return list(_REGISTRIES)


def register_catalogue(*registries: PluginRegistry[Any]) -> None:
    """Called by a built-in catalogue once every built-in name of ``registries`` is registered or declared: a
    snapshot open now (a plug-in being loaded imported the catalogue first) records them as they are, so that
    restoring it keeps the built-ins and forgets only the plug-in's names."""
    _CATALOGUES.update(registries)
    for snapshot in _OPEN:
        for registry in registries:
            snapshot.states.setdefault(registry, registry.state())


def catalogues() -> list[PluginRegistry[Any]]:
    """The registries of the built-in catalogues imported so far (``register_catalogue``), by kind."""
    return sorted(_CATALOGUES, key=lambda registry: registry.kind)


class Snapshot:
    """What every registry holds now (``states``), and, while it is open (``snapshot()``), what each catalogue that
    completes meanwhile holds as it completes (``register_catalogue``)."""

    def __init__(self) -> None:
        self.states: dict[PluginRegistry[Any], RegistryState] = {r: r.state() for r in registries()}

    def added(self) -> list[tuple[str, str]]:
        """(registry kind, name) of every name registered since, sorted."""
        return sorted(
            (registry.kind, name)
            for registry in registries()
            for name in set(registry._info) - set(self.states[registry].info if registry in self.states else ())
        )

    def restore(self) -> None:
        """Every registry as the snapshot recorded it (one created since and never recorded: as it is); the caches
        keyed by plug-in name clear themselves (``on_registry_change``)."""
        for registry, state in self.states.items():
            registry.restore(state)
        registries_changed()


@contextlib.contextmanager
def snapshot() -> Iterator[Snapshot]:
    """A ``Snapshot`` of every registry, open for the block."""
    taken = Snapshot()
    _OPEN.append(taken)
    try:
        yield taken
    finally:
        _OPEN.remove(taken)


def on_registry_change(hook: Callable[[], None]) -> Callable[[], None]:
    """Call ``hook`` whenever names leave a registry (a plug-in that failed, or one loaded again): caches keyed by
    plug-in name (``fedbench.recipes.resolve``) clear themselves."""
    _CHANGE_HOOKS.append(hook)
    return hook


def registries_changed() -> None:
    """Names left a registry: run every ``on_registry_change`` hook."""
    for hook in _CHANGE_HOOKS:
        hook()
