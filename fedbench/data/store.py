"""Device-resident tensors and batched transforms: the training hot path.

Images are normalised once into a float tensor on the training device; batches are drawn by
indexing it, and augmentation (random crop with padding, horizontal flip, random affine, Cutout) runs on
the whole batch. No DataLoader, no per-sample Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedbench.data.base import DatasetArrays
from fedbench.errors import ConfigError


def to_tensor(x: np.ndarray, mean: tuple[float, ...], std: tuple[float, ...], device: torch.device) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(x)).to(device)
    t = t.float().div_(255.0) if x.dtype == np.uint8 else t.float()
    if mean and len(mean) == t.shape[1]:
        shape = (1, -1) + (1,) * (t.dim() - 2)
        t = (t - torch.tensor(mean, device=device).view(shape)) / torch.tensor(std, device=device).view(shape)
    return t.contiguous()


@dataclass
class TensorData:
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    fill: torch.Tensor | float = 0.0  # a black pixel after normalisation: what torchvision pads with
    task: str = "classification"  # DatasetMeta.task; "segmentation": labels are float {0, 1} masks (N, C, H, W)

    @classmethod
    def from_arrays(cls, arrays: DatasetArrays, device: torch.device) -> TensorData:
        meta = arrays.meta
        fill: torch.Tensor | float = 0.0
        if arrays.train_x.dtype == np.uint8 and meta.mean and len(meta.mean) == arrays.train_x.shape[1]:
            fill = to_tensor(np.zeros((1, *arrays.train_x.shape[1:2], 1, 1), np.uint8), meta.mean, meta.std, device)
        # class labels → int64 for cross-entropy; segmentation masks → float {0, 1} targets for the Dice loss
        label_type = torch.float32 if meta.task == "segmentation" else torch.long
        return cls(
            train_x=to_tensor(arrays.train_x, meta.mean, meta.std, device),
            train_y=torch.from_numpy(arrays.train_y).to(device, label_type),
            test_x=to_tensor(arrays.test_x, meta.mean, meta.std, device),
            test_y=torch.from_numpy(arrays.test_y).to(device, label_type),
            fill=fill,
            task=meta.task,
        )


def random_crop(
    x: torch.Tensor, padding: int, generator: torch.Generator, fill: torch.Tensor | float = 0.0
) -> torch.Tensor:
    """Pad by ``padding`` with ``fill`` (black) and crop back to the original size at a random offset per sample."""
    batch, _, height, width = x.shape
    padded = torch.nn.functional.pad(x - fill, (padding, padding, padding, padding)) + fill
    off_h = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=x.device)
    off_w = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=x.device)
    rows = (off_h[:, None] + torch.arange(height, device=x.device))[:, :, None]  # (B, H, 1)
    cols = (off_w[:, None] + torch.arange(width, device=x.device))[:, None, :]  # (B, 1, W)
    samples = torch.arange(batch, device=x.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[samples, rows, cols].permute(0, 3, 1, 2).contiguous()


def horizontal_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    flip = torch.rand(x.shape[0], generator=generator, device=x.device) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


def random_affine(
    x: torch.Tensor,
    degrees: float,
    translate: tuple[float, float],
    scale: tuple[float, float],
    generator: torch.Generator,
    fill: torch.Tensor | float = 0.0,
) -> torch.Tensor:
    """Per-sample rotation (±degrees), translation (± fraction of the size) and scaling, zero fill,
    bilinear sampling — torchvision's RandomAffine applied to a whole batch in one grid_sample."""
    batch = x.shape[0]
    device = x.device

    def uniform(low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(batch, generator=generator, device=device)

    angle = torch.deg2rad(uniform(-degrees, degrees))
    zoom = uniform(*scale)
    shift_x, shift_y = uniform(-translate[0], translate[0]) * 2, uniform(-translate[1], translate[1]) * 2
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    # affine_grid maps output to input coordinates: the inverse of rotate-then-scale, then shift
    theta = torch.stack([torch.stack([cos, sin, -shift_x], 1), torch.stack([-sin, cos, -shift_y], 1)], 1)
    grid = torch.nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
    return (
        torch.nn.functional.grid_sample(x - fill, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        + fill
    )


def cutout(x: torch.Tensor, size: int, generator: torch.Generator, channels: int | None = None) -> torch.Tensor:
    """Cutout (DeVries & Taylor 2017), batched: one ``size`` × ``size`` square per image set to 0 (the dataset
    mean, since images are already normalised), its centre drawn uniformly over the image (rows, then columns,
    one draw per sample from ``generator``) and the square clipped at the border. The square covers rows
    [cy - size//2, cy - size//2 + size), as the reference code for even sizes. ``channels``: zero only the
    first that many channels (segmentation: the image, not the masks concatenated after it)."""
    batch, num_channels, height, width = x.shape
    if size > min(height, width):  # caught when the recipe is compiled; this guards loaders that resize otherwise
        raise ConfigError(f"augmentation.cutout = {size} is larger than the {height}×{width} training images")
    device = x.device
    centre_y = torch.randint(0, height, (batch,), generator=generator, device=device)
    centre_x = torch.randint(0, width, (batch,), generator=generator, device=device)
    top, left = (centre_y - size // 2)[:, None], (centre_x - size // 2)[:, None]
    rows, cols = torch.arange(height, device=device)[None], torch.arange(width, device=device)[None]
    inside_rows = (rows >= top) & (rows < top + size)  # (B, H)
    inside_cols = (cols >= left) & (cols < left + size)  # (B, W)
    hole = (inside_rows[:, :, None] & inside_cols[:, None, :])[:, None]  # (B, 1, H, W)
    if channels is not None and channels < num_channels:
        hole = hole & (torch.arange(num_channels, device=device) < channels)[None, :, None, None]
    return x.masked_fill(hole, 0.0)
