"""The evaluation fast path of MaxPool2d returns exactly what PyTorch's kernel returns."""

import pytest
import torch
import torch.nn.functional as F

from fedbench.models.layers import MaxPool2d


@pytest.mark.parametrize("kernel, stride, shape", [
    (2, None, (3, 6, 28, 28)), (3, 2, (2, 4, 30, 30)), ((1, 2), 2, (2, 16, 1, 192)), (2, 2, (2, 3, 7, 9)), (3, 2, (1, 2, 14, 14)),
])
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
