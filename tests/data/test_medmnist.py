"""MedMNIST (fedbench/data/medmnist.py): the metadata comes from the medmnist package (the ``medmnist`` extra), with a
hand copy that must equal it; the loader reads tiny .npz files in the official format."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import check_arrays
from fedbench.data import dataset_meta, load_dataset, medmnist
from fedbench.data.files import file_digest
from fedbench.errors import ConfigError, DataError


def test_package_info_is_read_without_importing_medmnist(monkeypatch, tmp_path):
    pytest.importorskip("medmnist.info")  # (importing it here is the test's business, not fedbench's)
    monkeypatch.setenv("HOME", str(tmp_path))
    medmnist.package_info.cache_clear()
    try:
        info = medmnist.package_info()
    finally:
        medmnist.package_info.cache_clear()
    assert info is not None and info["organamnist"]["n_samples"]["train"] == 34561
    assert not (tmp_path / ".medmnist").exists()  # importing the package would have created it


def test_the_fallback_copy_equals_the_package(monkeypatch):
    from medmnist.info import INFO  # skipped below when the extra is not installed

    for flag in medmnist.FLAGS:
        packaged = medmnist.metadata(flag)
        assert packaged["source"] == "medmnist package"
        assert packaged["md5"][28] == INFO[flag]["MD5"] and packaged["url"][224] == INFO[flag]["url_224"]
        monkeypatch.setattr(medmnist, "package_info", lambda: None)
        fallback = medmnist.metadata(flag)
        monkeypatch.undo()
        assert fallback["source"].startswith("fedbench's copy")
        assert {k: v for k, v in fallback.items() if k != "source"} == {
            k: v for k, v in packaged.items() if k != "source"
        }


if not medmnist.package_info():
    test_the_fallback_copy_equals_the_package = pytest.mark.skip(reason="the medmnist extra is not installed")(
        test_the_fallback_copy_equals_the_package
    )


def test_the_loader_checks_the_package_digest(tmp_path: Path, monkeypatch):
    """The md5 the loader verifies is the metadata's: with the package's table saying this file's digest, the
    fixture verifies; with the published one it does not."""
    fx.write_medmnist(tmp_path, "organcmnist")
    with pytest.raises(DataError, match="corrupt or a different version"):
        load_dataset("organcmnist", tmp_path)
    digest = hashlib.md5((tmp_path / "organcmnist" / "organcmnist.npz").read_bytes()).hexdigest()
    info = {flag: dict(entry) for flag, entry in (medmnist.package_info() or {}).items()}
    if not info:  # without the package: the same through the fallback table
        md5s, counts = medmnist._FALLBACK_INFO["organcmnist"]
        monkeypatch.setitem(medmnist._FALLBACK_INFO, "organcmnist", ({**md5s, 28: digest}, counts))
    else:
        info["organcmnist"]["MD5"] = digest
        monkeypatch.setattr(medmnist, "package_info", lambda: info)
    md5s, v2, _, stats = medmnist._MEDMNIST["organcmnist"]
    monkeypatch.setitem(
        medmnist._MEDMNIST, "organcmnist", (medmnist.metadata("organcmnist")["md5"], v2, (22, 5, 9), stats)
    )
    arrays = load_dataset("organcmnist", tmp_path)
    assert arrays.info["verified"] and arrays.info["version"] == "v3"


def test_the_loader_table_and_the_download_come_from_the_metadata():
    from fedbench.data import DATASETS

    for flag in medmnist.FLAGS:
        meta = medmnist.metadata(flag)
        md5s, _, counts, _ = medmnist._MEDMNIST[flag]
        assert md5s == meta["md5"] and counts == meta["counts"]
        download = DATASETS.info(flag)["source"].downloads[0]
        assert download.url == meta["url"][28] and download.md5 == meta["md5"][28]
        assert DATASETS.info(flag)["classes"] == meta["classes"]


@pytest.mark.parametrize("flag", ["organamnist", "organcmnist", "organsmnist"])
def test_medmnist_npz(tmp_path, monkeypatch, flag):
    written = fx.write_medmnist(tmp_path, flag)
    md5s, v2, counts, stats = medmnist._MEDMNIST[flag]
    digest = file_digest(tmp_path / flag / f"{flag}.npz")
    monkeypatch.setitem(medmnist._MEDMNIST, flag, ({**md5s, 28: digest}, v2, counts, stats))
    arrays = load_dataset(flag, tmp_path)
    check_arrays(arrays, 22, 9, (1, 28, 28))
    assert arrays.meta.num_classes == 11
    np.testing.assert_array_equal(arrays.train_y, written["train_labels"].reshape(-1))
    assert arrays.info["verified"] and arrays.info["version"] == "v3"
    pooled = load_dataset(flag, tmp_path, pool="train+val")
    assert len(pooled.train_y) == 27
    everything = load_dataset(flag, tmp_path, pool="all")
    assert len(everything.train_y) == 36 and len(everything.test_y) == 0
    assert dataset_meta(flag).used_by == ("fedtr",)


def test_medmnist_v2_file_is_accepted(tmp_path, monkeypatch):
    fx.write_medmnist(tmp_path, "organsmnist")
    md5s, _, counts, stats = medmnist._MEDMNIST["organsmnist"]
    digest = file_digest(tmp_path / "organsmnist" / "organsmnist.npz")
    monkeypatch.setitem(medmnist._MEDMNIST, "organsmnist", (md5s, digest, counts, stats))
    arrays = load_dataset("organsmnist", tmp_path)
    assert arrays.info["verified"] and arrays.info["version"] == "v2"


def test_medmnist_other_size_and_bad_params(tmp_path):
    fx.write_medmnist(tmp_path, "organcmnist", size=64)
    arrays = load_dataset("organcmnist", tmp_path, size=64, verify=False)
    check_arrays(arrays, 22, 9, (1, 64, 64))
    with pytest.raises(DataError, match="organcmnist.npz"):
        load_dataset("organcmnist", tmp_path)
    with pytest.raises(ConfigError, match="size"):
        load_dataset("organcmnist", tmp_path, size=30)
    with pytest.raises(ConfigError, match="no parameter"):
        load_dataset("organcmnist", tmp_path, bogus=1)
