"""The COVID-19 loaders (fedbench/data/covid.py) checked against the code that used the data: FedAP's
xdata.npy/ydata.npy layout and the Mendeley folder layout (curated CXR, FedAP/PersonalizedFL), and COVIDx's lists,
in tiny fixture files."""

from __future__ import annotations

import numpy as np
import pytest

import data_fixtures as fx
from fedbench.data import load_dataset
from fedbench.data.covid import COVID19_CLASSES
from fedbench.errors import DataError

MENDELEY_CLASSES = ("COVID-19", "Normal", "Pneumonia-Bacterial", "Pneumonia-Viral")


def write_fedap_npy(data_root, x, y):
    root = data_root / "covid19"
    root.mkdir(parents=True, exist_ok=True)
    np.save(root / "xdata.npy", x)
    np.save(root / "ydata.npy", y)


def test_mendeley_class_folder_names():
    # Mendeley 9xkhgts2s6 / Kaggle unaissait mirror: Curated X-Ray Dataset/{COVID-19,Normal,Pneumonia-Bacterial,Pneumonia-Viral}
    assert COVID19_CLASSES == MENDELEY_CLASSES


def test_mendeley_archive_unpacked_in_place(tmp_path):
    # Unpacking the Mendeley download into covid19/ nests the class folders three levels down.
    base = (
        tmp_path
        / "covid19"
        / "Curated Dataset for COVID-19 Posterior-Anterior Chest Radiography Images (X-Rays)"
        / "Curated X-Ray Dataset"
        / "Curated X-Ray Dataset"
    )
    for label, name in enumerate(MENDELEY_CLASSES):
        for k in range(2):
            fx.write_jpeg(base / name / f"{name} ({k + 1}).jpg", np.full((20, 24), 40 * label + k, dtype=np.uint8))
    arrays = load_dataset("covid19", tmp_path, image_size=16, test_fraction=0.0, verify=False)
    assert arrays.info["format"] == "mendeley-folders" and arrays.info["classes"] == list(MENDELEY_CLASSES)
    assert np.bincount(arrays.train_y).tolist() == [2, 2, 2, 2]
    assert arrays.train_x.shape == (8, 3, 16, 16)


def test_fedap_npy_nhwc_uint8_and_column_labels(tmp_path):
    # PersonalizedFL CovidDataset: xdata (N, H, W, 3) → einsum('bxyz->bzxy') = (N, 3, H, W); ydata squeezed.
    x = np.zeros((8, 6, 5, 3), dtype=np.uint8)
    x[..., 0], x[..., 1], x[..., 2] = 10, 20, 30
    y = (np.arange(8) % 4).reshape(-1, 1)
    write_fedap_npy(tmp_path, x, y)
    arrays = load_dataset("covid19", tmp_path, image_size=6, test_fraction=0.0, verify=False)
    assert arrays.info["format"] == "fedap-npy"
    assert arrays.info["classes"] == ["0", "1", "2", "3"]  # label ids: no code names them
    assert arrays.train_y.tolist() == list(np.arange(8) % 4)
    assert arrays.train_x.dtype == np.uint8 and arrays.train_x.shape == (8, 3, 6, 6)
    assert arrays.train_x[:, 0].max() == 10 and arrays.train_x[:, 2].min() == 30


@pytest.mark.parametrize("scale", [1.0, 255.0])
def test_fedap_npy_float_values(tmp_path, scale):
    # Third-party loaders disagree whether xdata is on 0..1 or 0..255; both must come out as the same uint8 image.
    pixels = np.random.default_rng(1).integers(0, 256, (4, 8, 8, 3)).astype(np.float32)
    write_fedap_npy(tmp_path, pixels / 255.0 * scale, np.arange(4))
    arrays = load_dataset("covid19", tmp_path, image_size=8, test_fraction=0.0, verify=False)
    assert arrays.train_x.dtype == np.uint8
    np.testing.assert_array_equal(arrays.train_x, pixels.transpose(0, 3, 1, 2).astype(np.uint8))


def test_fedap_npy_rejects_labels_outside_four_classes(tmp_path):
    write_fedap_npy(tmp_path, np.zeros((3, 4, 4, 3), np.uint8), np.array([0, 1, 4]))
    with pytest.raises(DataError, match="0..3"):
        load_dataset("covid19", tmp_path, image_size=4, test_fraction=0.0, verify=False)


def test_covid19_mendeley_folders(tmp_path):
    fx.write_covid19_folders(tmp_path)
    arrays = load_dataset("covid19", tmp_path, image_size=32)
    assert arrays.train_x.shape[1:] == (3, 32, 32)
    assert len(arrays.train_y) == 16 and len(arrays.test_y) == 4
    assert np.bincount(arrays.test_y).tolist() == [1, 1, 1, 1]
    assert arrays.meta.num_classes == 4


def test_covid19_fedap_npy(tmp_path):
    root = tmp_path / "covid19"
    root.mkdir()
    np.save(root / "xdata.npy", np.random.default_rng(0).integers(0, 256, (10, 24, 20, 3), dtype=np.uint8))
    np.save(root / "ydata.npy", np.arange(10) % 4)
    arrays = load_dataset("covid19", tmp_path, image_size=16, test_fraction=0.0)
    assert arrays.train_x.shape == (10, 3, 16, 16) and arrays.info["format"] == "fedap-npy"


def test_covidx(tmp_path):
    fx.write_covidx(tmp_path)
    arrays = load_dataset("covidx", tmp_path, image_size=32)
    assert arrays.train_x.shape == (6, 3, 32, 32) and arrays.test_x.shape == (4, 3, 32, 32)
    assert arrays.train_y.tolist() == [0, 1, 0, 1, 0, 1]
    assert arrays.meta.num_classes == 2
    (tmp_path / "covidx" / "test" / "test_1.png").unlink()
    with pytest.raises(DataError, match="test_1.png"):
        load_dataset("covidx", tmp_path)
