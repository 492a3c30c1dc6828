"""``imagefolder``: a team's own images, one folder per site and class, sites as natural clients.

Layouts under ``dataset_params.path`` (resolved as ``own.resolve_path`` says):

* ``<site>/<class>/*`` — sites are the data set's natural groups (``partition = "natural"``: one site per client;
  any other partitioner splits the pooled images). Group ``i`` is the ``i``-th site of ``sites`` (default: every
  site folder, sorted); ``info['group_names']`` names them.
* ``<site>/{train,test}/<class>/*`` — a site whose only sub-folders are ``train`` and ``test`` keeps that split;
  the other sites are split as below.
* ``<class>/*`` (the top folders hold images), or ``{train,test}/<class>/*`` — no sites: pooled only.

``layout = "sites" | "classes"`` overrides the detection (``"auto"``: ``classes`` when a top folder holds image files
itself or the top folders are exactly ``train`` and ``test``, else ``sites``). Image files are those ending in
``IMAGE_SUFFIXES`` (any case) directly in a class folder (sorted by name; a class folder has no sub-folders);
hidden files (``.*``) and other files are skipped and are not in the content manifest. Classes are the
union of the class folder names of every site and split, sorted by code point (``info['classes']``). A site or
pool without a split of its own holds out a stratified ``test_fraction`` of each of its classes, seeded by
``split_seed`` (``common.holdout_split``).

Images are decoded with Pillow (``convert("RGB")`` for ``channels = 3``, ``convert("L")`` for 1), each resized to
``image_size`` × ``image_size`` (bilinear; the aspect ratio is not kept), into one resident uint8 (N, C, S, S) array per
split, scaled by 1/255 at training time and normalised by ``normalization`` (``none``: as is; ``half``: mean = std =
0.5; ``imagenet``: ImageNet's mean and std, 3 channels only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import HALF3, IMAGENET, NONE3, holdout_split
from fedbench.data.files import DATA_WARNINGS, Source
from fedbench.data.images import read_images
from fedbench.data.own import (
    USED_BY,
    Manifest,
    check_and_record,
    check_digest_param,
    content_manifest,
    register_user_dataset,
    require_classes,
    resolve_path,
    singleton_warning,
)
from fedbench.errors import ConfigError, DataError

NAME = "imagefolder"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp")
SPLITS = ("train", "test")
LAYOUT = (
    "dataset_params.path = a folder laid out as <site>/<class>/*.png|jpg|… (sites as clients), "
    "<site>/{train,test}/<class>/*, or <class>/* (no sites)"
)
IMAGEFOLDER_SOURCE = Source(
    layout=LAYOUT,
    how_to_get="your own images: set dataset_params.path (relative paths are under the data root); see "
    "'Your own data' in the README",
)
IMAGEFOLDER_META = DatasetMeta(NAME, 2, (3, 64, 64), *NONE3, used_by=USED_BY)
REMEDY = "replace the file with a readable image, or remove it"


def _visible(folder: Path) -> list[Path]:
    """The entries of ``folder`` but hidden ones, sorted. A symbolic link that leads nowhere (a loop, or a target
    that is gone) is neither a folder nor a file, and would drop a class or a site without a word: it is refused."""
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    for entry in entries:
        if entry.is_symlink() and not entry.exists():  # exists() follows the link: False for a loop or a dead end
            raise DataError(
                f"dataset {NAME!r}: {entry} is a symbolic link that leads nowhere (to {os.readlink(entry)}: a loop, "
                "or its target is gone); point it at a folder or an image, or remove it"
            )
    return entries


def _is_image(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES


def _class_images(folder: Path) -> list[Path]:
    """The image files of class folder ``folder`` (hidden files and other files skipped), sorted by name."""
    entries = _visible(folder)
    nested = [p for p in entries if p.is_dir()]
    if nested:
        raise DataError(
            f"dataset {NAME!r}: class folder {folder} has a sub-folder {nested[0].name}; keep the images directly in "
            "the class folder"
        )
    return [p for p in entries if _is_image(p)]


def _check_not_mixed(folder: Path) -> None:
    entries = _visible(folder)
    images = [p for p in entries if _is_image(p)]
    if images and any(p.is_dir() for p in entries):
        raise DataError(
            f"dataset {NAME!r}: {folder} holds both image files ({images[0].name}) and sub-folders; images go in "
            "<site>/<class>/ or <class>/ folders"
        )


@dataclass
class Unit:
    """A site (or the whole pool where there are no sites): {split or None: {class: image files}}; the split is
    None where the images are split by ``test_fraction``."""

    name: str | None
    splits: dict[str | None, dict[str, list[Path]]] = field(default_factory=dict)


def _classes_of(folder: Path) -> dict[str, list[Path]]:
    entries = _visible(folder)
    loose = [p for p in entries if _is_image(p)]
    if loose:
        raise DataError(
            f"dataset {NAME!r}: {loose[0]} lies outside a class folder; move the images of {folder} into "
            f"{folder}/<class>/ folders"
        )
    classes = {p.name: _class_images(p) for p in entries if p.is_dir()}
    if not classes:
        raise DataError(f"dataset {NAME!r}: {folder} has no class folders; lay it out as {folder}/<class>/*.png")
    for name, files in classes.items():
        if not files:
            raise DataError(
                f"dataset {NAME!r}: class folder {folder / name} has no image files ({', '.join(IMAGE_SUFFIXES)}); "
                "add images or remove the folder"
            )
    return classes


def _unit(name: str | None, folder: Path) -> Unit:
    subfolders = {p.name for p in _visible(folder) if p.is_dir()}
    if subfolders == set(SPLITS) and not any(_is_image(p) for p in _visible(folder)):
        return Unit(name, {split: _classes_of(folder / split) for split in SPLITS})
    return Unit(name, {None: _classes_of(folder)})


def scan(folder: Path, layout: str = "auto", sites: list[str] | tuple[str, ...] | None = None) -> list[Unit]:
    """The sites (in group order) or the one pool under ``folder``; every layout error is one ``DataError``."""
    if not folder.is_dir():
        raise DataError(
            f"dataset {NAME!r}: no folder {folder}; create it or fix dataset_params.path (relative paths are "
            "resolved against the data root: --data-dir or $FEDBENCH_DATA)"
        )
    top = [p for p in _visible(folder) if p.is_dir()]
    if not top:
        raise DataError(f"dataset {NAME!r}: {folder} has no sub-folders; lay it out as {LAYOUT.split(' = ', 1)[1]}")
    for sub in top:
        _check_not_mixed(sub)
    if layout == "auto":
        pooled = {p.name for p in top} == set(SPLITS) or any(_is_image(q) for p in top for q in _visible(p))
        layout = "classes" if pooled else "sites"
    if layout == "classes":
        if sites is not None:
            raise ConfigError(f"dataset {NAME!r}: dataset_params.sites is set, but {folder} has no site folders")
        return [_unit(None, folder)]
    if layout != "sites":
        raise ConfigError(f"dataset_params.layout={layout!r} for {NAME}; choose 'auto', 'sites' or 'classes'")
    loose = [p for p in _visible(folder) if _is_image(p)]
    if loose:
        raise DataError(f"dataset {NAME!r}: {loose[0]} lies outside a site folder; move it into <site>/<class>/")
    names = [p.name for p in top]
    chosen = list(sites) if sites is not None else names
    unknown = [s for s in chosen if s not in names]
    if unknown or not chosen:
        raise DataError(
            f"dataset {NAME!r}: dataset_params.sites names {', '.join(map(repr, unknown)) or 'no site'}, "
            f"not a folder of {folder}; the sites there: {', '.join(names)}"
        )
    return [_unit(site, folder / site) for site in chosen]


def _files(units: list[Unit]) -> list[Path]:
    return [f for unit in units for classes in unit.splits.values() for files in classes.values() for f in files]


def imagefolder_manifest(
    root: Path,
    path: str,
    layout: str = "auto",
    sites: list[str] | tuple[str, ...] | None = None,
    **_: object,
) -> Manifest:
    """The content manifest of the images a load with these parameters reads, without decoding them."""
    folder = resolve_path(path, root)
    return content_manifest(NAME, folder, _files(scan(folder, layout, sites)))


NORMALIZATION = {"none": NONE3, "half": HALF3, "imagenet": IMAGENET}


@register_user_dataset(IMAGEFOLDER_META, imagefolder_manifest, source=IMAGEFOLDER_SOURCE, groups_param="sites")
def load_imagefolder(
    root: Path,
    path: str,
    verify: bool = True,
    image_size: int = 64,
    channels: Literal[1, 3] = 3,
    sites: list[str] | None = None,
    layout: Literal["auto", "sites", "classes"] = "auto",
    test_fraction: float = 0.2,
    split_seed: int = 0,
    normalization: Literal["none", "half", "imagenet"] = "none",
    digest: str | None = None,
) -> DatasetArrays:
    """path: the image folder (<site>/<class>/*, <site>/{train,test}/<class>/* or <class>/*); image_size: every
    image is resized to image_size × image_size; channels: 3 (RGB) or 1 (gray); sites: the site folders to use, in
    client order (default: all, sorted); layout: auto | sites | classes; test_fraction, split_seed: the seeded
    stratified hold-out of each site (sites with train/ and test/ folders keep theirs); normalization: none | half |
    imagenet; digest: the content's sha256 to pin (see `fedbench datasets check imagefolder -p path=…`)."""
    if image_size < 1:
        raise ConfigError(f"dataset_params.image_size={image_size} for {NAME} must be ≥ 1")
    if normalization == "imagenet" and channels != 3:
        raise ConfigError(f"dataset_params.normalization='imagenet' for {NAME} needs channels = 3")
    check_digest_param(NAME, digest)
    folder = resolve_path(path, root)
    units = scan(folder, layout, sites)
    classes = sorted({c for unit in units for split in unit.splits.values() for c in split})
    require_classes(NAME, classes, folder)
    label_of = {c: i for i, c in enumerate(classes)}

    # every image once, in (site, split, class, file) order, with its label, group and split (None: held out below)
    paths: list[Path] = []
    labels, groups, assigned = [], [], []
    for group, unit in enumerate(units):
        for split, by_class in unit.splits.items():
            for name in sorted(by_class):
                paths += by_class[name]
                labels += [label_of[name]] * len(by_class[name])
                groups += [group] * len(by_class[name])
                assigned += [split] * len(by_class[name])
    y, g = np.asarray(labels, np.int64), np.asarray(groups, np.int64)
    is_test = np.array([split == "test" for split in assigned], dtype=bool)
    pooled = np.flatnonzero([split is None for split in assigned])
    _, held_out = holdout_split(y[pooled], test_fraction, split_seed, g[pooled])
    is_test[pooled[held_out]] = True

    manifest = content_manifest(NAME, folder, paths) if verify else None
    mode = "RGB" if channels == 3 else "L"

    def decode(rows: np.ndarray) -> np.ndarray:
        return read_images([paths[i] for i in rows], image_size, mode, NAME, remedy=REMEDY)

    train, test = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    has_sites = units[0].name is not None
    mean, std = NORMALIZATION[normalization]
    meta = DatasetMeta(
        NAME,
        len(classes),
        (channels, image_size, image_size),
        mean[:channels],
        std[:channels],
        used_by=USED_BY,
        group_kind="site" if has_sites else None,
    )
    how = {
        "path": str(folder),
        "classes": classes,
        "image_size": image_size,
        "channels": channels,
        "test_fraction": test_fraction,
        "split_seed": split_seed,
        "presplit_sites": [u.name or "" for u in units if None not in u.splits],
    }
    if has_sites:
        how["group_names"] = [str(u.name) for u in units]
    if singles := singleton_warning(NAME, classes, y, folder):
        how[DATA_WARNINGS] = singles
    info = check_and_record(NAME, manifest, digest, verify, how)
    return DatasetArrays(
        meta,
        decode(train),
        y[train],
        decode(test),
        y[test],
        train_groups=g[train] if has_sites else None,
        test_groups=g[test] if has_sites else None,
        info=info,
    )
