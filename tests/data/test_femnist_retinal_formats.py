"""Value conventions of two official formats, checked on tiny files written in those formats:
FEMNIST pixel polarity (LEAF json and TFF h5 both store background 1.0 / ink 0.0; fedbench keeps it) and the
DoFE "Fundus" gray masks (0 = cup, 128 = rim, 255 = background, thresholded at 50 / 200 as the DoFE authors' loaders
do, so interpolated border values land in a class)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import data_fixtures as fx
from fedbench.data import load_dataset
from fedbench.data.retinal import masks_from_gray

# ---- FEMNIST ---------------------------------------------------------------------------------------------


def glyph() -> np.ndarray:
    """A 28×28 'character' as both formats store it: background 1.0, ink 0.0, one anti-aliased edge at 0.5."""
    image = np.ones((28, 28), np.float32)
    image[6:22, 12:15] = 0.0  # vertical stroke
    image[6:22, 15] = 0.5  # anti-aliased edge
    return image


def write_leaf(root, image: np.ndarray, writer: str = "f0000_00") -> None:
    for split in ("train", "test"):
        blob = {
            "users": [writer],
            "num_samples": [2],
            "user_data": {writer: {"x": [image.ravel().tolist(), np.ones(784).tolist()], "y": [1, 10]}},
        }
        fx.write_json(root / "femnist" / "data" / split / f"all_data_0_niid_0_keep_0_{split}_9.json", blob)


def write_tff(root, image: np.ndarray, writer: str = "f0000_00") -> None:
    h5py = pytest.importorskip("h5py")
    (root / "femnist").mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        with h5py.File(root / "femnist" / f"fed_emnist_{split}.h5", "w") as handle:
            group = handle.create_group(f"examples/{writer}")
            group["pixels"] = np.stack([image, np.ones((28, 28), np.float32)])  # float32 (N, 28, 28) in [0, 1]
            group["label"] = np.array([1, 10], np.int32)


def test_femnist_polarity_kept_and_equal_across_formats(tmp_path):
    image = glyph()
    write_leaf(tmp_path / "leaf", image)
    write_tff(tmp_path / "tff", image)
    leaf = load_dataset("femnist", tmp_path / "leaf", use_prepared=False)
    tff = load_dataset("femnist", tmp_path / "tff", use_prepared=False)
    assert leaf.info["format"] == "leaf" and tff.info["format"] == "tff"
    np.testing.assert_array_equal(leaf.train_x, tff.train_x)
    np.testing.assert_array_equal(leaf.test_x, tff.test_x)
    x = leaf.train_x[0, 0]
    assert x[0, 0] == 255 and x[10, 13] == 0 and x[10, 15] == 128  # background high, ink low: not inverted
    assert x.mean() > 200  # mostly background (FL-bench mean 0.9637)
    assert (leaf.train_x[1] == 255).all()  # a blank page stays white


# ---- Retinal fundus masks ----------------------------------------------------------------------------------


def test_masks_from_gray_thresholds():
    gray = np.array([0, 17, 50, 51, 112, 128, 144, 200, 201, 247, 254, 255], np.uint8).reshape(1, 1, 1, -1)
    disc, cup = masks_from_gray(gray)[0, :, 0]
    assert disc.tolist() == [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert cup.tolist() == [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert masks_from_gray(gray).dtype == np.uint8


def clean_mask(size: int) -> np.ndarray:
    """Disc (rim + cup) the central half, cup the central quarter, as a 0/128/255 gray mask."""
    mask = np.full((size, size), 255, np.uint8)
    mask[size // 4 : 3 * size // 4, size // 4 : 3 * size // 4] = 128
    mask[3 * size // 8 : 5 * size // 8, 3 * size // 8 : 5 * size // 8] = 0
    return mask


def write_site(root, masks: list[np.ndarray]) -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        base = root / "retinal" / "Fundus" / "Domain1" / split / "ROIs"
        for k, mask in enumerate(masks):
            fx.write_png(base / "image" / f"g{k:04d}.png", rng.integers(0, 256, (*mask.shape, 3), dtype=np.uint8))
            fx.write_png(base / "mask" / f"g{k:04d}.png", mask)


def test_retinal_masks_with_interpolated_borders(tmp_path):
    ringed = clean_mask(40)  # disc rows/cols 10..29, cup 15..24
    ringed[9, 10:30] = 247  # background next to the disc, ringing
    ringed[30, 10:30] = 254
    ringed[10, 10:30] = 144  # rim edge overshoot / undershoot
    ringed[29, 10:30] = 112
    ringed[15, 15:25] = 17  # cup edge
    # A clean mask downsampled 80 → 40 with Pillow's default filter for gray images (bicubic), as loaders that call
    # ``mask.resize(size)`` without a filter do; it holds values such as 8, 120, 144, 247.
    bicubic = np.asarray(Image.fromarray(clean_mask(80)).resize((40, 40), Image.Resampling.BICUBIC))
    assert len(np.unique(bicubic)) > 3
    write_site(tmp_path, [clean_mask(40), ringed, bicubic])
    arrays = load_dataset("retinal", tmp_path, image_size=40, use_prepared=False)
    assert arrays.train_y.shape == (3, 2, 40, 40) and set(np.unique(arrays.train_y)) == {0, 1}
    for disc, cup in arrays.train_y:
        assert disc.sum() == 400 and cup.sum() == 100  # 20×20 disc (cup included), 10×10 cup
        assert (cup <= disc).all()
    small = load_dataset("retinal", tmp_path, image_size=20, use_prepared=False)  # nearest resize of the masks
    assert [int(d.sum()) for d, _ in small.train_y] == [100] * 3
    assert [int(c.sum()) for _, c in small.train_y] == [25] * 3
