"""Name registries for plug-ins (algorithms, models, datasets, partitioners), the parameters of a function
plug-in (a dataset loader, model builder or partitioner), and loading plug-ins from outside fedbench.

Plug-ins register with a decorator, as torchvision's ``register_model`` does, or are declared by name and entry
point (``"package.module:attribute"``) and imported on first use, as gymnasium's ``register(id, entry_point=...)``
does: what a declaration states (``info``) is known without importing the module, so compiling a recipe or
listing the plug-ins need not import torch. Looking up an unknown name raises an error listing close matches.

**Plug-ins from outside fedbench** (``load_plugins``) register with the same public decorators as the built-ins:
``fedbench.algorithms.register_algorithm``, ``fedbench.models.register_model``, ``fedbench.data.register_dataset``
and ``fedbench.data.register_partitioner``. They come from installed distributions declaring the entry-point group
``fedbench.plugins`` (an entry point names a module to import, or a callable to call), from ``--plugin
MODULE_OR_PATH`` (a ``.py`` file, a package folder or a dotted module name) and from a recipe's ``plugins = [...]``.
Loading is all-or-nothing per plug-in: one that fails to import or registers a name that exists is one
``PluginError`` line naming it and the cause, and leaves none of its names registered. Every worker loads the same
plug-ins before it claims a run (``ExecutionOptions.plugins``).

**Identity of a plug-in's results.** A plug-in is identified by the sha256 of its source files (a file plug-in:
the file; a package or a module of a package: every ``.py`` file of its top-level package; a name registered
outside ``load_plugins``: the file of the module that defines it). The resolved spec of a run that uses a plug-in
from outside fedbench (any kind) carries that digest in ``RunSpec.plugin_code`` (``{kind: "sha256:…"}``), a field
left out of the hash while empty, as it is for the built-ins (so every existing hash stays): an edited plug-in gives
other spec hashes, so ``run`` trains its runs again and ``report`` shows only results of the current code. A
plug-in may instead declare which revision of its results its code gives, as the built-ins' ``result_revision``
does: a module-level ``FEDBENCH_REVISION = 2`` (an int ≥ 1) in its top module. The spec then carries
``"MODULE revision 2"``, not the digest, so editing the source keeps the hashes (raise the revision when an edit
changes results); ``run`` and ``report`` warn, on one line, when the source digest a shown run recorded in its
provenance differs from the current one (``source_changes``). A run's provenance records each plug-in it used:
module, distribution name and version, source digests, revision (``Plugin.record``).
"""

from __future__ import annotations

import ast
import difflib
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from fedbench.errors import ConfigError, UnknownNameError, field_error

T = TypeVar("T")


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
        _REGISTRIES.add(self)  # so that a plug-in that fails to load leaves every registry as it was

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
            raise DuplicateName(f"{self.kind} {name!r} registered twice")
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

    def origin(self, name: str) -> str | None:
        """The module that defines plug-in ``name`` (of a declared one not imported yet: its entry point's, read
        without importing it); None for an object that names no module."""
        if name in self._entries:
            return getattr(self._entries[name], "__module__", None)
        self.info(name)  # an unknown name: the error that lists close matches
        return self._entry_points[name].partition(":")[0]

    def _remove(self, names: Iterable[str]) -> None:
        """Forget ``names`` (a plug-in that failed to load, or one loaded again)."""
        for name in names:
            self._entries.pop(name, None)
            self._entry_points.pop(name, None)
            self._info.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._info

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


_REGISTRIES: weakref.WeakSet[PluginRegistry[Any]] = weakref.WeakSet()


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


# ---------------------------------------------------------------------------------------- loading plug-ins
ENTRY_POINT_GROUP = "fedbench.plugins"
REVISION_ATTRIBUTE = "FEDBENCH_REVISION"
# The built-in catalogues, imported by name (as declared entries are: this module depends on none of them) before a
# plug-in loads: their registries must exist before it does, so that one that fails can leave them as they were.
CATALOGUES = ("fedbench.algorithms", "fedbench.models", "fedbench.data")
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class PluginError(ConfigError):
    """A plug-in that cannot be loaded (it fails to import, or registers a name that exists), or whose code is not
    the code a run was planned with: one line naming the plug-in and the cause."""


@dataclass(frozen=True)
class Plugin:
    """A plug-in from outside fedbench, as loaded in this process."""

    source: str  # what loads it again in a worker: an absolute path, a module name, or "entry point NAME = VALUE"
    module: str  # the module it was imported as
    files: dict[str, str] = field(hash=False)  # {source file, relative to the folder holding the plug-in: sha256}
    revision: int | None = None  # its FEDBENCH_REVISION, if it declares one
    distribution: str | None = None  # the installed distribution that ships it, and its version
    version: str | None = None
    names: tuple[tuple[str, str], ...] = ()  # (registry kind, name) of every plug-in it registered

    @property
    def sha256(self) -> str:
        """The digest of its source: of a single file, the file's own (what ``sha256sum`` prints); else of the
        sorted (file, digest) list."""
        if len(self.files) == 1:
            return next(iter(self.files.values()))
        return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(self.files.items())).encode()).hexdigest()

    @property
    def code(self) -> str:
        """What a spec that uses it carries (``RunSpec.plugin_code``): its declared revision, else its digest."""
        return f"{self.module} revision {self.revision}" if self.revision is not None else f"sha256:{self.sha256}"

    def record(self) -> dict[str, Any]:
        """Its provenance entry."""
        return {
            "module": self.module,
            "source": self.source,
            "distribution": self.distribution,
            "version": self.version,
            "sha256": self.sha256,
            "files": dict(sorted(self.files.items())),
            "revision": self.revision,
            "names": [list(pair) for pair in self.names],
        }


_LOADED: dict[str, Plugin] = {}  # source → the plug-in loaded from it in this process
_DEFINED: dict[str, Plugin] = {}  # module → its record, for names registered outside load_plugins
_entry_points_loaded = False
_CHANGE_HOOKS: list[Callable[[], None]] = []


def on_registry_change(hook: Callable[[], None]) -> Callable[[], None]:
    """Call ``hook`` whenever names leave a registry (a plug-in that failed, or one loaded again): caches keyed by
    plug-in name (``fedbench.recipes.resolve``) clear themselves."""
    _CHANGE_HOOKS.append(hook)
    return hook


def _changed() -> None:
    _DEFINED.clear()
    for hook in _CHANGE_HOOKS:
        hook()


def load_plugins(
    sources: Sequence[str | os.PathLike[str]] = (),
    base: str | os.PathLike[str] | None = None,
    *,
    entry_points: bool = True,
) -> list[Plugin]:
    """Load the plug-ins ``sources`` name (a ``.py`` file, a package folder, or a dotted module name; a relative
    path is relative to ``base``, else the working directory) and, the first time (``entry_points``), those of the
    installed distributions' ``fedbench.plugins`` entry points. Each once per process: a source loaded before is
    not loaded again unless its files changed since (then its names are replaced by the new code's). Returns the
    plug-ins of ``sources``; raises ``PluginError`` for the first that fails, none of whose names stays
    registered."""
    global _entry_points_loaded
    if entry_points and not _entry_points_loaded:
        for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            _load_entry_point(point)
        _entry_points_loaded = True
    loaded = []
    for text in sources:
        kind, source = _resolve_source(str(text), Path(base) if base is not None else None)
        if kind == "path":
            name = _path_module(Path(source))
            installed = None if source in _LOADED else _loaded_from(Path(source), name)
            if installed is not None:  # e.g. an installed package's folder: its entry point loaded it already
                loaded.append(installed)
                continue
            loaded.append(_load(source, source, name, functools.partial(_import_path, Path(source), name)))
        else:
            loaded.append(_load(source, source, source, functools.partial(_import_module, source)))
    return loaded


def loaded_plugins() -> list[Plugin]:
    """Every plug-in loaded in this process so far."""
    return list(_LOADED.values())


def plugin_sources() -> tuple[str, ...]:
    """What a worker passes to ``load_plugins`` to load the plug-ins loaded here (entry points load by themselves)."""
    return tuple(source for source in _LOADED if not source.startswith("entry point "))


def plugin_source(text: str, base: str | os.PathLike[str] | None = None) -> str:
    """What ``load_plugins`` loads ``text`` as (an absolute path, or a module name), as workers are given it."""
    return _resolve_source(text, Path(base) if base is not None else None)[1]


def _resolve_source(text: str, base: Path | None) -> tuple[str, str]:
    """("path", absolute path) or ("module", dotted name): a path ends in ``.py``, has a separator, or exists."""
    path = Path(text).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    if text.endswith(".py") or "/" in text or os.sep in text or path.exists():
        if not path.exists():
            raise PluginError(f"plug-in {text}: no such file or folder ({path})")
        return "path", str(path.resolve())
    if not _MODULE_NAME.fullmatch(text):
        raise PluginError(f"plug-in {text!r}: not a .py file, a package folder or a module name")
    return "module", text


def _load(source: str, label: str, module: str, importer: Callable[[], tuple[dict[str, str], str | None]]) -> Plugin:
    """Import plug-in ``module`` (``importer``: its source files and distribution) all-or-nothing."""
    previous = _LOADED.get(source)
    if previous is not None:
        if _files_now(previous) == previous.files:
            return previous
        _unload(previous)  # edited since it was loaded in this process: its names are the new code's
    for catalogue in CATALOGUES:
        importlib.import_module(catalogue)
    before = {registry: set(registry._info) for registry in _REGISTRIES}
    modules_before = set(sys.modules)
    try:
        files, distribution = importer()
        revision = _revision(label, sys.modules.get(module))
    except BaseException as exc:
        for registry, names in before.items():
            registry._remove(set(registry._info) - names)
        for name in set(sys.modules) - modules_before:
            if name == module or name.startswith(f"{module}."):
                del sys.modules[name]
        _changed()
        if not isinstance(exc, Exception):
            raise
        if isinstance(exc, PluginError):
            raise
        raise PluginError(f"plug-in {label}: {_cause(exc)}") from None
    added = sorted(
        (registry.kind, name)
        for registry in list(_REGISTRIES)
        for name in set(registry._info) - before.get(registry, set())
    )
    plugin = Plugin(
        source=source,
        module=module,
        files=files,
        revision=revision,
        distribution=distribution,
        version=_version(distribution),
        names=tuple(added),
    )
    _LOADED[source] = plugin
    return plugin


def _cause(exc: BaseException) -> str:
    """One line saying why a plug-in failed."""
    if isinstance(exc, SyntaxError):
        # a file Python cannot even tokenise (null bytes: not Python source) has no file name or line
        where = f" in {exc.filename} line {exc.lineno}" if exc.filename and exc.lineno else ""
        return f"syntax error{where}: {exc.msg}"
    if isinstance(exc, DuplicateName):
        return f"{exc}: that name exists already (fedbench's or another plug-in's); register it under another name"
    if isinstance(exc, ImportError):
        return f"cannot import it: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _unload(plugin: Plugin) -> None:
    """Forget a plug-in: its names and its modules."""
    by_kind: dict[str, list[str]] = {}
    for kind, name in plugin.names:
        by_kind.setdefault(kind, []).append(name)
    for registry in list(_REGISTRIES):
        registry._remove(by_kind.get(registry.kind, ()))
    for name in list(sys.modules):
        if name == plugin.module or name.startswith(f"{plugin.module}."):
            del sys.modules[name]
    del _LOADED[plugin.source]
    _changed()


def _path_module(path: Path) -> str:
    """The module name a plug-in file or package folder is imported as: its own name."""
    if path.is_dir():
        if not (path / "__init__.py").is_file():
            raise PluginError(f"plug-in {path}: a folder plug-in is a package, and this one has no __init__.py")
        name = path.name
    elif path.suffix == ".py":
        name = path.stem
    else:
        raise PluginError(f"plug-in {path}: not a .py file or a package folder")
    if not name.isidentifier():
        raise PluginError(f"plug-in {path}: {name!r} is not a module name; rename it (letters, digits, _)")
    return name


def _loaded_from(path: Path, name: str) -> Plugin | None:
    """The plug-in loaded already (by another source: an entry point, a module name) whose module ``name`` is the
    file or package folder ``path`` itself; None if there is none."""
    module = sys.modules.get(name)
    location = getattr(module, "__file__", None)
    if location is None:
        return None
    own = path / "__init__.py" if path.is_dir() else path
    if Path(location).resolve() != own.resolve():
        return None
    return next((plugin for plugin in _LOADED.values() if plugin.module == name), None)


def _import_path(path: Path, name: str) -> tuple[dict[str, str], str | None]:
    """Import a ``.py`` file as the module ``name``, or a package folder as the package ``name``."""
    existing = sys.modules.get(name)
    if existing is not None:
        raise PluginError(
            f"plug-in {path}: a module named {name} is imported already "
            f"(from {getattr(existing, '__file__', None) or 'elsewhere'}: another package or plug-in of that name); "
            "rename the plug-in"
        )
    files = _digests(path)
    location, search = (path / "__init__.py", [str(path)]) if path.is_dir() else (path, None)
    spec = importlib.util.spec_from_file_location(name, location, submodule_search_locations=search)
    if spec is None or spec.loader is None:
        raise PluginError(f"plug-in {path}: Python cannot import it")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before it runs, as an import does: dataclasses and pickling look it up there
    spec.loader.exec_module(module)
    return files, None


def _import_module(name: str) -> tuple[dict[str, str], str | None]:
    importlib.import_module(name)
    return _module_files(name), _distribution_of(name)


def _load_entry_point(point: importlib.metadata.EntryPoint) -> None:
    """An entry point of ``fedbench.plugins``: a module to import, or a callable to call (``module:function``)."""
    dist = getattr(point, "dist", None)
    label = f"entry point {point.name} = {point.value}" + (f" of {dist.name}" if dist is not None else "")

    def importer() -> tuple[dict[str, str], str | None]:
        obj = point.load()
        if point.attr and callable(obj):
            obj()
        return _module_files(point.module), dist.name if dist is not None else None

    _load(f"entry point {point.name} = {point.value}", label, point.module, importer)


def _revision(label: str, module: types.ModuleType | None) -> int | None:
    value = getattr(module, REVISION_ATTRIBUTE, None)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PluginError(f"plug-in {label}: {REVISION_ATTRIBUTE} = {value!r}; expected an integer ≥ 1")
    return value


def _distribution_of(module: str) -> str | None:
    found = importlib.metadata.packages_distributions().get(module.split(".")[0])
    return found[0] if found else None


def _version(distribution: str | None) -> str | None:
    if distribution is None:
        return None
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# ---------------------------------------------------------------------------------------- source digests
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digests(path: Path) -> dict[str, str]:
    """{file: sha256} of a plug-in file, or of every ``.py`` file of a package folder (relative to its parent)."""
    if path.is_dir():
        return {str(f.relative_to(path.parent)): _sha256(f) for f in sorted(path.rglob("*.py"))}
    return {path.name: _sha256(path)}


def _module_files(name: str) -> dict[str, str]:
    """The source files of module ``name``: its top-level package's ``.py`` files, or the module's own file."""
    top = sys.modules.get(name.split(".")[0])
    if top is None:
        return {}
    folders = list(getattr(top, "__path__", ()))
    if folders:
        files: dict[str, str] = {}
        for folder in folders:
            files.update(_digests(Path(folder)))
        return files
    location = getattr(top, "__file__", None)
    return {Path(location).name: _sha256(Path(location))} if location else {}


def _files_now(plugin: Plugin) -> dict[str, str]:
    """A loaded plug-in's source digests as its files are now."""
    if plugin.source.startswith("entry point ") or not os.path.isabs(plugin.source):
        return plugin.files  # an installed module: changed on disk, it runs on as imported until the process ends
    path = Path(plugin.source)
    return _digests(path) if path.exists() else {}


# ---------------------------------------------------------------------------------------- identity
def is_builtin(module: str) -> bool:
    return module == "fedbench" or module.startswith("fedbench.")


def plugin_of(registry: PluginRegistry[Any], name: str) -> Plugin | None:
    """The plug-in from outside fedbench that provides ``name`` of ``registry`` (None: fedbench's own): the loaded
    plug-in that registered it, else the one whose module defines it, else a record of the defining module's file
    (a name registered by a script or a notebook, not through ``load_plugins``)."""
    for plugin in _LOADED.values():
        if (registry.kind, name) in plugin.names:
            return plugin
    module = registry.origin(name)
    if module is None or is_builtin(module):
        return None
    for plugin in _LOADED.values():
        if module == plugin.module or module.startswith(f"{plugin.module}."):
            return plugin
    if module not in _DEFINED:
        _DEFINED[module] = _defining_module(registry, name, module)
    return _DEFINED[module]


def _defining_module(registry: PluginRegistry[Any], name: str, module: str) -> Plugin:
    loaded = sys.modules.get(module)
    location = getattr(loaded, "__file__", None)
    if location is None:
        found = importlib.util.find_spec(module) if loaded is None else None
        location = found.origin if found is not None and found.has_location else None
    if location is not None and Path(location).is_file():
        files = {Path(location).name: _sha256(Path(location))}
    else:
        try:  # defined in a notebook or an interactive session: its source, where the session keeps it
            files = {f"<{module}.{name}>": hashlib.sha256(inspect.getsource(registry.get(name)).encode()).hexdigest()}
        except (OSError, TypeError):
            raise PluginError(
                f"{registry.kind} {name!r}: its source cannot be read, so its results could not be told from an "
                "edited version's; define it in a file and load it with --plugin FILE"
            ) from None
    return Plugin(
        source=str(location or module),
        module=module,
        files=files,
        revision=_revision(module, loaded),
        distribution=_distribution_of(module),
        version=_version(_distribution_of(module)),
        names=((registry.kind, name),),
    )


def _current(module: str) -> Plugin | None:
    for plugin in _LOADED.values():
        if plugin.module == module:
            return plugin
    return _DEFINED.get(module)


def source_changes(provenances: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """One warning line per plug-in that declares a revision and whose source digest, as runs recorded it in their
    provenance, differs from the code loaded now: those runs are shown as results of the current code because
    the revision is the same."""
    changed: dict[str, tuple[int, Any, str, str]] = {}
    for info in provenances:
        for record in (info or {}).get("plugins", ()):
            current = _current(str(record.get("module")))
            if current is None or record.get("revision") is None or record.get("sha256") == current.sha256:
                continue
            count = changed.get(current.module, (0,))[0]
            changed[current.module] = (count + 1, record["revision"], str(record.get("sha256")), current.sha256)
    return [
        f"{count} run(s) of plug-in {module} ({REVISION_ATTRIBUTE} {revision}) were trained by other source code "
        f"(sha256 {old[:12]}…, now {new[:12]}…); if the change alters results, raise its {REVISION_ATTRIBUTE}"
        for module, (count, revision, old, new) in changed.items()
    ]
