"""Layers shared by the model families: drop-in replacements for ``nn.MaxPool2d`` and ``nn.Conv2d`` that
compute the same numbers faster on the CPU for the small shapes of the MNIST-family models.

Why: FedTrip's Table IV trains and evaluates a 3-conv LeNet-5 every round on the CPU. Profiling a round
showed PyTorch's NCHW max-pool kernel taking half of the test-set pass, and mkldnn running the last
5×5 convolution (its kernel covers its whole 5×5 input: a linear layer) at a fraction of the speed of
a matrix product. ``benchmarks/evaluation_cost.py`` measures both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _pair(value) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


class MaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d`` with a CPU fast path for the common case (no padding, dilation 1, floor mode).

    Without autograd the pooled value is the elementwise maximum of strided views of the input:
    the same numbers exactly (max is exact), at a fraction of the cost. Training keeps PyTorch's kernel
    and its gradient (an index-tracking version of the strided maximum measured slower than it).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (
            torch.is_grad_enabled()
            or x.is_cuda
            or x.dim() != 4
            or self.padding not in (0, (0, 0))
            or self.dilation not in (1, (1, 1))
            or self.ceil_mode
            or self.return_indices
        ):
            return super().forward(x)
        (kh, kw), (sh, sw) = _pair(self.kernel_size), _pair(self.stride or self.kernel_size)
        height, width = x.shape[-2:]
        out_h, out_w = (height - kh) // sh + 1, (width - kw) // sw + 1
        if out_h < 1 or out_w < 1:
            return super().forward(x)
        rows = None  # the maximum over the kh rows of each window first (views of whole rows), then kw columns
        for a in range(kh):
            view = x[:, :, a : a + sh * (out_h - 1) + 1 : sh, :]
            rows = view if rows is None else torch.maximum(rows, view)
        assert rows is not None  # the kernel has at least one row
        result = None
        for b in range(kw):
            view = rows[..., b : b + sw * (out_w - 1) + 1 : sw]
            result = view if result is None else torch.maximum(result, view)
        assert result is not None  # and at least one column
        return result.contiguous()


class _SmallConv2d(torch.autograd.Function):
    """A stride-1 convolution whose weight gradient is computed as the convolution it is: the input,
    batch as channels, correlated with the output gradient, Σ_n Σ_p g[n, o, p] · x[n, c, p + (i, j)].
    For the few-channel 5×5 layers of LeNet-5 this runs 2–4× faster on the CPU than mkldnn's own
    weight-gradient kernel (``benchmarks/evaluation_cost.py``). Forward and input gradient are PyTorch's.
    The sums are the same up to floating-point rounding order, and as deterministic."""

    @staticmethod
    def forward(ctx, x, weight, bias, padding):
        ctx.save_for_backward(x, weight)
        ctx.padding, ctx.has_bias = padding, bias is not None
        return F.conv2d(x, weight, bias, padding=padding)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = torch.ops.aten.convolution_backward(
                grad_output, x, weight, None, [1, 1], list(ctx.padding), [1, 1], False, [0, 0], 1, [True, False, False]
            )[0]
        if ctx.needs_input_grad[1]:
            grad_weight = F.conv2d(x.transpose(0, 1), grad_output.transpose(0, 1), padding=ctx.padding).transpose(0, 1)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum((0, 2, 3))
        return grad_input, grad_weight, grad_bias, None


def _functorch_wrapped(tensor: torch.Tensor) -> bool:
    """True inside ``torch.func`` transforms (the packed training path's vmap/grad), which ``_SmallConv2d`` (an
    ``autograd.Function`` without a vmap rule) cannot run under; PyTorch's convolution can."""
    return torch._C._functorch.is_functorch_wrapped_tensor(tensor)


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` for small CPU convolutions (same parameters and state dict):

    - a kernel that covers its whole unpadded input (LeNet-5's C5: 5×5 on a 5×5 map) is the linear
      layer it is, and runs as one matrix product;
    - a stride-1, ungrouped convolution on the CPU computes its weight gradient with ``_SmallConv2d``.

    Anything else, and every CUDA tensor, takes ``nn.Conv2d``'s path. Results equal PyTorch's up to
    floating-point rounding order (``tests/models/test_layers.py``).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        plain = (
            x.dim() == 4
            and self.groups == 1
            and self.dilation in (1, (1, 1))
            and self.stride in (1, (1, 1))
            and self.padding_mode == "zeros"
            and not isinstance(self.padding, str)
        )
        if not plain or x.is_cuda or _functorch_wrapped(self.weight):
            return super().forward(x)
        padding = _pair(self.padding)
        if tuple(x.shape[-2:]) == tuple(self.kernel_size) and padding == (0, 0):
            return F.linear(x.flatten(1), self.weight.flatten(1), self.bias)[:, :, None, None]
        if torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad):
            return _SmallConv2d.apply(x, self.weight, self.bias, padding)
        return super().forward(x)
