"""Prepared datasets: the loader's arrays saved once as ``.npy`` files and memory-mapped afterwards.

``fedbench datasets prepare NAME`` runs the loader (parsing, decoding PNGs, resizing) and writes
``<data root>/<name>/.fedbench-cache/<key>/`` where ``key`` hashes the dataset parameters. Loading a
prepared dataset maps the arrays copy-on-write (``np.load(mmap_mode='c')``; the files are never written) — instant for MNIST, and the
only practical way for Camelyon17's 455k PNG patches. The cache is used only while every source file
it was built from keeps its size and modification time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import DatasetArrays, DatasetMeta

CACHE_DIR = ".fedbench-cache"
# Bumped whenever a loader's output changes for the same files and parameters, so that caches prepared
# before are not used (2: COVID-19 float xdata scaling and retinal mask thresholds).
CACHE_VERSION = 2
_ARRAYS = ("train_x", "train_y", "test_x", "test_y", "train_groups", "test_groups")


def cache_key(name: str, params: dict[str, Any]) -> str:
    text = json.dumps({"name": name, "params": params, "version": CACHE_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(root: Path, name: str, params: dict[str, Any]) -> Path:
    return root / CACHE_DIR / cache_key(name, params)


def _stamp(root: Path, files: list[str]) -> dict[str, list[int]]:
    stamps = {}
    for rel in files:
        stat = (root / rel).stat()
        stamps[rel] = [stat.st_size, stat.st_mtime_ns]
    return stamps


def save_prepared(arrays: DatasetArrays, root: Path, params: dict[str, Any]) -> Path:
    name = arrays.meta.name
    target = cache_path(root, name, params)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    present = []
    for field in _ARRAYS:
        value = getattr(arrays, field)
        if value is not None:
            np.save(tmp / f"{field}.npy", np.ascontiguousarray(value))
            present.append(field)
    info = {k: v for k, v in arrays.info.items() if k != "digests"}
    manifest = {
        "name": name,
        "params": params,
        "version": CACHE_VERSION,
        "arrays": present,
        "meta": asdict(arrays.meta),
        "info": info,
        "sources": _stamp(root, list(arrays.info.get("files", []))),
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return target


def load_prepared(root: Path, name: str, params: dict[str, Any], verify: bool = True) -> DatasetArrays | None:
    """The prepared arrays, or None if there is no valid cache for these parameters."""
    folder = cache_path(root, name, params)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("version") != CACHE_VERSION or _stamp(root, list(manifest["sources"])) != manifest["sources"]:
            return None
    except (OSError, ValueError, KeyError):
        return None
    info = dict(manifest["info"])
    if verify and info.get("verification", "").startswith("skipped"):
        return None  # prepared under --no-verify; verify now through the loader
    meta_fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in manifest["meta"].items()}
    meta = DatasetMeta(**meta_fields)
    loaded = {field: np.load(folder / f"{field}.npy", mmap_mode="c") for field in manifest["arrays"]}
    info.update(prepared=str(folder))
    arrays: dict[str, Any] = {f: loaded.get(f) for f in _ARRAYS}  # save_prepared wrote every array that is not None
    return DatasetArrays(meta=meta, info=info, **arrays)
