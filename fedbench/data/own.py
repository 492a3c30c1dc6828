"""What the loaders of a team's own data share: where ``dataset_params.path`` points, the content manifest, how the
classes and the train/test split are made, and how a run's identity relates to the data it read.

Three data sets take a ``path`` (``imagefolder.py``: a folder of images per site and class; ``arrayfile.py``: an
``.npz`` or ``.parquet`` file; ``hfdisk.py``: a Hugging Face ``datasets`` folder saved with ``save_to_disk``).

**Where.** ``path`` is a dataset parameter. An absolute path (``~`` expanded) is used as written; a relative one is
resolved against the data root (``--data-dir`` > ``$FEDBENCH_DATA`` > the user cache directory), the folder the
built-in data sets live in. A relative path keeps a recipe's spec hashes the same on every machine that lays the
data out under its own data root (a laptop, a cluster); an absolute path is part of the spec, so the same data at
another place is another spec.

**What was read: the content manifest.** Every load lists the files it reads (sorted by their path relative to
``path``, ``/``-separated, by code point), hashes each with SHA-256 and hashes the list: the manifest's digest is the
SHA-256 of the lines ``<sha256 of the file>  <relative path>\\n`` — the output of ``sha256sum`` over the sorted
file list, so ``cd PATH && find . -type f | sed 's|^\\./||' | LC_ALL=C sort | xargs sha256sum | sha256sum``
reproduces it by hand for a folder holding only the files read. A file the loader
skips (not an image, hidden) is not in it. The manifest lands where the built-ins' checksums land, in the loaded
arrays' ``info`` and from there in every run's provenance (``provenance.data``): ``manifest`` = {path, sha256,
files, bytes}, ``files`` (relative paths) and ``digests`` ({relative path: sha256}) as the built-ins record them,
listed in full up to ``MAX_LISTED`` files (beyond, only the manifest's digest and counts: ``fedbench datasets check
NAME -p path=… --json`` prints the digest to compare). ``--no-verify`` skips hashing: nothing is listed and the run
is recorded as unverified.

**Identity.** A run's identity is its spec hash, compiled before any data is read, so the manifest's digest cannot
be part of it by itself; the path alone does not identify the data either. Two ways, the same as the built-ins':

* *Pinned.* ``dataset_params.digest = "<64 hex digits>"`` (what ``fedbench datasets check`` prints) is part of the
  spec like any dataset parameter, and a load whose manifest has another digest is a one-line ``DataError``. The
  pinned digest plays the part of a built-in's published checksum (``info['verified']`` is then true): results on
  changed data can only be made under a new digest, i.e. a new spec hash, and are never reported as the old ones.
* *Not pinned.* The manifest is recorded in each run's provenance, and ``fedbench run`` warns, one line per data
  set, when finished runs of the recipe — which it would skip and report — were trained on content whose digest
  differs from the content now at ``path`` (``changed_data_warning``); ``--force`` retrains them.

**Classes and split.** Class names are sorted (image folders: the union of the class folder names over every site
and split; arrays: the sorted distinct label values, numbers by value, strings by code point; a ``datasets``
``ClassLabel`` keeps its own order) and class ``i`` is the ``i``-th name (``info['classes']``). Where the data
has no train/test split of its own, a stratified ``test_fraction`` of every (group, class) is held out with the
seeded ``split_seed`` (``common.holdout_split``: every client keeps its own test part, and every method is scored
on the same samples).

These data sets have no prepared cache (``fedbench datasets prepare``): their files are read and hashed on every
load, so that the manifest always describes the data that was trained on.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data._registry import DATASETS, data_root, register_dataset
from fedbench.data.base import DatasetMeta
from fedbench.data.common import holdout_split
from fedbench.data.files import file_digest
from fedbench.errors import DataError

# the ``used_by`` of the data sets a user points at their own files
USED_BY = ("your data",)
# files listed one by one in ``info`` (and so in every run's provenance); a larger manifest is recorded by its digest
MAX_LISTED = 2000
DIGEST_HEX = 64


def resolve_path(path: str, root: Path) -> Path:
    """``dataset_params.path`` as a path: absolute (``~`` expanded) as written, relative under the data root.
    ``root`` is the loader's ``<data root>/<dataset name>`` (``load_dataset``), so the data root is its parent."""
    given = Path(path).expanduser()
    return given if given.is_absolute() else (root.parent / given).absolute()


@dataclass(frozen=True)
class Manifest:
    """The files a load read: ``entries`` = (relative path, sha256, bytes), sorted by relative path."""

    path: Path  # what dataset_params.path resolved to
    entries: tuple[tuple[str, str, int], ...]

    @property
    def sha256(self) -> str:
        """SHA-256 of ``sha256sum``'s lines over the sorted files: one digest of the whole content."""
        lines = "".join(f"{digest}  {rel}\n" for rel, digest, _ in self.entries)
        return hashlib.sha256(lines.encode()).hexdigest()

    def record(self) -> dict[str, Any]:
        """The ``info`` entries of the manifest, as the built-ins record their checksums (``files``, ``digests``)."""
        listed = len(self.entries) <= MAX_LISTED
        return {
            "manifest": {
                "path": str(self.path),
                "sha256": self.sha256,
                "files": len(self.entries),
                "bytes": sum(size for _, _, size in self.entries),
                "listed": listed,
            },
            "files": [rel for rel, _, _ in self.entries] if listed else [str(self.path)],
            "digests": {rel: digest for rel, digest, _ in self.entries} if listed else {},
        }


def content_manifest(dataset: str, base: Path, files: Iterable[Path]) -> Manifest:
    """Hash ``files`` (each under ``base``, or ``base`` itself when it is a file) into a manifest; a file that cannot
    be read is one ``DataError`` naming it."""
    entries = []
    for path in files:
        rel = path.name if path == base else path.relative_to(base).as_posix()
        try:
            entries.append((rel, file_digest(path, "sha256"), path.stat().st_size))
        except OSError as error:
            raise DataError(
                f"dataset {dataset!r}: cannot read {path} ({error.strerror or error}); check that it exists and "
                "is readable"
            ) from None
    return Manifest(base, tuple(sorted(entries)))


def check_and_record(
    dataset: str, manifest: Manifest | None, digest: str | None, verify: bool, how: dict[str, Any]
) -> dict[str, Any]:
    """The loaded arrays' ``info``: the manifest's entries, ``verified`` / ``verification`` and ``how`` (the
    parameters that shaped the arrays, and the ``DATA_WARNINGS`` lines the loader found). A pinned ``digest`` that
    the content does not match is a ``DataError``; ``manifest`` is None under ``--no-verify``."""
    if manifest is None:
        return {**how, "verified": False, "verification": "skipped (--no-verify)", "manifest": None}
    info = {**how, **manifest.record()}
    actual = manifest.sha256
    if digest is None:
        info.update(
            verified=False,
            verification="content recorded in its manifest, not pinned (dataset_params.digest pins it)",
        )
        return info
    if digest.lower() != actual:
        raise DataError(
            f"dataset {dataset!r}: the content of {manifest.path} has sha256 {actual}, but dataset_params.digest "
            f"pins {digest}; the data changed: restore it, or pin the new digest (its results get a new spec hash)"
        )
    info.update(verified=True, verification="content matches dataset_params.digest")
    return info


def check_digest_param(dataset: str, digest: str | None) -> None:
    if digest is not None and (len(digest) != DIGEST_HEX or any(c not in "0123456789abcdefABCDEF" for c in digest)):
        raise DataError(
            f"dataset {dataset!r}: dataset_params.digest={digest!r} is not a sha256 (64 hex digits); copy the "
            f"digest `fedbench datasets check {dataset} -p path=…` prints"
        )


def class_index(values: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Sorted distinct ``values`` (numbers by value, strings by code point) as class names, and each value's class."""
    classes, index = np.unique(values, return_inverse=True)
    return [str(c) for c in classes.tolist()], index.astype(np.int64).reshape(-1)


def refuse_negative_labels(dataset: str, labels: np.ndarray, where: str) -> None:
    """Integer labels below 0 are refused: -1 conventionally marks an unlabelled sample (scikit-learn, Hugging Face's
    ``ClassLabel``), and as one more class it would be trained on and scored silently. ``where`` names the file and
    the key."""
    if labels.dtype.kind not in "iu" or not len(labels) or labels.min() >= 0:
        return
    row = int(np.flatnonzero(labels < 0)[0])
    raise DataError(
        f"dataset {dataset!r}: {where} has label {labels[row]} at row {row}; a negative label marks an unlabelled "
        "sample, not a class: drop those rows or give them a class"
    )


def singleton_warning(dataset: str, classes: Sequence[str], y: np.ndarray, where: Path) -> list[str]:
    """One warning line when some classes have a single sample (over train and test): such a class lands in one of
    the two splits only, so it is either never scored or never learnt; usually a typo in a label. Empty otherwise."""
    counts = np.bincount(y, minlength=len(classes))
    single = [classes[int(c)] for c in np.flatnonzero(counts == 1)]
    if not single:
        return []
    shown = ", ".join(map(repr, single[:5])) + (f" (+{len(single) - 5} more)" if len(single) > 5 else "")
    return [
        f"dataset {dataset!r}: {where} has {len(single)} class(es) with one sample ({shown}); such a class is never "
        "both learnt and scored: check the labels, or drop those samples"
    ]


def require_classes(dataset: str, classes: Sequence[str], where: Path) -> None:
    if len(classes) < 2:
        raise DataError(
            f"dataset {dataset!r}: {where} has {len(classes)} class(es) ({', '.join(classes) or 'none'}); "
            "a classification data set needs at least 2"
        )


def register_user_dataset(meta: DatasetMeta, manifest: Callable[..., Manifest], **info: Any):
    """Register a data set read from a user's ``dataset_params.path``: never present in the data root nor prepared
    there (the data is wherever ``path`` points), its content listed by ``manifest`` (``reads_user_path``)."""
    return register_dataset(meta, present=lambda folder: False, preparable=False, manifest=manifest, **info)


def reads_user_path(name: str) -> bool:
    """Whether data set ``name`` is read from a user's ``dataset_params.path`` (and so has a content manifest)."""
    return callable(DATASETS.info(name).get("manifest"))


def current_manifest(name: str, root: str | os.PathLike | None, params: dict[str, Any]) -> Manifest | None:
    """The manifest of the content data set ``name`` would read now with ``params`` (full parameters, as a spec holds
    them), without decoding anything; None for a data set that is not read from a user's ``path``."""
    listing = DATASETS.info(name).get("manifest")
    if not callable(listing):
        return None
    return listing(data_root(root) / name, **params)


def changed_data_warning(
    name: str, root: str | os.PathLike | None, params: dict[str, Any], trained: Iterable[dict[str, Any] | None]
) -> str | None:
    """One line when runs of data set ``name`` (their stored provenance in ``trained``) were trained on content other
    than what ``params.path`` holds now; None when they match, the data set reads no user path, or the digest is
    pinned (a pinned digest is part of the spec: the content is then checked on load)."""
    if params.get("digest"):
        return None
    before = {
        ((p or {}).get("data") or {}).get("manifest", {}).get("sha256")
        for p in trained
        if ((p or {}).get("data") or {}).get("manifest")
    }
    if not before:
        return None
    try:
        now = current_manifest(name, root, params)
    except DataError:
        return None  # the data is gone or unreadable: a run that needs it says so when it loads it
    if now is None or before == {now.sha256}:
        return None
    old = ", ".join(sorted(d[:12] for d in before))
    return (
        f"dataset {name!r}: finished runs were trained on other content of {now.path} (sha256 {old}…, now "
        f"{now.sha256[:12]}…); their results are kept and reported: pass --force to retrain them, or pin "
        "dataset_params.digest so that new data gets new runs"
    )


def own_split(
    y: np.ndarray,
    groups: np.ndarray | None,
    train_size: int | None,
    test_fraction: float,
    split_seed: int,
    how: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices of a team's own data. Data that came with its own test part (a second file, a test
    split) holds it after its ``train_size`` training samples; other data holds out a stratified ``test_fraction``
    of every (group, class), seeded by ``split_seed`` (``holdout_split``), and ``how`` records those two."""
    if train_size is not None:
        return np.arange(train_size), np.arange(train_size, len(y))
    how.update(test_fraction=test_fraction, split_seed=split_seed)
    return holdout_split(y, test_fraction, split_seed, groups)
