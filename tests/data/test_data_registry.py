"""The dataset registry (``fedbench/data/_registry.py``): the static input shape a run will see, the data root's
precedence, ``dataset_params`` checked and filled with the loader's defaults, and ``load_dataset`` passing the root,
the checksum switch and the parameters to the loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.data import _registry
from fedbench.data._registry import DATASETS, data_root, dataset_params, load_dataset, static_input_shape
from fedbench.errors import ConfigError


@pytest.mark.parametrize(
    "name,params,shape",
    [
        ("mnist", None, (1, 28, 28)),
        ("organamnist", {"size": 64}, (1, 64, 64)),  # MedMNIST's size
        ("covid19", {"image_size": 224}, (3, 224, 224)),
        ("organamnist", {"size": True}, (1, 28, 28)),  # a bool is no size
        ("imagefolder", {"image_size": 32, "channels": 1}, (1, 32, 32)),
        ("pamap2", {}, (27, 1, 200)),  # IMU windows: the registered shape
    ],
)
def test_static_input_shape_applies_the_size_and_channel_parameters(name, params, shape):
    assert static_input_shape(name, params) == shape


def test_the_data_root_is_the_flag_then_the_environment_then_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path / "env"))
    assert data_root(tmp_path / "flag") == tmp_path / "flag"
    assert data_root("~/d") == Path.home() / "d"
    assert data_root() == tmp_path / "env"
    monkeypatch.delenv("FEDBENCH_DATA")
    monkeypatch.setattr(_registry.platformdirs, "user_cache_dir", lambda app: str(tmp_path / "cache" / app))
    assert data_root() == tmp_path / "cache" / "fedbench" / "data"


def test_dataset_params_fill_the_loaders_defaults_and_refuse_unknown_ones():
    assert dataset_params("digits", {}) == {"test_fraction": 0.2, "split_seed": 0}
    assert dataset_params("digits", {"split_seed": 3}) == {"test_fraction": 0.2, "split_seed": 3}
    with pytest.raises(ConfigError, match="root"):  # fedbench supplies the root itself
        dataset_params("digits", {"root": "/elsewhere"})
    with pytest.raises(ConfigError, match="colour"):
        dataset_params("digits", {"colour": True})


def test_load_dataset_passes_root_verify_and_filled_params(monkeypatch, tmp_path):
    calls = []

    def loader(root, verify=True, size: int = 4):
        calls.append((root, verify, size))
        return "arrays"

    def plain(root, size: int = 4):
        calls.append((root, size))
        return "plain"

    monkeypatch.setitem(DATASETS._entries, "fake_checked", loader)
    monkeypatch.setitem(DATASETS._entries, "fake_plain", plain)
    assert load_dataset("fake_checked", tmp_path, verify=False, use_prepared=False) == "arrays"
    assert load_dataset("fake_plain", tmp_path, verify=False, use_prepared=False, size=2) == "plain"
    assert calls == [(tmp_path / "fake_checked", False, 4), (tmp_path / "fake_plain", 2)]
