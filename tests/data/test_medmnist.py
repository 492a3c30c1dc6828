"""MedMNIST metadata comes from the medmnist package (the ``medmnist`` extra), with a hand copy that must equal it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import data_fixtures as fx
from fedbench.data import load_dataset, medmnist
from fedbench.errors import DataError


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
