"""Image helpers shared by the loaders (``fedbench/data/images.py``): batched uint8 resizing (bilinear as
torchvision's ``Resize``, nearest for masks), layouts to (N, C, H, W) with channel conversion, and reading image
files or encoded bytes, with one-line errors naming the image."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from fedbench.data.images import EncodedImage, read_images, resize_uint8, to_nchw
from fedbench.errors import DataError


def test_resize_is_torchvisions_antialiased_bilinear_and_keeps_the_right_size_untouched():
    from torchvision.transforms.v2 import functional as TF

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 3, 20, 30), dtype=np.uint8)
    out = resize_uint8(images, 10, chunk=2)  # chunks of 2: the last one shorter
    assert out.shape == (5, 3, 10, 10) and out.dtype == np.uint8
    reference = TF.resize(torch.from_numpy(images), [10, 10], antialias=True).numpy()
    assert np.abs(out.astype(int) - reference.astype(int)).max() <= 1  # the same up to rounding
    assert resize_uint8(images, (20, 30)) is images
    assert resize_uint8(images, (40, 15)).shape == (5, 3, 40, 15)


def test_nearest_resizing_keeps_mask_labels():
    mask = np.zeros((1, 1, 4, 4), dtype=np.uint8)
    mask[..., :2, :] = 2
    out = resize_uint8(mask, 8, mode="nearest")
    assert set(np.unique(out)) == {0, 2} and (out[..., :4, :] == 2).all() and (out[..., 4:, :] == 0).all()


def test_layouts_become_nchw_and_channels_convert():
    gray = np.arange(2 * 4 * 5, dtype=np.uint8).reshape(2, 4, 5)
    assert to_nchw(gray).shape == (2, 1, 4, 5)
    rgba = np.zeros((2, 4, 5, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    assert to_nchw(rgba).shape == (2, 3, 4, 5) and to_nchw(rgba).max() == 0  # alpha dropped
    three = to_nchw(gray, channels=3)
    assert three.shape == (2, 3, 4, 5) and all(np.array_equal(three[:, c], gray) for c in range(3))
    rgb = np.zeros((1, 3, 1, 2), dtype=np.uint8)
    rgb[0, :, 0, 0] = (100, 200, 50)
    one = to_nchw(rgb, channels=1)
    assert one.shape == (1, 1, 1, 2) and one[0, 0, 0, 0] == round(0.299 * 100 + 0.587 * 200 + 0.114 * 50)
    assert to_nchw(rgb).flags["C_CONTIGUOUS"]


def png(path_or_none, size=(6, 4), color=(10, 20, 30), mode="RGB"):
    image = Image.new(mode, size, color)
    if path_or_none is None:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()
    image.save(path_or_none)
    return path_or_none


def test_read_images_decodes_files_and_bytes_resizing_each(tmp_path):
    files = [png(tmp_path / "a.png"), png(tmp_path / "b.png", size=(12, 8), color=(1, 2, 3))]
    out = read_images(files, (6, 4))  # (height, width)
    assert out.shape == (2, 3, 6, 4) and out.dtype == np.uint8
    assert (out[0, :, 0, 0] == (10, 20, 30)).all() and (out[1, :, 0, 0] == (1, 2, 3)).all()
    gray = read_images([EncodedImage("cell 0", png(None, color=128, mode="L"))], None, mode="L")
    assert gray.shape == (1, 1, 4, 6) and (gray == 128).all()
    assert read_images([], 5).shape == (0, 3, 5, 5)


def test_read_images_errors_name_the_image_and_say_what_to_do(tmp_path):
    with pytest.raises(DataError, match="no images to read"):
        read_images([], None, dataset="d")
    with pytest.raises(DataError, match=r"missing image .*gone.png"):
        read_images([tmp_path / "gone.png"], 4, dataset="d")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    with pytest.raises(DataError, match=r"cannot decode image .*broken.png .*fedbench datasets info d"):
        read_images([broken], 4, dataset="d")
    with pytest.raises(DataError, match=r"cannot decode image cell 1 .*; fetch it again$"):
        read_images([EncodedImage("cell 1", b"xx")], 4, dataset="d", remedy="fetch it again")
    mixed = [png(tmp_path / "a.png"), png(tmp_path / "b.png", size=(5, 5))]
    with pytest.raises(DataError, match=r"image .*b.png has shape \(5, 5, 3\), expected \(4, 6, 3\); .*image_size"):
        read_images(mixed, None, dataset="d")
