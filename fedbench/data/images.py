"""Image helpers shared by loaders: batched resizing of uint8 arrays and reading image files."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedbench.errors import DataError


def resize_uint8(
    images: np.ndarray, size: int | tuple[int, int], mode: str = "bilinear", chunk: int = 4096
) -> np.ndarray:
    """(N, C, H, W) uint8 → (N, C, size, size) uint8. Bilinear with antialiasing matches torchvision's
    ``Resize`` on tensors; ``mode='nearest'`` is for segmentation masks."""
    # local: keeps torch out of datasets' start-up
    import torch

    height, width = (size, size) if isinstance(size, int) else size
    if images.shape[-2:] == (height, width):
        return images
    out = np.empty((len(images), images.shape[1], height, width), dtype=np.uint8)
    for start in range(0, len(images), chunk):
        batch = torch.from_numpy(np.array(images[start : start + chunk], dtype=np.float32))
        if mode == "nearest":
            resized = torch.nn.functional.interpolate(batch, size=(height, width), mode="nearest")
        else:
            resized = torch.nn.functional.interpolate(
                batch, size=(height, width), mode="bilinear", align_corners=False, antialias=True
            )
        out[start : start + chunk] = resized.round_().clamp_(0, 255).to(torch.uint8).numpy()
    return out


def to_nchw(images: np.ndarray, channels: int | None = None) -> np.ndarray:
    """(N, H, W) or (N, H, W, C) → (N, C, H, W); ``channels=3`` repeats a gray channel (Grayscale(3))."""
    if images.ndim == 3:
        images = images[:, None]
    elif images.ndim == 4 and images.shape[-1] in (1, 3, 4) and images.shape[1] not in (1, 3):
        images = images.transpose(0, 3, 1, 2)
    if images.shape[1] == 4:
        images = images[:, :3]
    if channels == 3 and images.shape[1] == 1:
        images = np.repeat(images, 3, axis=1)
    elif channels == 1 and images.shape[1] == 3:
        weights = np.array([0.299, 0.587, 0.114], dtype=np.float32)[None, :, None, None]
        images = np.round((images.astype(np.float32) * weights).sum(1, keepdims=True)).astype(np.uint8)
    return np.ascontiguousarray(images)


@dataclass(frozen=True)
class EncodedImage:
    """An image file's bytes held in memory (a Hugging Face ``datasets`` image cell); ``name`` names it in errors."""

    name: str
    data: bytes


def _label(source: Path | EncodedImage) -> str:
    return source.name if isinstance(source, EncodedImage) else str(source)


def read_images(
    paths: Sequence[Path | EncodedImage],
    size: int | tuple[int, int] | None,
    mode: str = "RGB",
    dataset: str = "",
    resample: str = "bilinear",
    remedy: str | None = None,
) -> np.ndarray:
    """Decode image files (or encoded images in memory) with Pillow into one (N, C, H, W) uint8 array, resizing each
    to ``size``. ``remedy``: what an error about an undecodable image tells the user to do (default: fetch the
    file from the dataset's download again)."""
    # local: compiling a recipe imports every loader, and only reading image files needs Pillow
    from PIL import Image

    channels = 1 if mode == "L" else 3
    if not paths:
        if size is None:
            raise DataError(f"dataset {dataset!r}: no images to read")
        height, width = (size, size) if isinstance(size, int) else size
        return np.empty((0, channels, height, width), dtype=np.uint8)
    method = Image.Resampling.NEAREST if resample == "nearest" else Image.Resampling.BILINEAR
    first_shape = None
    out: np.ndarray | None = None
    for i, path in enumerate(paths):
        try:
            with Image.open(io.BytesIO(path.data) if isinstance(path, EncodedImage) else path) as opened:
                image = opened.convert(mode)
                if size is not None:
                    target = (size, size) if isinstance(size, int) else (size[1], size[0])
                    if image.size != target:
                        image = image.resize(target, method)
                array = np.asarray(image, dtype=np.uint8)
        except FileNotFoundError:
            raise DataError(f"dataset {dataset!r}: missing image {path}") from None
        except OSError as error:
            remedy = remedy or (
                f"replace it with the file from the dataset's download (see `fedbench datasets info {dataset}`)"
            )
            raise DataError(f"dataset {dataset!r}: cannot decode image {_label(path)} ({error}); {remedy}") from None
        if array.ndim == 2:
            array = array[:, :, None]
        if out is None:
            first_shape = array.shape
            out = np.empty((len(paths), channels, array.shape[0], array.shape[1]), dtype=np.uint8)
        elif array.shape != first_shape:
            raise DataError(
                f"dataset {dataset!r}: image {_label(path)} has shape {array.shape}, expected {first_shape}; "
                "pass dataset_params.image_size to resize"
            )
        out[i] = array.transpose(2, 0, 1)
    assert out is not None
    return out
