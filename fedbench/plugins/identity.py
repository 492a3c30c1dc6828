"""What identifies a plug-in's results: the sha256 of its source files, or the revision it declares.

A plug-in is identified by the sha256 of its source files (a file plug-in: the file; a package or a module of a
package: every ``.py`` file of its top-level package; a name registered outside ``load_plugins``: the file of the
module that defines it). The resolved spec of a run that uses a plug-in from outside fedbench (any kind) carries
that digest in ``RunSpec.plugin_code`` (``{kind: "sha256:…"}``), a field left out of the hash while empty, as it is
for the built-ins (so every existing hash stays): an edited plug-in gives other spec hashes, so ``run`` trains its
runs again and ``report`` shows only results of the current code. A plug-in may instead declare which revision of
its results its code gives, as the built-ins' ``result_revision`` does: a module-level ``FEDBENCH_REVISION = 2``
(an int ≥ 1) in its top module. The spec then carries ``"MODULE revision 2"``, not the digest, so editing the
source keeps the hashes (raise the revision when an edit changes results); ``run`` and ``report`` warn, on one
line, when the source digest a shown run recorded in its provenance differs from the current one
(``source_changes``). A run's provenance records each plug-in it used: module, distribution name and version,
source digests, revision (``Plugin.record``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import inspect
import sys
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedbench.plugins.registry import PluginError, PluginRegistry, on_registry_change

REVISION_ATTRIBUTE = "FEDBENCH_REVISION"


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


LOADED: dict[str, Plugin] = {}  # source → the plug-in loaded from it in this process (``load_plugins``)
_DEFINED: dict[str, Plugin] = {}  # module → its record, for names registered outside load_plugins
on_registry_change(_DEFINED.clear)  # a name that left a registry may be defined elsewhere when it comes back


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


# ---------------------------------------------------------------------------------------- identity
def is_builtin(module: str) -> bool:
    return module == "fedbench" or module.startswith("fedbench.")


def plugin_of(registry: PluginRegistry[Any], name: str) -> Plugin | None:
    """The plug-in from outside fedbench that provides ``name`` of ``registry`` (None: fedbench's own): the loaded
    plug-in that registered it, else the one whose module defines it, else a record of the defining module's file
    (a name registered by a script or a notebook, not through ``load_plugins``)."""
    for plugin in LOADED.values():
        if (registry.kind, name) in plugin.names:
            return plugin
    module = registry.origin(name)
    if module is None or is_builtin(module):
        return None
    for plugin in LOADED.values():
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
    for plugin in LOADED.values():
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
