"""``hf_disk``: a Hugging Face ``datasets`` folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``.

Read through ``datasets.load_from_disk`` (the optional extra: ``pip install 'fedbench-repro[hf]'``). ``dataset_params.path``
(resolved as ``own.resolve_path`` says) names the folder. A ``DatasetDict`` gives its ``train_split`` and, where it
has one, its ``test_split``; a single ``Dataset``, or a dict without the test split, holds out a stratified
``test_fraction`` of every (group, class), seeded by ``split_seed``.

Columns, by name:

* ``image_column``: an ``Image`` feature (each cell's encoded bytes, decoded with Pillow as ``imagefolder`` decodes
  files: ``channels``, resized to ``image_size`` × ``image_size``, into one uint8 array), or a numeric column (a
  number, or a fixed-length list per row), shaped as ``arrays`` shapes inputs (``arrayfile.as_inputs``);
* ``label_column``: a ``ClassLabel`` (its ``names``, in its order, are the classes) or integers / strings (the sorted
  distinct values are the classes);
* ``group_column`` (optional): each row's natural group (site, hospital), sorted distinct values, one client each
  with ``partition = "natural"``.

The content manifest covers every file of the folder (the Arrow shards, ``dataset_info.json``, ``state.json``,
``dataset_dict.json``), hidden files excepted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from fedbench.data.arrayfile import as_inputs
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import NONE3, split_arrays
from fedbench.data.files import DATA_WARNINGS, Source
from fedbench.data.images import EncodedImage, read_images
from fedbench.data.own import (
    USED_BY,
    Manifest,
    check_and_record,
    check_digest_param,
    class_index,
    content_manifest,
    own_split,
    refuse_negative_labels,
    register_user_dataset,
    require_classes,
    resolve_path,
    singleton_warning,
)
from fedbench.errors import DataError

NAME = "hf_disk"
INSTALL = "pip install 'fedbench-repro[hf]'"
HF_SOURCE = Source(
    layout="dataset_params.path = a folder written by datasets' save_to_disk (a Dataset, or a DatasetDict with "
    "train / test splits); image_column, label_column, group_column name its columns",
    how_to_get=f"your own data: dataset.save_to_disk(PATH) and set dataset_params.path ({INSTALL}); see "
    "'Your own data' in the README",
)
HF_META = DatasetMeta(NAME, 2, (3, 64, 64), *NONE3, used_by=USED_BY)
REMEDY = "fix or drop that row and save the data set again"


def _folder_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise DataError(
            f"dataset {NAME!r}: no folder {folder}; fix dataset_params.path (relative paths are resolved against the "
            "data root: --data-dir or $FEDBENCH_DATA)"
        )
    return sorted(
        (
            p
            for p in folder.rglob("*")
            if p.is_file() and not any(s.startswith(".") for s in p.relative_to(folder).parts)
        ),
        key=lambda p: p.relative_to(folder).as_posix(),
    )


def hf_manifest(root: Path, path: str, **_: object) -> Manifest:
    """The content manifest of the saved folder."""
    folder = resolve_path(path, root)
    return content_manifest(NAME, folder, _folder_files(folder))


def _load(folder: Path) -> Any:
    try:
        # local: optional dependency (pip install fedbench-repro[hf])
        import datasets
    except ImportError:
        raise DataError(f"dataset {NAME!r}: reading {folder} needs the datasets package: {INSTALL}") from None
    try:
        return datasets.load_from_disk(str(folder))
    except (OSError, ValueError) as error:  # FileNotFoundError, pyarrow's ArrowInvalid (a ValueError), bad JSON
        raise DataError(
            f"dataset {NAME!r}: cannot read {folder} with datasets.load_from_disk ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}); save it again with save_to_disk"
        ) from None


def _column(table: Any, column: str, folder: Path, what: str) -> list[Any]:
    if column not in table.column_names:
        raise DataError(
            f"dataset {NAME!r}: {folder} has no column {column!r} (columns: {', '.join(table.column_names)}); "
            f"set dataset_params.{what}"
        )
    return table.with_format("arrow")[column].to_pylist()


def _inputs(table: Any, column: str, folder: Path, image_size: int, channels: int) -> np.ndarray:
    import datasets  # local: optional dependency (pip install fedbench-repro[hf]); _load imported it first

    cells = _column(table, column, folder, "image_column")
    if isinstance(table.features[column], datasets.Image):
        sources = []
        for row, cell in enumerate(cells):
            if not cell or not cell.get("bytes"):
                raise DataError(
                    f"dataset {NAME!r}: {folder} row {row} of {column!r} holds no image bytes "
                    f"({(cell or {}).get('path') or 'empty'}); embed the images before save_to_disk"
                )
            sources.append(EncodedImage(f"{folder} row {row} ({cell.get('path') or column})", cell["bytes"]))
        return read_images(sources, image_size, "RGB" if channels == 3 else "L", NAME, remedy=REMEDY)
    try:
        values = np.asarray(cells)
    except ValueError:
        raise DataError(f"dataset {NAME!r}: {folder} column {column!r} holds lists of different lengths") from None
    return as_inputs(values, folder, column, NAME)


def _labels(table: Any, column: str, folder: Path) -> tuple[list[str] | None, np.ndarray]:
    import datasets  # local: optional dependency (pip install fedbench-repro[hf]); _load imported it first

    values = _column(table, column, folder, "label_column")
    feature = table.features[column]
    if isinstance(feature, datasets.ClassLabel):
        labels = np.asarray([-1 if v is None else v for v in values], dtype=np.int64)
        bad = np.flatnonzero((labels < 0) | (labels >= len(feature.names)))
        if len(bad):
            raise DataError(
                f"dataset {NAME!r}: {folder} row {bad[0]} of {column!r} has no class (label {labels[bad[0]]}, "
                f"classes {', '.join(feature.names)}); label or drop it"
            )
        return list(feature.names), labels
    if any(v is None for v in values):
        raise DataError(f"dataset {NAME!r}: {folder} column {column!r} has a missing label; fill or drop it")
    labels = np.asarray(values)
    refuse_negative_labels(NAME, labels, f"{folder} column {column!r}")  # as a ClassLabel's -1 is refused above
    return None, labels


@register_user_dataset(HF_META, hf_manifest, source=HF_SOURCE)
def load_hf_disk(
    root: Path,
    path: str,
    verify: bool = True,
    image_column: str = "image",
    label_column: str = "label",
    group_column: str | None = None,
    image_size: int = 64,
    channels: Literal[1, 3] = 3,
    train_split: str = "train",
    test_split: str = "test",
    test_fraction: float = 0.2,
    split_seed: int = 0,
    digest: str | None = None,
) -> DatasetArrays:
    """path: the folder save_to_disk wrote; image_column (an Image feature, or numeric inputs), label_column,
    group_column (optional natural groups); image_size, channels: how images are decoded; train_split, test_split:
    the splits of a DatasetDict (without a test split, and for a single Dataset, a stratified test_fraction of every
    group and class is held out, seeded by split_seed); digest: the content's sha256 to pin."""
    check_digest_param(NAME, digest)
    folder = resolve_path(path, root)
    files = _folder_files(folder)
    manifest = content_manifest(NAME, folder, files) if verify else None
    loaded = _load(folder)
    if hasattr(loaded, "keys"):  # a DatasetDict
        if train_split not in loaded:
            raise DataError(
                f"dataset {NAME!r}: {folder} has no split {train_split!r} (splits: {', '.join(loaded.keys())}); "
                "set dataset_params.train_split"
            )
        tables = [loaded[train_split]] + ([loaded[test_split]] if test_split in loaded else [])
    else:
        tables = [loaded]
    xs = [_inputs(t, image_column, folder, image_size, channels) for t in tables]
    labelled = [_labels(t, label_column, folder) for t in tables]
    names = labelled[0][0]
    if names is not None:
        classes, y = names, np.concatenate([y for _, y in labelled])
    else:
        try:
            classes, y = class_index(np.concatenate([y for _, y in labelled]))
        except TypeError:
            raise DataError(f"dataset {NAME!r}: {folder} labels mix numbers and strings; use one kind") from None
    require_classes(NAME, classes, folder)
    groups, group_names = None, None
    if group_column is not None:
        group_names, groups = class_index(
            np.concatenate([np.asarray(_column(t, group_column, folder, "group_column")) for t in tables])
        )
    x = np.concatenate(xs) if len(xs) == 2 else xs[0]
    how: dict[str, Any] = {"path": str(folder), "classes": classes, "image_column": image_column}
    if singles := singleton_warning(NAME, classes, y, folder):
        how[DATA_WARNINGS] = singles
    if len(tables) == 2:
        how["splits"] = [train_split, test_split]
    train, test = own_split(y, groups, len(xs[0]) if len(tables) == 2 else None, test_fraction, split_seed, how)
    if group_names is not None:
        how["group_names"] = group_names
    images = x.dtype == np.uint8
    meta = DatasetMeta(
        NAME,
        len(classes),
        tuple(x.shape[1:]),
        NONE3[0][: x.shape[1]] if images else (),
        NONE3[1][: x.shape[1]] if images else (),
        used_by=USED_BY,
        group_kind="group" if groups is not None else None,
    )
    return split_arrays(meta, x, y, groups, train, test, check_and_record(NAME, manifest, digest, verify, how))
