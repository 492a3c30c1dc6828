"""``arrays``: a team's own arrays in one ``.npz`` or ``.parquet`` file: inputs, labels and an optional group column.

``dataset_params.path`` (resolved as ``own.resolve_path`` says) names the file; ``test_path`` optionally names a
second one in the same format holding the test split (else a stratified ``test_fraction`` of every (group, class) is
held out, seeded by ``split_seed``). ``.npz`` files are read with ``numpy.load(allow_pickle=False)`` (every array
numeric or string, none of objects); ``.parquet`` files need pyarrow (``pip install 'fedbench-repro[parquet]'``).

In either format, keys (npz arrays or parquet columns) are picked by name:

* ``label``: the class of each row (default the first of ``y``, ``labels``, ``label`` present): integers or strings;
  the classes are the sorted distinct values of both files (numbers by value, strings by code point) and class ``i``
  is the ``i``-th (``info['classes']``);
* ``group`` (optional): each row's natural group, e.g. its site or subject (default the first of ``groups``,
  ``group``, ``site`` present); groups are the sorted distinct values, ``info['group_names']`` names them, and
  ``partition = "natural"`` makes one client of each;
* ``features``: the key holding the inputs, or a list of keys of 1-D numeric columns stacked side by side (default
  ``x`` or ``features`` where present, else every other key). A parquet column may hold a fixed-length list per row.

Inputs keep their sample axis first and are shaped as fedbench's models read them: (N, D) tabular features become a
one-channel signal (N, 1, 1, D); (N, C, T) signals become (N, C, 1, T), as PAMAP2's; (N, C, H, W) stays. uint8 inputs
are images (scaled by 1/255 at training time; (N, H, W) and (N, H, W, C) are made NCHW as ``images.to_nchw`` does);
every other dtype becomes float32, used as it is (no normalisation). A non-finite input is an error.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import split_arrays
from fedbench.data.files import DATA_WARNINGS, Source
from fedbench.data.images import to_nchw
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

NAME = "arrays"
LABEL_KEYS = ("y", "labels", "label")
GROUP_KEYS = ("groups", "group", "site")
FEATURE_KEYS = ("x", "features")
PARQUET_INSTALL = "pip install 'fedbench-repro[parquet]'"
ARRAYS_SOURCE = Source(
    layout="dataset_params.path = one .npz (arrays x|features, y|labels, optional groups|site) or .parquet file "
    "(feature columns, a label column, an optional group column); test_path = an optional test file",
    how_to_get="your own arrays: set dataset_params.path (relative paths are under the data root); see "
    "'Your own data' in the README",
)
ARRAYS_META = DatasetMeta(NAME, 2, (1, 1, 16), (), (), used_by=USED_BY)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file. An ``.npz`` is a zip archive of ``.npy`` files: any other file is refused
    before numpy reads it (numpy would take it for a pickle and say so), and so is an array of objects."""
    if not path.is_file():
        raise DataError(f"dataset {NAME!r}: no file {path}; fix dataset_params.path")
    if not zipfile.is_zipfile(path):
        raise DataError(
            f"dataset {NAME!r}: {path} is not an .npz file (no complete zip archive of arrays: truncated, or another format); write it with "
            "numpy.savez"
        )
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {}
            for key in stored.files:
                try:
                    arrays[key] = stored[key]
                except ValueError as error:
                    if "allow_pickle" not in str(error):
                        raise
                    raise DataError(
                        f"dataset {NAME!r}: {path} array {key!r} holds Python objects, which fedbench never "
                        "unpickles; store numbers or strings (numpy.savez of a numeric or str array)"
                    ) from None
            return arrays
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise DataError(
            f"dataset {NAME!r}: cannot read {path} as .npz ({error}); write it again with numpy.savez "
            "(numeric or string arrays, no objects)"
        ) from None


def _column(values: Any, name: str, path: Path) -> np.ndarray:
    """A parquet column as one array: scalars as (N,), fixed-length lists as (N, L, …)."""
    array = np.asarray(values)
    if array.dtype == object:
        if any(v is None for v in array):
            row = next(i for i, v in enumerate(array) if v is None)
            raise DataError(
                f"dataset {NAME!r}: {path} column {name!r} has a missing value at row {row}; fill or drop it"
            )
        if len(array) and isinstance(array[0], str):
            return array.astype(str)
        try:
            array = np.stack([np.asarray(v) for v in array]) if len(array) else array.astype(np.float32)
        except ValueError:
            raise DataError(
                f"dataset {NAME!r}: {path} column {name!r} holds lists of different lengths; give every row the "
                "same length"
            ) from None
    return array


def read_parquet(path: Path) -> dict[str, np.ndarray]:
    try:
        # local: optional dependency (pip install fedbench-repro[parquet])
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"dataset {NAME!r}: reading {path} needs pyarrow: {PARQUET_INSTALL}") from None
    if not path.is_file():
        raise DataError(f"dataset {NAME!r}: no file {path}; fix dataset_params.path")
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise DataError(
            f"dataset {NAME!r}: cannot read {path} as .parquet ({error}); write it again "
            "(e.g. pandas.DataFrame.to_parquet)"
        ) from None
    return {name: _column(table.column(name).to_numpy(zero_copy_only=False), name, path) for name in table.column_names}


def read_file(path: Path) -> dict[str, np.ndarray]:
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return read_npz(path)
    if suffix == ".parquet":
        return read_parquet(path)
    raise DataError(f"dataset {NAME!r}: {path} is neither .npz nor .parquet; convert it to one of them")


def _pick(table: dict[str, np.ndarray], given: str | None, defaults: tuple[str, ...], what: str, path: Path):
    """The key ``given`` (which must exist) or the first of ``defaults`` present (None when none is)."""
    if given is not None:
        if given not in table:
            raise DataError(
                f"dataset {NAME!r}: {path} has no {what} {given!r} (it has {', '.join(sorted(table)) or 'nothing'}); "
                f"fix dataset_params.{what}"
            )
        return given
    return next((key for key in defaults if key in table), None)


def as_inputs(x: np.ndarray, path: Path, key: str, dataset: str = NAME) -> np.ndarray:
    """Inputs in the (N, C, H, W) layout the models read (see the module docstring); ``dataset`` is the loader the
    errors name (``hf_disk`` shapes its numeric columns here too)."""
    if x.dtype.kind not in "biuf" or x.ndim < 1:
        raise DataError(f"dataset {dataset!r}: {path} {key!r} is not numeric ({x.dtype}); store numbers")
    if x.dtype == np.uint8 and x.ndim in (3, 4):
        return to_nchw(x)
    x = np.asarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        row = int(np.flatnonzero(~np.isfinite(x.reshape(len(x), -1)).all(1))[0])
        raise DataError(f"dataset {dataset!r}: {path} {key!r} has a NaN or infinite value at row {row}; clean it")
    if x.ndim == 1:
        return x[:, None, None, None]
    if x.ndim == 2:
        return x[:, None, None, :]
    if x.ndim == 3:
        return x[:, :, None, :]
    if x.ndim == 4:
        return x
    raise DataError(f"dataset {dataset!r}: {path} {key!r} has shape {x.shape}; use (N, D), (N, C, T) or (N, C, H, W)")


def table_columns(
    table: dict[str, np.ndarray],
    path: Path,
    features: str | list[str] | None,
    label: str | None,
    group: str | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(inputs, raw label values, raw group values or None) of one file or table."""
    label_key = _pick(table, label, LABEL_KEYS, "label", path)
    if label_key is None:
        raise DataError(
            f"dataset {NAME!r}: {path} has no label (none of {', '.join(LABEL_KEYS)}; it has "
            f"{', '.join(sorted(table))}); set dataset_params.label"
        )
    group_key = _pick(table, group, GROUP_KEYS, "group", path)
    if isinstance(features, list):
        keys = features
    elif features is not None:
        keys = [_pick(table, features, (), "features", path)]
    else:
        found = _pick(table, None, FEATURE_KEYS, "features", path)
        keys = [found] if found else [k for k in table if k not in (label_key, group_key)]
    missing = [k for k in keys if k not in table]
    if missing or not keys:
        raise DataError(
            f"dataset {NAME!r}: {path} has no features {', '.join(map(repr, missing)) or '(no column left)'} "
            f"(it has {', '.join(sorted(table))}); fix dataset_params.features"
        )
    if len(keys) == 1:
        x = as_inputs(table[keys[0]], path, keys[0])
    else:
        columns = [table[k] for k in keys]
        flat = [k for k, c in zip(keys, columns) if c.ndim != 1]
        if flat:
            raise DataError(f"dataset {NAME!r}: {path} feature {flat[0]!r} is not a column of scalars; list it alone")
        x = as_inputs(np.stack(columns, axis=1), path, "+".join(keys))
    y = table[label_key]
    if y.ndim != 1 or len(y) != len(x):
        raise DataError(
            f"dataset {NAME!r}: {path} label {label_key!r} has shape {y.shape}, expected ({len(x)},): one per row"
        )
    if y.dtype.kind == "f" and not np.array_equal(y, np.round(y)):
        raise DataError(f"dataset {NAME!r}: {path} label {label_key!r} holds fractions; labels are class ids or names")
    if y.dtype.kind in "fb":
        y = y.astype(np.int64)  # whole numbers stored as floats (pandas) are class ids: class "1", not "1.0"
    refuse_negative_labels(NAME, y, f"{path} label {label_key!r}")
    groups = None
    if group_key is not None:
        groups = table[group_key]
        if groups.ndim != 1 or len(groups) != len(x):
            raise DataError(
                f"dataset {NAME!r}: {path} group {group_key!r} has shape {groups.shape}, expected ({len(x)},)"
            )
    return x, y, groups


def _manifest_files(root: Path, path: str, test_path: str | None) -> tuple[Path, list[Path]]:
    files = [resolve_path(path, root)] + ([resolve_path(test_path, root)] if test_path else [])
    for file in files:
        if not file.is_file():
            raise DataError(
                f"dataset {NAME!r}: no file {file}; fix dataset_params.{'path' if file == files[0] else 'test_path'}"
            )
    base = files[0] if len(files) == 1 else Path(os.path.commonpath([f.parent for f in files]))
    return base, files


def arrays_manifest(root: Path, path: str, test_path: str | None = None, **_: object) -> Manifest:
    """The content manifest of the file(s) a load with these parameters reads."""
    base, files = _manifest_files(root, path, test_path)
    return content_manifest(NAME, base, files)


@register_user_dataset(ARRAYS_META, arrays_manifest, source=ARRAYS_SOURCE)
def load_arrayfile(
    root: Path,
    path: str,
    verify: bool = True,
    test_path: str | None = None,
    features: str | list[str] | None = None,
    label: str | None = None,
    group: str | None = None,
    test_fraction: float = 0.2,
    split_seed: int = 0,
    digest: str | None = None,
) -> DatasetArrays:
    """path: the .npz or .parquet file; test_path: an optional test file in the same format (else a stratified
    test_fraction of every group and class is held out, seeded by split_seed); features / label / group: the keys or
    columns to read (defaults: x|features, y|labels|label, groups|group|site); digest: the content's sha256 to pin
    (see `fedbench datasets check arrays -p path=…`)."""
    check_digest_param(NAME, digest)
    base, files = _manifest_files(root, path, test_path)
    manifest = content_manifest(NAME, base, files) if verify else None
    parts = [table_columns(read_file(f), f, features, label, group) for f in files]
    if len(parts) == 2 and parts[0][0].shape[1:] != parts[1][0].shape[1:]:
        raise DataError(
            f"dataset {NAME!r}: {files[1]} inputs have shape {parts[1][0].shape[1:]}, {files[0]}'s "
            f"{parts[0][0].shape[1:]}; give both files the same features"
        )
    if len(parts) == 2 and (parts[0][2] is None) != (parts[1][2] is None):
        raise DataError(f"dataset {NAME!r}: only one of {files[0]} and {files[1]} has a group column; give both one")
    sizes = [len(p[1]) for p in parts]
    if len({p[1].dtype.kind in "US" for p in parts}) > 1:  # numpy would turn the numbers into strings without a word
        raise DataError(
            f"dataset {NAME!r}: the labels of {files[0]} and {files[1]} mix numbers and strings; use one kind"
        )
    try:
        classes, y = class_index(np.concatenate([p[1] for p in parts]))
    except TypeError:
        raise DataError(f"dataset {NAME!r}: the labels of {files[0]} mix numbers and strings; use one kind") from None
    require_classes(NAME, classes, files[0])
    x = np.concatenate([p[0] for p in parts]) if len(parts) == 2 else parts[0][0]
    groups, group_names = None, None
    if parts[0][2] is not None:
        group_names, groups = class_index(np.concatenate([p[2] for p in parts]))
    how: dict[str, Any] = {"path": str(files[0]), "classes": classes, "input_shape": list(x.shape[1:])}
    if singles := singleton_warning(NAME, classes, y, files[0]):
        how[DATA_WARNINGS] = singles
    if len(parts) == 2:
        how["test_path"] = str(files[1])
    train, test = own_split(y, groups, sizes[0] if len(parts) == 2 else None, test_fraction, split_seed, how)
    if group_names is not None:
        how["group_names"] = group_names
    meta = replace(
        ARRAYS_META,
        num_classes=len(classes),
        input_shape=tuple(x.shape[1:]),
        group_kind="group" if groups is not None else None,
    )
    return split_arrays(meta, x, y, groups, train, test, check_and_record(NAME, manifest, digest, verify, how))
