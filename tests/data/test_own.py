"""The shared parts of a user's own data sets: path resolution, the content manifest (its digest is ``sha256sum`` over
the sorted files), the pinned digest, and the warning for finished runs trained on other content."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from fedbench.data.own import (
    MAX_LISTED,
    Manifest,
    changed_data_warning,
    check_and_record,
    class_index,
    content_manifest,
    own_split,
    resolve_path,
)
from fedbench.errors import DataError


def write(folder: Path, files: dict[str, bytes]) -> list[Path]:
    paths = []
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    return paths


def test_relative_paths_are_under_the_data_root_absolute_ones_as_written(tmp_path):
    root = tmp_path / "data" / "imagefolder"  # what load_dataset hands a loader: <data root>/<name>
    assert resolve_path("xrays", root) == tmp_path / "data" / "xrays"
    assert resolve_path(str(tmp_path / "elsewhere"), root) == tmp_path / "elsewhere"


def test_the_digest_is_sha256sum_over_the_sorted_files(tmp_path):
    paths = write(tmp_path, {"b/2.png": b"two", "a/1.png": b"one", "a/10.png": b"ten"})
    manifest = content_manifest("x", tmp_path, paths)
    assert [rel for rel, _, _ in manifest.entries] == ["a/1.png", "a/10.png", "b/2.png"]
    lines = "".join(
        f"{hashlib.sha256(d).hexdigest()}  {r}\n"
        for r, d in [("a/1.png", b"one"), ("a/10.png", b"ten"), ("b/2.png", b"two")]
    )
    assert manifest.sha256 == hashlib.sha256(lines.encode()).hexdigest()
    record = manifest.record()
    assert record["manifest"]["files"] == 3 and record["manifest"]["bytes"] == 9
    assert record["digests"]["a/1.png"] == hashlib.sha256(b"one").hexdigest()


def test_one_changed_byte_or_a_renamed_file_changes_the_digest(tmp_path):
    paths = write(tmp_path, {"a/1.png": b"one", "b/2.png": b"two"})
    before = content_manifest("x", tmp_path, paths).sha256
    paths[0].write_bytes(b"onf")
    assert content_manifest("x", tmp_path, paths).sha256 != before
    paths[0].write_bytes(b"one")
    assert content_manifest("x", tmp_path, paths).sha256 == before
    moved = tmp_path / "c" / "1.png"
    moved.parent.mkdir()
    paths[0].rename(moved)
    assert content_manifest("x", tmp_path, [moved, paths[1]]).sha256 != before


def test_a_large_manifest_is_recorded_by_its_digest_only(tmp_path):
    entries = tuple((f"{i:05d}.png", "0" * 64, 1) for i in range(MAX_LISTED + 1))
    record = Manifest(tmp_path, entries).record()
    assert (
        record["manifest"]["listed"] is False
        and record["digests"] == {}
        and record["manifest"]["files"] == MAX_LISTED + 1
    )


def test_an_unreadable_file_is_one_data_error_naming_it(tmp_path):
    with pytest.raises(DataError, match=r"cannot read .*gone\.png") as caught:
        content_manifest("x", tmp_path, [tmp_path / "gone.png"])
    assert "\n" not in str(caught.value)


def test_a_pinned_digest_verifies_the_content_and_a_wrong_one_is_a_data_error(tmp_path):
    manifest = content_manifest("x", tmp_path, write(tmp_path, {"a.png": b"a"}))
    assert check_and_record("x", manifest, None, True, {})["verified"] is False
    assert check_and_record("x", manifest, manifest.sha256.upper(), True, {})["verified"] is True
    with pytest.raises(DataError, match="the data changed") as caught:
        check_and_record("x", manifest, "0" * 64, True, {})
    assert manifest.sha256 in str(caught.value) and "\n" not in str(caught.value)
    skipped = check_and_record("x", None, None, False, {"k": 1})
    assert skipped["verified"] is False and skipped["manifest"] is None and skipped["k"] == 1


def test_classes_are_the_sorted_distinct_values():
    classes, index = class_index(__import__("numpy").array([10, 2, 10, 7]))
    assert classes == ["2", "7", "10"] and index.tolist() == [2, 0, 2, 1]  # numbers by value, not as text
    classes, index = class_index(__import__("numpy").array(["b", "B", "a"]))
    assert classes == ["B", "a", "b"] and index.tolist() == [2, 0, 1]  # strings by code point


def test_finished_runs_on_other_content_are_warned_of(tmp_path):
    folder = tmp_path / "data" / "cells"
    write(folder, {"s/a/1.png": b"", "s/b/1.png": b""})
    from PIL import Image

    for rel in ("s/a/1.png", "s/b/1.png"):
        Image.new("RGB", (2, 2)).save(folder / rel)
    params = {"path": "cells", "layout": "auto", "sites": None}
    now = content_manifest("imagefolder", folder, sorted(folder.rglob("*.png"))).sha256
    same = {"data": {"manifest": {"sha256": now}}}
    other = {"data": {"manifest": {"sha256": "f" * 64}}}
    data_root = tmp_path / "data"
    assert changed_data_warning("imagefolder", data_root, params, [same, None]) is None
    line = changed_data_warning("imagefolder", data_root, params, [same, other])
    assert line and "--force" in line and str(folder) in line and "\n" not in line
    assert changed_data_warning("imagefolder", data_root, {**params, "digest": now}, [other]) is None  # pinned
    assert changed_data_warning("mnist", data_root, {}, [other]) is None  # not a user's path


def test_own_split_keeps_a_given_test_part_after_the_training_samples():
    how: dict = {}
    train, test = own_split(np.array([0, 1, 0, 1, 1]), None, 3, 0.5, 7, how)
    assert train.tolist() == [0, 1, 2] and test.tolist() == [3, 4]
    assert how == {}  # nothing was held out, so no fraction or seed describes the split


def test_own_split_holds_out_a_stratified_fraction_of_every_group_and_class():
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1] * 2)
    groups = np.repeat([0, 1], 8)
    how: dict = {}
    train, test = own_split(y, groups, None, 0.25, 3, how)
    assert sorted(train.tolist() + test.tolist()) == list(range(16))
    # one of the four samples of each (group, class) is held out
    assert sorted(zip(groups[test].tolist(), y[test].tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert how == {"test_fraction": 0.25, "split_seed": 3}
