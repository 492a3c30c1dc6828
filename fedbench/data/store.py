"""Device-resident tensors and batched transforms: the training hot path.

Images are normalised once into a float tensor on the training device; batches are drawn by
indexing it, and augmentation (random crop with padding, horizontal flip) runs on the whole batch.
No DataLoader, no per-sample Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedbench.data.base import DatasetArrays


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

    @classmethod
    def from_arrays(cls, arrays: DatasetArrays, device: torch.device) -> "TensorData":
        meta = arrays.meta
        return cls(
            train_x=to_tensor(arrays.train_x, meta.mean, meta.std, device),
            train_y=torch.from_numpy(arrays.train_y).long().to(device),
            test_x=to_tensor(arrays.test_x, meta.mean, meta.std, device),
            test_y=torch.from_numpy(arrays.test_y).long().to(device),
        )


def random_crop(x: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Zero-pad by ``padding`` and crop back to the original size at a random offset per sample."""
    batch, _, height, width = x.shape
    padded = torch.nn.functional.pad(x, (padding, padding, padding, padding))
    off_h = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=x.device)
    off_w = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=x.device)
    rows = (off_h[:, None] + torch.arange(height, device=x.device))[:, :, None]    # (B, H, 1)
    cols = (off_w[:, None] + torch.arange(width, device=x.device))[:, None, :]     # (B, 1, W)
    samples = torch.arange(batch, device=x.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[samples, rows, cols].permute(0, 3, 1, 2).contiguous()


def horizontal_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    flip = torch.rand(x.shape[0], generator=generator, device=x.device) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(-1), x)
