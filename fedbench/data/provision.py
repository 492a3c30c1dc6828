"""What ``fedbench datasets list|info|check|download|prepare`` report and do.

Pure functions: they return plain dicts (for rich tables or ``--json``) and raise ``DataError`` /
``UnknownNameError``; printing and exit codes belong to the CLI.
"""

from __future__ import annotations

import http.client
import os
import shutil
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data._registry import DATASETS, data_root, dataset_meta, dataset_params, load_dataset
from fedbench.data.cache import CACHE_DIR, save_prepared
from fedbench.data.files import Download, Source, data_warnings, file_digest, unchecked_pickle_warning
from fedbench.errors import DataError

Progress = Callable[[int, int | None], None]  # (bytes done, total bytes or None)


def _source(name: str) -> Source | None:
    source = DATASETS.info(name).get("source")
    return source if isinstance(source, Source) else None  # digits registers a plain description


def is_present(name: str, root: str | os.PathLike | None = None) -> bool:
    """All files the default configuration reads exist (a cheap check; ``check`` verifies and loads). A dataset
    whose data live outside the fedbench data root (bci: MOABB's cache) registers its own ``present(folder)`` test."""
    info = DATASETS.info(name)
    present = info.get("present")
    if callable(present):
        return bool(present(data_root(root) / name))
    files = info.get("files")
    if files is None:
        return True  # bundled with a dependency (digits)
    folder = data_root(root) / name
    return all((folder / f).exists() for f in files)


def list_datasets(root: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    rows = []
    for name in DATASETS.names():
        meta = dataset_meta(name)
        rows.append(
            {
                "name": name,
                "classes": meta.num_classes,
                "shape": list(meta.input_shape),
                "task": meta.task,
                "groups": meta.group_kind,
                "used_by": list(meta.used_by),
                "present": is_present(name, root),
            }
        )
    return rows


def dataset_info(name: str, root: str | os.PathLike | None = None) -> dict[str, Any]:
    registered = DATASETS.info(name)
    meta = dataset_meta(name)
    source = _source(name)
    folder = data_root(root) / name
    checksums = registered.get("checksums", {})
    files = [
        {"path": str(folder / f), "checksum": checksums.get(f), "present": (folder / f).exists()}
        for f in registered.get("files", ())
    ]
    loader = DATASETS.get(name)
    return {
        "name": name,
        "meta": asdict(meta),
        "folder": str(folder),
        "present": is_present(name, root),
        "files": files,
        "counts": registered.get("counts"),
        "num_groups": registered.get("num_groups"),
        "layout": source.layout if source else registered.get("source", ""),
        "how_to_get": source.how_to_get if source else "bundled with a dependency; nothing to download",
        "downloads": [
            {"url": d.url, "path": d.path, "md5": d.md5, "sha256": d.sha256, "extract": d.extract, "size": d.size}
            for d in (source.downloads if source else ())
        ],
        "license": source.license if source else "",
        "notes": list(source.notes) if source else [],
        "parameters": (loader.__doc__ or "").strip(),
    }


def check_dataset(
    name: str, root: str | os.PathLike | None = None, verify: bool = True, **params: Any
) -> dict[str, Any]:
    """Verify checksums, load, and summarise counts, classes and groups. Raises DataError if anything is wrong."""
    start = time.perf_counter()
    arrays = load_dataset(name, root, verify=verify, **params)
    seconds = time.perf_counter() - start
    report: dict[str, Any] = {
        "name": name,
        "verified": arrays.info.get("verified"),
        "verification": arrays.info.get("verification") or arrays.info.get("source", ""),
        "prepared": arrays.info.get("prepared"),
        "warning": unchecked_pickle_warning(name, arrays.info),
        "warnings": data_warnings(name, arrays.info),  # that one, then the loader's (e.g. one-sample classes)
        "seconds": round(seconds, 3),
        "train": len(arrays.train_y),
        "test": len(arrays.test_y),
        "shape": list(arrays.train_x.shape[1:]),
        "dtype": str(arrays.train_x.dtype),
        "classes": arrays.meta.num_classes,
    }
    if arrays.info.get("manifest"):  # a user's own data: the digest of what was read, to pin as dataset_params.digest
        manifest = arrays.info["manifest"]
        report["content"] = {key: manifest[key] for key in ("path", "sha256", "files", "bytes")}
    if arrays.info.get("classes"):
        report["class_names"] = list(arrays.info["classes"])
    if arrays.meta.task == "classification":
        report["train_class_counts"] = np.bincount(arrays.train_y, minlength=arrays.meta.num_classes).tolist()
        report["test_class_counts"] = np.bincount(arrays.test_y, minlength=arrays.meta.num_classes).tolist()
        if len(arrays.train_y) and arrays.train_y.max() >= arrays.meta.num_classes:
            raise DataError(f"dataset {name!r}: label {arrays.train_y.max()} ≥ num_classes {arrays.meta.num_classes}")
    expected = DATASETS.info(name).get("counts")
    if expected and not params:
        report["expected_counts"] = list(expected)
        report["counts_match"] = [report["train"], report["test"]] == list(expected)
    if arrays.train_groups is not None:
        names = arrays.info.get("group_names")
        ids, counts = np.unique(arrays.train_groups, return_counts=True)
        report["groups"] = {
            (names[i] if names and i < len(names) else str(i)): int(c) for i, c in zip(ids.tolist(), counts)
        }
    return report


# ---- download ---------------------------------------------------------------------------------------------


def fetch(
    url: str,
    target: Path,
    md5: str | None = None,
    sha256: str | None = None,
    progress: Progress | None = None,
    chunk_size: int = 1 << 16,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``target`` via ``target.part``: resumes a partial file with an HTTP Range request,
    checks the digest, then renames atomically. A digest mismatch deletes the partial file and raises."""
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    done = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "fedbench"})
    if done:
        request.add_header("Range", f"bytes={done}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and done:  # the partial file is already complete
            response = None
        else:
            raise DataError(f"download of {url} failed: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError) as error:
        raise DataError(
            f"download of {url} failed: {getattr(error, 'reason', error)}; check the network or fetch it by hand into {target}"
        ) from None
    if response is not None:
        with response:
            resumed = response.status == 206
            if not resumed:
                done = 0
            length = response.headers.get("Content-Length")
            total = done + int(length) if length is not None else None
            try:
                with open(part, "ab" if resumed else "wb") as handle:
                    while chunk := response.read(chunk_size):
                        handle.write(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, total)
            except (OSError, urllib.error.URLError, http.client.HTTPException) as error:
                raise DataError(
                    f"download of {url} interrupted after {done} bytes ({error}); run the command again to resume"
                ) from None
            if total is not None and done < total:
                raise DataError(
                    f"download of {url} interrupted after {done} of {total} bytes; run the command again to resume"
                )
    for algorithm, expected in (("sha256", sha256), ("md5", md5)):
        if expected:
            actual = file_digest(part, algorithm)
            if actual != expected.lower():
                part.unlink(missing_ok=True)
                raise DataError(
                    f"download of {url}: {algorithm} {actual} does not match the published {expected}; the partial file was removed"
                )
            break
    os.replace(part, target)
    return target


def _safe_extract(archive: Path, destination: Path) -> list[str]:
    """Unpack into a scratch folder beside the files, then move each file into place (``os.replace``, atomic per
    file): an interrupted or failing extraction leaves no half-written file where a loader would read it."""
    destination = destination.resolve()
    scratch = destination / f".{archive.name}.extracting"
    shutil.rmtree(scratch, ignore_errors=True)  # what an earlier interrupted extraction left
    scratch.mkdir(parents=True)
    try:
        names = _extract_into(archive, scratch)
        for path in sorted(scratch.rglob("*")):
            if path.is_file() or path.is_symlink():
                target = destination / path.relative_to(scratch)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return names


def _extract_into(archive: Path, destination: Path) -> list[str]:

    def inside(name: str) -> bool:
        return (destination / name).resolve().is_relative_to(destination)

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            names = handle.namelist()
            if not all(inside(n) for n in names):
                raise DataError(f"{archive} contains paths outside {destination}; not extracting")
            handle.extractall(destination)
            return names
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            if not all(inside(m.name) for m in members):
                raise DataError(f"{archive} contains paths outside {destination}; not extracting")
            tar.extractall(destination, filter="data")
            return [m.name for m in members]
    raise DataError(f"{archive} is neither a zip nor a tar archive")


def download_dataset(
    name: str,
    root: str | os.PathLike | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
    keep_archives: bool = True,
) -> dict[str, Any]:
    """Fetch the dataset's official files into ``<data root>/<name>/`` (and unpack archives there)."""
    source = _source(name)
    if source is None or not source.downloads:
        how = source.how_to_get if source else "it is bundled with a dependency"
        raise DataError(f"dataset {name!r} has no direct download: {how}")
    folder = data_root(root) / name
    fetched, skipped = [], []
    for item in source.downloads:
        target = folder / item.path
        if target.exists() and _matches(target, item):
            skipped.append(str(target))
        else:
            fetch(
                item.url,
                target,
                item.md5,
                item.sha256,
                partial(progress, item.path) if progress else None,
            )
            fetched.append(str(target))
        if item.extract:
            _safe_extract(target, folder)
            if not keep_archives:
                target.unlink()
    return {"name": name, "folder": str(folder), "fetched": fetched, "already_present": skipped}


def _matches(path: Path, item: Download) -> bool:
    if item.sha256:
        return file_digest(path, "sha256") == item.sha256
    if item.md5:
        return file_digest(path, "md5") == item.md5
    return True


# ---- prepare ----------------------------------------------------------------------------------------------


def prepare_dataset(
    name: str, root: str | os.PathLike | None = None, verify: bool = True, **params: Any
) -> dict[str, Any]:
    """Run the loader once and save its arrays as a memory-mappable cache used by later loads."""
    if DATASETS.info(name).get("preparable") is False:
        raise DataError(
            f"dataset {name!r} is read from dataset_params.path on every load (its content manifest is hashed each "
            "time); there is nothing to prepare"
        )
    start = time.perf_counter()
    params = dataset_params(name, params)  # the key load_dataset looks the cache up with
    arrays = load_dataset(name, root, verify=verify, use_prepared=False, **params)
    try:
        folder = save_prepared(arrays, data_root(root) / name, params)
    except OSError as exc:  # a read-only or missing data root, a full disk
        raise DataError(
            f"dataset {name!r}: cannot write the prepared cache under {data_root(root) / name} "
            f"({exc.strerror or exc}); choose a writable data root (--data-dir or $FEDBENCH_DATA)"
        ) from None
    size = sum(f.stat().st_size for f in folder.iterdir())
    return {
        "name": name,
        "cache": str(folder),
        "bytes": size,
        "train": len(arrays.train_y),
        "test": len(arrays.test_y),
        "verified": arrays.info.get("verified"),
        "seconds": round(time.perf_counter() - start, 3),
    }


def remove_prepared(name: str, root: str | os.PathLike | None = None) -> bool:
    folder = data_root(root) / name / CACHE_DIR
    existed = folder.exists()
    shutil.rmtree(folder, ignore_errors=True)
    return existed
