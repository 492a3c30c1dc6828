"""Loading plug-ins from outside fedbench (``load_plugins``).

They register with the same public decorators as the built-ins: ``fedbench.algorithms.register_algorithm``,
``fedbench.models.register_model``, ``fedbench.data.register_dataset`` and ``fedbench.data.register_partitioner``.
They come from installed distributions declaring the entry-point group ``fedbench.plugins`` (an entry point names a
module to import, or a callable to call), from ``--plugin MODULE_OR_PATH`` (a ``.py`` file, a package folder or a
dotted module name) and from a recipe's ``plugins = [...]``. Loading is all-or-nothing per plug-in: one that fails
to import or registers a name that exists is one ``PluginError`` line naming it and the cause, and leaves none of
its names registered (a registry ``snapshot``, restored). Every worker loads the same plug-ins before it claims a
run (``ExecutionOptions.plugins``). Each loaded plug-in is recorded with its source's identity
(``fedbench.plugins.identity``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fedbench.plugins.identity import (
    LOADED,
    Plugin,
    _digests,
    _distribution_of,
    _module_files,
    _revision,
    _version,
)
from fedbench.plugins.registry import DuplicateName, PluginError, registries, registries_changed, snapshot

ENTRY_POINT_GROUP = "fedbench.plugins"
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_entry_points_loaded = False


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
            installed = None if source in LOADED else _loaded_from(Path(source), name)
            if installed is not None:  # e.g. an installed package's folder: its entry point loaded it already
                loaded.append(installed)
                continue
            loaded.append(_load(source, source, name, functools.partial(_import_path, Path(source), name)))
        else:
            loaded.append(_load(source, source, source, functools.partial(_import_module, source)))
    return loaded


def loaded_plugins() -> list[Plugin]:
    """Every plug-in loaded in this process so far."""
    return list(LOADED.values())


def plugin_sources() -> tuple[str, ...]:
    """What a worker passes to ``load_plugins`` to load the plug-ins loaded here (entry points load by themselves)."""
    return tuple(source for source in LOADED if not source.startswith("entry point "))


def plugin_source(text: str, base: str | os.PathLike[str] | None = None) -> str:
    """What ``load_plugins`` loads ``text`` as (an absolute path, or a module name), as workers are given it."""
    return _resolve_source(text, Path(base) if base is not None else None)[1]


def _resolve_source(text: str, base: Path | None) -> tuple[str, str]:
    """("path", absolute path) or ("module", dotted name): a path ends in ``.py``, has a separator, or exists."""
    given = Path(text).expanduser()
    path = base / given if not given.is_absolute() and base is not None else given
    if text.endswith(".py") or "/" in text or os.sep in text or path.exists():
        if not path.exists():
            against = (
                ""
                if given.is_absolute()
                else f"; a relative path is resolved against the recipe's folder {base.absolute()}"
                if base is not None
                else f"; a relative path is resolved against the working directory {Path.cwd()}"
            )
            raise PluginError(f"plug-in {text}: no such file or folder {path.absolute()}{against}")
        return "path", str(path.resolve())
    if not _MODULE_NAME.fullmatch(text):
        raise PluginError(f"plug-in {text!r}: not a .py file, a package folder or a module name")
    return "module", text


def _load(source: str, label: str, module: str, importer: Callable[[], tuple[dict[str, str], str | None]]) -> Plugin:
    """Import plug-in ``module`` (``importer``: its source files and distribution) all-or-nothing."""
    previous = LOADED.get(source)
    if previous is not None:
        if _files_now(previous) == previous.files:
            return previous
        _unload(previous)  # edited since it was loaded in this process: its names are the new code's
    modules_before = set(sys.modules)
    with snapshot() as before:
        try:
            files, distribution = importer()
            revision = _revision(label, sys.modules.get(module))
        except BaseException as exc:
            before.restore()
            for name in set(sys.modules) - modules_before:
                if name == module or name.startswith(f"{module}."):
                    del sys.modules[name]
            if not isinstance(exc, Exception):
                raise
            if isinstance(exc, PluginError):
                raise
            raise PluginError(f"plug-in {label}: {_cause(exc)}") from None
        added = before.added()
    plugin = Plugin(
        source=source,
        module=module,
        files=files,
        revision=revision,
        distribution=distribution,
        version=_version(distribution),
        names=tuple(added),
    )
    LOADED[source] = plugin
    return plugin


def _cause(exc: BaseException) -> str:
    """One line saying why a plug-in failed."""
    if isinstance(exc, SyntaxError):
        # a file Python cannot even tokenise (null bytes: not Python source) has no file name or line
        where = f" in {exc.filename} line {exc.lineno}" if exc.filename and exc.lineno else ""
        return f"syntax error{where}: {exc.msg}"
    if isinstance(exc, DuplicateName):
        return f"{exc}; register it under another name"
    if isinstance(exc, ImportError):
        return f"cannot import it: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _unload(plugin: Plugin) -> None:
    """Forget a plug-in: its names and its modules."""
    by_kind: dict[str, list[str]] = {}
    for kind, name in plugin.names:
        by_kind.setdefault(kind, []).append(name)
    for registry in registries():
        registry._remove(by_kind.get(registry.kind, ()))
    for name in list(sys.modules):
        if name == plugin.module or name.startswith(f"{plugin.module}."):
            del sys.modules[name]
    del LOADED[plugin.source]
    registries_changed()


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
    return next((plugin for plugin in LOADED.values() if plugin.module == name), None)


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


def _files_now(plugin: Plugin) -> dict[str, str]:
    """A loaded plug-in's source digests as its files are now."""
    if plugin.source.startswith("entry point ") or not os.path.isabs(plugin.source):
        return plugin.files  # an installed module: changed on disk, it runs on as imported until the process ends
    path = Path(plugin.source)
    return _digests(path) if path.exists() else {}
