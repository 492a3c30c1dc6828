"""`fedbench datasets list` reports bci (data in MOABB's cache, not the fedbench data root) as present only when
MOABB is installed and every source is in its cache: a cheap look at folders, no MOABB import, no network."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.data import bci
from fedbench.data.catalog import dataset_info, is_present, list_datasets

runner = CliRunner()

# one file per source, laid out as MOABB's downloaders leave them (two BNCI URL layouts, old and new)
CACHED = {
    "AlexMI": "MNE-alexeeg-data/zenodo/806023/subject1.raw.fif",
    "BNCI2014_001": "MNE-bnci-data/database/data-sets/001-2014/A01T.mat",
    "BNCI2015_004": "MNE-bnci-data/~bci/database/004-2015/A.mat",
    "Zhou2016": "MNE-zhou-2016/subject_1/1A.cnt",
}


@pytest.fixture
def mne_data(tmp_path, monkeypatch):
    """An empty MOABB cache in tmp_path (every MNE config key that could point elsewhere redirected there)."""
    cache = tmp_path / "mne_data"
    cache.mkdir()
    monkeypatch.setenv("MNE_DATA", str(cache))
    for sign in {sign for sign, _ in bci.CACHE_FILES.values()}:
        monkeypatch.setenv(f"MNE_DATASETS_{sign}_PATH", str(cache))
    return cache


@pytest.fixture
def installed(monkeypatch):
    """An importable (fake) moabb; the presence test must not import its datasets module."""
    module = types.ModuleType("moabb")
    monkeypatch.setitem(sys.modules, "moabb", module)
    monkeypatch.delitem(sys.modules, "moabb.datasets", raising=False)
    return module


def fill(cache: Path, sources=tuple(CACHED)) -> None:
    for name in sources:
        path = cache / CACHED[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def bci_row(data_dir) -> dict:
    return {row["name"]: row for row in list_datasets(data_dir)}["bci"]


def test_bci_absent_without_moabb_even_with_a_full_cache(mne_data, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "moabb", None)
    fill(mne_data)
    assert not bci_row(tmp_path)["present"]


def test_bci_present_only_when_every_source_is_cached(mne_data, installed, tmp_path):
    assert not bci_row(tmp_path)["present"]  # moabb installed, nothing fetched
    fill(mne_data, ("AlexMI", "BNCI2014_001", "BNCI2015_004"))
    assert not bci_row(tmp_path)["present"]  # Zhou2016 missing
    (mne_data / "MNE-zhou-2016").mkdir()  # MOABB creates the folder before downloading
    assert not bci_row(tmp_path)["present"]
    fill(mne_data)
    assert bci_row(tmp_path)["present"]
    assert is_present("bci", tmp_path) and dataset_info("bci", tmp_path)["present"]
    assert "moabb.datasets" not in sys.modules  # cheap: the MOABB package itself was never imported


def test_a_per_dataset_mne_path_is_honoured(mne_data, installed, tmp_path, monkeypatch):
    fill(mne_data, ("AlexMI", "BNCI2014_001", "BNCI2015_004"))
    elsewhere = tmp_path / "zhou_cache"
    monkeypatch.setenv("MNE_DATASETS_ZHOU_PATH", str(elsewhere))
    fill(mne_data, ("Zhou2016",))
    assert not bci_row(tmp_path)["present"]  # Zhou2016 is looked for where MNE says it lives
    fill(elsewhere, ("Zhou2016",))
    assert bci_row(tmp_path)["present"]


def test_listing_never_touches_the_network(mne_data, installed, tmp_path):
    fill(mne_data)
    with bci.no_network() as refused:
        rows = list_datasets(tmp_path)
    assert refused == [] and {r["name"]: r for r in rows}["bci"]["present"]


def test_cli_list_reports_bci_status(mne_data, installed, tmp_path):
    def listed() -> bool:
        result = runner.invoke(app, ["datasets", "list", "--data-dir", str(tmp_path), "--json"])
        assert result.exit_code == 0, result.output
        return {row["name"]: row for row in json.loads(result.stdout)}["bci"]["present"]

    assert listed() is False
    fill(mne_data)
    assert listed() is True
    table = runner.invoke(app, ["datasets", "list", "--data-dir", str(tmp_path)])
    assert table.exit_code == 0 and "bci" in table.stdout


def test_other_datasets_still_use_their_file_lists(tmp_path):
    rows = {row["name"]: row for row in list_datasets(tmp_path)}
    assert rows["digits"]["present"] and not rows["cifar100"]["present"]
