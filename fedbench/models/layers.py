"""Layers shared by the model families."""

from __future__ import annotations

import torch
from torch import nn


class MaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d`` with a fast path for evaluation.

    PyTorch's CPU max-pool kernel for NCHW tensors with few channels is slow (half of a LeNet's test-set
    pass). Without autograd, and for the common case (no padding, dilation 1, floor mode), the pooled
    value is the elementwise maximum of k×k strided views of the input: the same numbers exactly
    (max is exact), at a fraction of the cost. Training keeps PyTorch's kernel and its gradient.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() or x.dim() != 4 or self.padding not in (0, (0, 0)) \
                or self.dilation not in (1, (1, 1)) or self.ceil_mode or self.return_indices:
            return super().forward(x)
        kh, kw = (self.kernel_size, self.kernel_size) if isinstance(self.kernel_size, int) else self.kernel_size
        stride = self.stride or self.kernel_size
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        height, width = x.shape[-2:]
        out_h, out_w = (height - kh) // sh + 1, (width - kw) // sw + 1
        if out_h < 1 or out_w < 1:
            return super().forward(x)
        result = None
        for a in range(kh):
            for b in range(kw):
                view = x[:, :, a: a + sh * (out_h - 1) + 1: sh, b: b + sw * (out_w - 1) + 1: sw]
                result = view if result is None else torch.maximum(result, view)
        return result.contiguous()


