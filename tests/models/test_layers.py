"""fedbench's fast layers compute what PyTorch's do: MaxPool2d's evaluation path exactly, Conv2d's
matrix-product and weight-gradient paths up to rounding, and LeNet-5 with pooling before the ReLU the
same function and gradients as the paper's order.

Paths that sum in another order are compared in float64 with ``assert_close``'s float64 tolerances (1e-7):
the worst-case rounding of a float64 sum of n products, n·2⁻⁵³·Σ|products|, is below 3e-9 for the ≤ 5,500-term
sums here, while a wrong index or padding is off by O(1). (In float32 that bound is about 1: a float32
tolerance could only be tuned to one CPU's kernels.)"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedbench.models import build_model
from fedbench.models.layers import Conv2d, MaxPool2d


@pytest.mark.parametrize(
    "kernel, stride, shape",
    [
        (2, None, (3, 6, 28, 28)),
        (3, 2, (2, 4, 30, 30)),
        ((1, 2), 2, (2, 16, 1, 192)),
        (2, 2, (2, 3, 7, 9)),
        (3, 2, (1, 2, 14, 14)),
    ],
)
def test_fast_path_equals_max_pool(kernel, stride, shape):
    x = torch.randn(*shape)
    pool = MaxPool2d(kernel, stride)
    with torch.inference_mode():
        fast = pool(x)
    assert torch.equal(fast, F.max_pool2d(x, kernel, stride))


def test_training_uses_pytorchs_kernel_and_gradient():
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    MaxPool2d(2)(x).sum().backward()
    reference = x.detach().clone().requires_grad_()
    F.max_pool2d(reference, 2).sum().backward()
    assert torch.equal(x.grad, reference.grad)


@pytest.mark.parametrize(
    "in_ch, out_ch, kernel, padding, size, bias, input_grad",
    [
        (1, 6, 5, 2, (28, 28), True, False),  # LeNet C1: input is data, weight gradient only
        (6, 16, 5, 0, (14, 14), True, True),  # C3
        (16, 120, 5, 0, (5, 5), True, True),  # C5: kernel covers the input, a matrix product
        (3, 4, (3, 5), (1, 2), (9, 10), False, True),
    ],
)
@pytest.mark.usefixtures("float64")
def test_conv2d_matches_pytorch_values_and_gradients(in_ch, out_ch, kernel, padding, size, bias, input_grad):
    torch.manual_seed(0)
    conv = Conv2d(in_ch, out_ch, kernel, padding=padding, bias=bias)
    x = torch.randn(7, in_ch, *size, requires_grad=input_grad)
    wrt = [conv.weight] + ([conv.bias] if bias else []) + ([x] if input_grad else [])
    ours, theirs = conv(x), F.conv2d(x, conv.weight, conv.bias, padding=padding)
    torch.testing.assert_close(ours, theirs)
    grad = torch.randn_like(theirs)
    for mine, reference in zip(torch.autograd.grad(ours, wrt, grad), torch.autograd.grad(theirs, wrt, grad)):
        # weight gradients are sums of ~5,000 products of magnitude ~1, in another order
        torch.testing.assert_close(mine, reference)
    with torch.inference_mode():
        torch.testing.assert_close(conv(x), theirs.detach())


def test_conv2d_other_configurations_are_pytorchs():
    conv = Conv2d(3, 4, 3, stride=2, padding=1)
    x = torch.randn(2, 3, 9, 9)
    assert torch.equal(conv(x), F.conv2d(x, conv.weight, conv.bias, stride=2, padding=1))


@pytest.mark.usefixtures("float64")
def test_lenet_pooling_before_relu_is_the_papers_network():
    """fedtrip_cnn pools before its ReLUs; with the same weights, logits and every gradient must equal
    those of the paper's Conv-ReLU-Pool order built from plain PyTorch layers (max and ReLU commute, and a
    window whose maximum is ≤ 0 passes no gradient either way; fedtrip_cnn's fast Conv2d sums in another
    order, hence float64)."""
    torch.manual_seed(0)
    model = build_model("fedtrip_cnn", 10, (1, 28, 28))
    reference = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 120, 5),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )
    ours = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    theirs = [m for m in reference.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    for mine, paper in zip(ours, theirs, strict=True):
        paper.load_state_dict(mine.state_dict())
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    torch.testing.assert_close(model(x), reference(x))
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(reference(x), y).backward()
    for mine, paper in zip(ours, theirs):
        torch.testing.assert_close(mine.weight.grad, paper.weight.grad)
