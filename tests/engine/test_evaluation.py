"""Evaluation (fedbench/engine/evaluation.py) against hand computations: accuracy and mean cross-entropy of a fixed
linear model, Dice of thresholded masks counted by hand, and the batching rules (any batch size gives the same
figures; segmentation batches are capped by pixels)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from conftest import F64_ATOL
from fedbench.algorithms.losses import soft_dice_loss
from fedbench.engine import scores
from fedbench.engine.evaluation import SEGMENTATION_EVAL_PIXELS, dice_scores, eval_batch_size, evaluate
from fedbench.models import build_model


def linear_model(weight: list[list[float]]) -> nn.Module:
    model = nn.Linear(len(weight[0]), len(weight), bias=False).double()
    with torch.no_grad():
        model.weight.copy_(torch.tensor(weight, dtype=torch.float64))
    return model


# Three samples, two features, three classes; logits = W x.
W = [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]
X = torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]], dtype=torch.float64)
Y = torch.tensor([0, 0, 2])


def hand_cross_entropy(logits: list[float], label: int) -> float:
    return math.log(sum(math.exp(z) for z in logits)) - logits[label]


def test_accuracy_and_mean_cross_entropy_by_hand():
    # logits: [2, 0, 1] (argmax 0, label 0: right), [0, 3, 1.5] (argmax 1, label 0: wrong), [1, 1, 1] (argmax 0 by
    # the first maximum, label 2: wrong)
    rows = [[2.0, 0.0, 1.0], [0.0, 3.0, 1.5], [1.0, 1.0, 1.0]]
    expected_loss = sum(hand_cross_entropy(r, int(y)) for r, y in zip(rows, Y, strict=True)) / 3
    for batch_size in (1, 2, 3, 1000):  # the batch split changes neither figure
        accuracy, loss = evaluate(linear_model(W), X, Y, batch_size=batch_size)
        assert accuracy == pytest.approx(1 / 3, abs=1e-15)
        assert loss == pytest.approx(expected_loss, rel=1e-12)
    accuracy, loss = evaluate(linear_model(W), X[:1], Y[:1])  # one sample: the means divide by one
    assert (accuracy, loss) == (1.0, pytest.approx(hand_cross_entropy(rows[0], 0), rel=1e-12))


def test_evaluation_restores_the_training_mode_and_changes_no_parameter():
    model = linear_model(W)
    before = model.weight.detach().clone()
    model.train()
    evaluate(model, X, Y)
    assert model.training
    model.eval()
    evaluate(model, X, Y)
    assert not model.training
    assert torch.equal(model.weight, before)


def test_evaluation_uses_inference_mode_behaviour_of_dropout():
    """The model is evaluated in eval mode (dropout off): a dropout layer with p close to 1 would otherwise zero
    nearly every logit and make the accuracy that of ties."""
    model = nn.Sequential(nn.Dropout(p=0.999), linear_model([[1.0, 0.0], [0.0, 1.0]]))
    x = torch.tensor([[5.0, 0.0], [0.0, 5.0]], dtype=torch.float64)
    y = torch.tensor([0, 1])
    accuracy, loss = evaluate(model, x, y)
    assert accuracy == 1.0
    assert loss == pytest.approx(hand_cross_entropy([5.0, 0.0], 0), rel=1e-12)


def test_an_empty_evaluation_set_gives_zeros_not_a_division_error():
    accuracy, loss = evaluate(linear_model(W), X[:0], Y[:0])
    assert (accuracy, loss) == (0.0, 0.0)
    masks = torch.zeros(0, 1, 256, 256)  # an empty segmentation split: its batch size comes from the shape
    assert eval_batch_size(1000, masks, "segmentation") == 64
    assert evaluate(nn.Identity(), masks, masks, task="segmentation") == (0.0, 0.0)


def test_dice_of_thresholded_masks_counted_by_hand():
    # One image, three channels of 2×2 pixels. Logits > 0 means sigmoid > 0.5 (predicted).
    logits = torch.tensor([[[[5.0, 5.0], [-5.0, -5.0]], [[-5.0, -5.0], [-5.0, -5.0]], [[5.0, -5.0], [-5.0, -5.0]]]])
    masks = torch.tensor([[[[1.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]]]])
    # channel 0: P = 2 pixels, T = 2, P∩T = 1 → 2·1/4; channel 1: both empty → 1; channel 2: disjoint → 0
    scores = dice_scores(logits, masks)
    assert scores.dtype == torch.float64
    assert scores.tolist() == [[0.5, 1.0, 0.0]]
    # one predicted pixel and an empty mask (|P| + |T| = 1): nothing overlaps, Dice 0 (only 0 + 0 gives 1)
    assert dice_scores(logits[:, 2:], torch.zeros_like(masks[:, 2:])).tolist() == [[0.0]]


def test_dice_thresholds_at_one_half_on_both_sides():
    # sigmoid(0) = 0.5 is not > 0.5: not predicted; a mask value of exactly 0.5 is not foreground either
    logits = torch.tensor([[[[0.0, 0.01]]]])
    masks = torch.tensor([[[[0.5, 0.6]]]])
    # P = {pixel 1}, T = {pixel 1}: Dice 1. Were 0 predicted or 0.5 foreground, it would be 2·1/3 or less.
    assert dice_scores(logits, masks).tolist() == [[1.0]]


def test_segmentation_evaluation_is_mean_dice_and_mean_soft_dice_loss_by_hand():
    class Constant(nn.Module):
        def __init__(self, logits: torch.Tensor):
            super().__init__()
            self.logits = logits

        def forward(self, x):  # x holds the image indices
            return self.logits[x[:, 0, 0, 0].long()]

    logits = torch.tensor(
        [[[[3.0, -3.0], [-3.0, -3.0]]], [[[3.0, 3.0], [-3.0, -3.0]]]], dtype=torch.float64
    )  # two images, one channel
    masks = torch.tensor([[[[1.0, 1.0], [0.0, 0.0]]], [[[1.0, 1.0], [0.0, 0.0]]]], dtype=torch.float64)
    x = torch.arange(2, dtype=torch.float64).view(2, 1, 1, 1).expand(2, 1, 2, 2).contiguous()
    # Dice: image 0 predicts 1 pixel of the 2 → 2·1/3; image 1 predicts both → 1
    expected_dice = (2 / 3 + 1.0) / 2

    def soft_dice(image: int) -> float:
        p = [1 / (1 + math.exp(-v)) for v in logits[image].flatten().tolist()]
        g = masks[image].flatten().tolist()
        return 1 - (2 * sum(a * b for a, b in zip(p, g, strict=True)) + 1) / (sum(p) + sum(g) + 1)

    for batch_size in (1, 2):
        dice, loss = evaluate(Constant(logits), x, masks, batch_size=batch_size, task="segmentation")
        assert dice == pytest.approx(expected_dice, rel=1e-12)
        assert loss == pytest.approx((soft_dice(0) + soft_dice(1)) / 2, rel=1e-12)


def test_evaluation_batches_cover_every_sample_once_at_the_asked_size():
    seen: list[int] = []
    model = linear_model(W)
    model.register_forward_hook(lambda module, inputs, output: seen.append(len(inputs[0])))
    x, y = X.repeat(500, 1), Y.repeat(500)  # 1,500 samples
    evaluate(model, x, y)
    assert seen == [1000, 500]  # the default batch: 1,000
    seen.clear()
    evaluate(model, x, y, batch_size=700)
    assert seen == [700, 700, 100]


def test_evaluation_records_no_autograd_graph():
    """Cheap evaluation: the forward passes run without autograd (no graph is kept for a backward that never
    comes)."""
    grad_enabled: list[bool] = []
    model = linear_model(W)
    model.register_forward_hook(lambda module, inputs, output: grad_enabled.append(torch.is_grad_enabled()))
    with torch.enable_grad():
        evaluate(model, X, Y)
    assert grad_enabled == [False]


def test_a_capped_segmentation_batch_evaluates():
    """Large images: the pixel cap (512 images of 64×128 here) is below the asked batch and is what runs."""
    seen: list[int] = []

    class Zero(nn.Module):
        def forward(self, x):
            seen.append(len(x))
            return torch.zeros_like(x)

    images = torch.zeros(3, 1, 64, 128)
    dice, _ = evaluate(Zero(), images, torch.zeros_like(images), batch_size=1000, task="segmentation")
    assert seen == [3] and dice == 1.0  # nothing predicted, nothing to find: Dice 1 per image
    seen.clear()
    images = torch.zeros(3, 1, 1024, 2048)  # 2 Mi pixels each: 2 images per batch
    evaluate(Zero(), images, torch.zeros_like(images), batch_size=1000, task="segmentation")
    assert seen == [2, 1]


def test_segmentation_batches_are_capped_by_pixels_and_classification_ones_are_not():
    image = torch.zeros(3, 1, 256, 256)
    capped = eval_batch_size(1000, image, "segmentation")
    assert capped == SEGMENTATION_EVAL_PIXELS // (256 * 256) == 64 and isinstance(capped, int)
    assert eval_batch_size(10, image, "segmentation") == 10  # below the cap: as asked
    huge = torch.zeros(1, 1, 4096, 2048)  # one image above the cap: still one per batch, never zero
    assert eval_batch_size(1000, huge, "segmentation") == 1
    assert eval_batch_size(1000, image, "classification") == 1000
    flat = torch.zeros(5, 7)  # a segmentation task's 2-D input has no pixels to cap, whatever the batch
    assert eval_batch_size(2 * SEGMENTATION_EVAL_PIXELS, flat, "segmentation") == 2 * SEGMENTATION_EVAL_PIXELS
    signals = torch.zeros(1, 1, 1 << 21)  # 1-D segmentation (N, C, L): L pixels per channel
    assert eval_batch_size(1000, signals, "segmentation") == 2


def random_masks(shape, seed=0) -> torch.Tensor:
    masks = torch.from_numpy(np.random.default_rng(seed).random(shape) < 0.3).float()
    masks[0, 1] = 0.0  # an empty channel (an image without cup)
    return masks


def test_evaluate_reports_dice_equal_to_the_metric_on_the_same_predictions():
    torch.manual_seed(0)
    # float64: evaluate's batches of 3 and the one batch of 7 below sum in other orders (conftest.F64_ATOL)
    model = build_model("unet", 2, (3, 16, 16), init_features=2).double().eval()
    x, y = torch.randn(7, 3, 16, 16).double(), random_masks((7, 2, 16, 16), seed=1).double()
    dice, loss = evaluate(model, x, y, batch_size=3, task="segmentation")  # three batches
    with torch.no_grad():
        logits = model(x)
    pred = (torch.sigmoid(logits) > 0.5).numpy()
    assert 0 < pred.mean() < 1, "a non-trivial prediction"
    assert dice == pytest.approx(scores.dice(pred, y.numpy() > 0), rel=1e-12)
    assert loss == pytest.approx(float(soft_dice_loss(logits, y).mean()), rel=0, abs=F64_ATOL)
    # a per-pixel output caps the evaluation batch (64 images of 256×256)
    assert eval_batch_size(1000, torch.empty(1, 3, 256, 256), "segmentation") == 64
    assert eval_batch_size(1000, torch.empty(1, 3, 256, 256)) == 1000
