"""The task losses (``fedbench/algorithms/losses.py``): the soft Dice loss of segmentation."""

from __future__ import annotations

import pytest

from algorithm_fixtures import random_masks
from fedbench.algorithms.losses import soft_dice_loss, task_loss


def test_dice_loss_is_zero_for_a_perfect_prediction_and_near_one_for_the_opposite():
    masks = random_masks((3, 2, 8, 8))
    perfect = (2 * masks - 1) * 40.0  # logits ±40: sigmoid is 0/1 to float precision
    assert float(task_loss("segmentation", perfect, masks)) == pytest.approx(0.0, abs=1e-6)
    assert soft_dice_loss(perfect, masks).shape == (3, 2)
    opposite = soft_dice_loss(-perfect, masks)
    assert float(opposite[1:].min()) > 0.95  # no overlap: 1 − 1/(|T| + 1)
    assert float(opposite[0, 1]) > 0.98  # an empty mask predicted full costs ~1
