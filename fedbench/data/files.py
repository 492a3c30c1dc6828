"""Expected files of a dataset, presence checks and checksum verification.

Every loader declares the files it reads (relative to ``<data root>/<dataset>/``, the layout the
official download unpacks to) with the checksum its publisher gives. ``require_files`` raises one
``DataError`` naming every missing path and how to get it; ``verify_files`` hashes each file once and
records the result in a stamp file (``.fedbench-verified.json`` in the dataset folder) keyed by size
and modification time, so later checks cost one ``stat`` per file. ``verify=False`` (``--no-verify``)
skips hashing; the loader then reports ``info['verified'] = False`` and the registry records it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedbench.errors import DataError

STAMP_NAME = ".fedbench-verified.json"
UNCHECKED_PICKLES = "unchecked_pickles"  # info key: pickles read without a matched checksum (and why)
DATA_WARNINGS = "warnings"  # info key: the loader's lines for the user about suspicious input (e.g. one-sample classes)
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileSpec:
    """One file a loader reads. ``md5``/``sha256`` are the publisher's digests (None where none is published)."""

    path: str
    md5: str | None = None
    sha256: str | None = None
    alternatives: tuple[str, ...] = ()  # other accepted digests (e.g. MedMNIST v2 files)
    size: int | None = None
    note: str = ""

    @property
    def digest(self) -> tuple[str, str] | None:
        if self.sha256:
            return "sha256", self.sha256
        if self.md5:
            return "md5", self.md5
        return None


@dataclass(frozen=True)
class Download:
    """An official archive or file: fetched to ``path`` (relative to the dataset folder), then unpacked
    there when ``extract`` is set so the folder ends up in the layout the loader reads."""

    url: str
    path: str
    md5: str | None = None
    sha256: str | None = None
    extract: bool = False
    size: int | None = None


@dataclass(frozen=True)
class Source:
    """Human-facing facts for ``fedbench datasets info`` and error messages."""

    layout: str
    how_to_get: str
    downloads: tuple[Download, ...] = ()
    license: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


DIGEST_ALGORITHMS = {32: "md5", 64: "sha256"}  # hex length: the checksums publishers give (``FileSpec``)


def digest_algorithm(digest: str) -> str:
    """The algorithm of a recorded hex digest (``info['digests']``: md5 or sha256, the publisher's), by its length."""
    return DIGEST_ALGORITHMS.get(len(digest), "digest")


def file_digest(path: Path, algorithm: str = "md5") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def missing_error(dataset: str, root: Path, missing: Sequence[str], how_to_get: str) -> DataError:
    shown = ", ".join(str(root / m) for m in missing[:4])
    more = f" (+{len(missing) - 4} more)" if len(missing) > 4 else ""
    return DataError(
        f"dataset {dataset!r}: missing {shown}{more}; {how_to_get} (see `fedbench datasets info {dataset}`)"
    )


def require_files(dataset: str, root: Path, paths: Iterable[str], how_to_get: str) -> None:
    missing = [p for p in paths if not (root / p).is_file()]
    if missing:
        raise missing_error(dataset, root, missing, how_to_get)


def _read_stamps(root: Path) -> dict[str, Any]:
    try:
        return json.loads((root / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return {}


def _write_stamps(root: Path, stamps: dict[str, Any]) -> None:
    tmp = root / (STAMP_NAME + ".tmp")
    try:
        tmp.write_text(json.dumps(stamps, indent=1, sort_keys=True))
        os.replace(tmp, root / STAMP_NAME)
    except OSError:
        pass  # read-only data folder: verification still happened, it is only not cached


def verify_file(dataset: str, root: Path, spec: FileSpec, stamps: dict[str, Any]) -> bool:
    """True if verified against the published digest, False if none is published; raises on mismatch."""
    expected = spec.digest
    if expected is None:
        return False
    algorithm, value = expected
    path = root / spec.path
    stat = path.stat()
    key = f"{stat.st_size}:{stat.st_mtime_ns}:{algorithm}"
    accepted = {value.lower(), *(a.lower() for a in spec.alternatives)}
    if stamps.get(spec.path, {}).get("key") == key and stamps[spec.path].get("digest") in accepted:
        return True
    actual = file_digest(path, algorithm)
    if actual not in accepted:
        raise DataError(
            f"dataset {dataset!r}: {path} is corrupt or a different version ({algorithm} {actual}, expected {value}); "
            f"delete it and download it again (see `fedbench datasets info {dataset}`), or pass --no-verify to use it anyway"
        )
    stamps[spec.path] = {"key": key, "digest": actual}
    return True


def verify_files(
    dataset: str, root: Path, specs: Sequence[FileSpec], how_to_get: str, verify: bool = True, pickled: bool = False
) -> dict[str, Any]:
    """Check presence (always) and checksums (unless ``verify`` is False). Returns provenance for ``info``.
    ``pickled``: the files are pickles; those read without a matched checksum are listed under ``UNCHECKED_PICKLES``
    (``unchecked_pickle_warning`` words the warning a run prints)."""
    require_files(dataset, root, [s.path for s in specs], how_to_get)
    files = [s.path for s in specs]
    if not verify:
        info: dict[str, Any] = {"files": files, "verified": False, "verification": "skipped (--no-verify)"}
        if pickled:
            info[UNCHECKED_PICKLES] = {"files": files, "why": "--no-verify"}
        return info
    stamps = _read_stamps(root)
    before = dict(stamps)
    results = [verify_file(dataset, root, spec, stamps) for spec in specs]
    if stamps != before:
        _write_stamps(root, stamps)
    digests = {s.path: stamps[s.path]["digest"] for s, ok in zip(specs, results) if ok}
    if all(results):
        status = "checksums match the published values"
    elif any(results):
        unverified = [s.path for s, ok in zip(specs, results) if not ok]
        status = f"partially verified (no published checksum for {', '.join(unverified)})"
    else:
        status = "no published checksums for these files"
    info = {"files": files, "verified": all(results), "verification": status, "digests": digests}
    unchecked = [s.path for s, ok in zip(specs, results) if not ok]
    if pickled and unchecked:
        info[UNCHECKED_PICKLES] = {"files": unchecked, "why": "no checksum is published for them"}
    return info


def data_warnings(dataset: str, info: dict[str, Any]) -> list[str]:
    """Every line a load of ``dataset`` has for the user, one each: unchecked pickles, then the loader's own
    (``DATA_WARNINGS``). ``fedbench run`` and ``fedbench datasets check`` print them."""
    pickles = unchecked_pickle_warning(dataset, info)
    return ([pickles] if pickles else []) + list(info.get(DATA_WARNINGS) or [])


def unchecked_pickle_warning(dataset: str, info: dict[str, Any]) -> str | None:
    """The one line a run prints when it unpickles ``dataset``'s files without a matched checksum (None if it
    does not)."""
    unchecked = info.get(UNCHECKED_PICKLES)
    if not unchecked:
        return None
    files = unchecked["files"]
    shown = ", ".join(files[:2]) + (f" (+{len(files) - 2} more)" if len(files) > 2 else "")
    return (
        f"dataset {dataset!r}: {len(files)} pickle file(s) ({shown}) will be unpickled unchecked ({unchecked['why']}); "
        "fedbench's restricted unpickler admits only numpy arrays and plain values"
    )
