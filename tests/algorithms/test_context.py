"""``fedbench.algorithms.context``: what a client's local training is handed. Mini-batches (every sample once per epoch,
step budgets, ``drop_last``), the optimizer a method steps (SGD with momentum / Nesterov / weight decay and Adam,
checked against their update rules written out by hand in float64), augmentation of images and of segmentation
masks, gradient clipping, the update a client sends back and the frozen spare models (the run state that builds a
context: tests/engine/test_state.py)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from algorithm_fixtures import (
    make_spec,
    random_masks,
    train,
)
from fedbench.algorithms.context import ClientContext, ServerState, SpareModels, load_weights, param_views
from fedbench.data.federated import prepare_data
from fedbench.data.store import TensorData
from fedbench.models import build_model
from fedbench.spec import RunSpec

D = torch.float64


def _spec(**overrides):
    return make_spec("fedavg", **overrides)


def _data(n: int = 10, task: str = "classification", fill=0.0) -> TensorData:
    """Sample i is the constant image i (1×2×2) with label i: a batch's labels name the samples it holds."""
    x = torch.arange(n, dtype=D)[:, None, None, None].expand(n, 1, 2, 2).clone()
    y = torch.arange(n)
    return TensorData(train_x=x, train_y=y, test_x=x, test_y=y, fill=fill, task=task)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([1.0, -2.0], dtype=D))
        self.b = nn.Parameter(torch.tensor([0.5], dtype=D))
        self.register_buffer("count", torch.tensor([3.0], dtype=D))


def _context(spec, data=None, indices=None, model=None, seed=7, lr=0.1, options=None, spares=None) -> ClientContext:
    data = _data() if data is None else data
    model = Tiny() if model is None else model
    indices = torch.arange(data.train_x.shape[0]) if indices is None else indices
    server = ServerState(
        params=nn.utils.parameters_to_vector(model.parameters()).detach().clone(),
        buffers={name: b.detach().clone() for name, b in model.named_buffers()},
    )
    return ClientContext(
        spec=spec,
        client_id=3,
        round_index=2,
        model=model,
        server=server,
        payload={},
        state={},
        data=data,
        indices=indices,
        generator=torch.Generator().manual_seed(seed),
        device=torch.device("cpu"),
        lr=lr,
        spare_models=spares,
        optimizer_options=options,
    )


@pytest.fixture(autouse=True)
def _bounded_permutations(monkeypatch):
    """Every test here needs far fewer than 50 permutations (one per epoch): a batch loop that never ends — never
    yielding, even — fails at the 50th instead of hanging the test."""
    draws, randperm = [0], torch.randperm

    def counted(*args, **kwargs):
        draws[0] += 1
        assert draws[0] < 50, "more permutations than any test asks for"
        return randperm(*args, **kwargs)

    monkeypatch.setattr(torch, "randperm", counted)


def _take(batches, limit: int = 40) -> list:
    """At most ``limit`` batches: a generator that never ends fails the test instead of hanging it."""
    taken = list(itertools.islice(batches, limit))
    assert len(taken) < limit, "more batches than any test asks for"
    return taken


def _labels(batches) -> list[list[int]]:
    out = []
    for x, y in _take(batches):
        assert torch.equal(x[:, 0, 0, 0].long(), y)  # each image travels with its own label
        out.append(y.tolist())
    return out


# ------------------------------------------------------------------------------------------------ batches
def test_one_epoch_visits_every_sample_once_in_ceil_n_over_b_batches():
    ctx = _context(_spec(batch_size=4))
    batches = _labels(ctx.batches())
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(sum(batches, [])) == list(range(10))
    assert ctx.steps_per_epoch() == ctx.planned_steps() == 3


def test_epochs_each_visit_every_sample_once_in_a_fresh_order():
    ctx = _context(_spec(batch_size=4, local_epochs=3))
    batches = _labels(ctx.batches())
    assert len(batches) == ctx.planned_steps() == 9
    orders = [sum(batches[3 * e : 3 * e + 3], []) for e in range(3)]
    assert all(sorted(order) == list(range(10)) for order in orders)
    assert len({tuple(order) for order in orders}) == 3  # a fresh permutation per epoch


def test_drop_last_drops_the_short_batch_but_a_client_smaller_than_a_batch_keeps_its_samples():
    ctx = _context(_spec(batch_size=4, drop_last=True, local_epochs=2))
    batches = _labels(ctx.batches())
    assert [len(b) for b in batches] == [4, 4, 4, 4] and ctx.planned_steps() == 4
    assert all(len(set(batches[2 * e] + batches[2 * e + 1])) == 8 for e in range(2))
    small = _context(_spec(batch_size=16, drop_last=True), indices=torch.tensor([2, 5, 7]))
    assert [sorted(b) for b in _labels(small.batches())] == [[2, 5, 7]]
    exact = _context(_spec(batch_size=5, drop_last=True))
    assert [len(b) for b in _labels(exact.batches())] == [5, 5]


def test_a_step_budget_cycles_through_fresh_permutations():
    ctx = _context(_spec(batch_size=4, local_steps=5, local_epochs=7))
    batches = _labels(ctx.batches())
    assert [len(b) for b in batches] == [4, 4, 2, 4, 4] and ctx.planned_steps() == 5
    assert sorted(sum(batches[:3], [])) == list(range(10))
    assert len(set(batches[3] + batches[4])) == 8


def test_explicit_epochs_and_steps_and_indices():
    ctx = _context(_spec(batch_size=4, local_epochs=5), indices=torch.tensor([1, 3, 5, 7, 9]))
    assert [len(b) for b in _labels(ctx.batches(epochs=2))] == [4, 1, 4, 1]
    assert len(_labels(ctx.batches(steps=3))) == 3
    assert len(_labels(ctx.batches(steps=1))) == 1
    chosen = _labels(ctx.batches(indices=torch.tensor([0, 2]), epochs=1))
    assert [sorted(b) for b in chosen] == [[0, 2]]
    assert sorted(sum(_labels(ctx.batches(epochs=1)), [])) == [1, 3, 5, 7, 9]  # ctx.indices by default
    drop = _context(_spec(batch_size=2, drop_last=True))
    assert [len(b) for b in _labels(drop.batches(epochs=1, indices=torch.tensor([0, 1, 2])))] == [2]


def test_a_client_without_samples_gets_no_batches():
    ctx = _context(_spec(batch_size=4, local_steps=3), indices=torch.tensor([], dtype=torch.long))
    assert ctx.num_samples == 0 and ctx.planned_steps() == 0
    assert _take(ctx.batches()) == [] and _take(ctx.batches(steps=2)) == [] and _take(ctx.batches(epochs=2)) == []


def test_the_batch_order_is_the_contexts_generator_stream():
    spec = _spec(batch_size=3)
    first = _labels(_context(spec, seed=1).batches())
    assert first == _labels(_context(spec, seed=1).batches())
    expected = torch.randperm(10, generator=torch.Generator().manual_seed(1))
    assert sum(first, []) == expected.tolist()
    assert first != _labels(_context(spec, seed=2).batches())


def test_a_fixed_batch_order_replays_the_stored_order_every_epoch_and_round():
    """``batch_order = "fixed"`` (Plato's DataLoader(shuffle=False) over a sampler re-created each round): every epoch
    goes through the client's samples in their stored order, whatever the round's random stream."""
    stored = torch.tensor([7, 2, 9, 0, 5, 3])
    spec = _spec(batch_size=4, local_epochs=2, batch_order="fixed")
    first = _labels(_context(spec, seed=1, indices=stored).batches())
    assert first == [[7, 2, 9, 0], [5, 3], [7, 2, 9, 0], [5, 3]]
    assert first == _labels(_context(spec, seed=2, indices=stored).batches())
    shuffled = _labels(_context(_spec(batch_size=4, local_epochs=2), seed=1, indices=stored).batches())
    assert sorted(sum(shuffled, [])) == sorted(sum(first, [])) and shuffled != first


# ------------------------------------------------------------------------------------------------ optimizers
def _two_steps(spec, grads, lr=0.1, options=None):
    model = Tiny()
    ctx = _context(spec, model=model, lr=lr, options=options)
    opt = ctx.make_optimizer(model.parameters())
    for g in grads:
        opt.zero_grad()
        model.w.grad = g.clone()
        model.b.grad = torch.zeros(1, dtype=D)
        opt.step()
    return model.w.detach()


def test_sgd_with_momentum_and_weight_decay_by_hand():
    g1, g2 = torch.tensor([1.0, 2.0], dtype=D), torch.tensor([-1.0, 0.5], dtype=D)
    spec = _spec(optimizer={"lr": 1.0, "momentum": 0.9, "weight_decay": 0.1})
    w0 = torch.tensor([1.0, -2.0], dtype=D)
    d1 = g1 + 0.1 * w0
    w1 = w0 - 0.2 * d1  # lr of the context (0.2), not the spec's
    d2 = g2 + 0.1 * w1
    w2 = w1 - 0.2 * (0.9 * d1 + d2)
    torch.testing.assert_close(_two_steps(spec, [g1, g2], lr=0.2), w2, rtol=0, atol=1e-15)


def test_sgd_nesterov_by_hand():
    g1, g2 = torch.tensor([1.0, 2.0], dtype=D), torch.tensor([-1.0, 0.5], dtype=D)
    spec = _spec(optimizer={"lr": 1.0, "momentum": 0.5, "nesterov": True})
    w0 = torch.tensor([1.0, -2.0], dtype=D)
    m1 = g1
    w1 = w0 - 0.1 * (g1 + 0.5 * m1)
    m2 = 0.5 * m1 + g2
    w2 = w1 - 0.1 * (g2 + 0.5 * m2)
    torch.testing.assert_close(_two_steps(spec, [g1, g2]), w2, rtol=0, atol=1e-15)


def test_adam_with_its_betas_and_weight_decay_by_hand():
    g1, g2 = torch.tensor([1.0, 2.0], dtype=D), torch.tensor([-1.0, 0.5], dtype=D)
    b1, b2, wd, lr, eps = 0.5, 0.75, 0.1, 0.1, 1e-8
    spec = _spec(optimizer={"name": "adam", "lr": 1.0, "betas": [b1, b2], "weight_decay": wd})
    w = torch.tensor([1.0, -2.0], dtype=D)
    m = v = torch.zeros(2, dtype=D)
    for t, g in enumerate([g1, g2], start=1):
        g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + eps)
    torch.testing.assert_close(_two_steps(spec, [g1, g2]), w, rtol=0, atol=1e-14)


def test_optimizer_options_reach_the_optimizer():
    g = torch.tensor([1.0, 2.0], dtype=D)
    up = _two_steps(_spec(), [g], options={"maximize": True})
    torch.testing.assert_close(up, torch.tensor([1.1, -1.8], dtype=D), rtol=0, atol=1e-15)
    up = _two_steps(_spec(optimizer={"name": "adam"}), [g], options={"maximize": True})
    assert bool((up > torch.tensor([1.0, -2.0], dtype=D)).all())


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_frozen_parameters_are_left_out_of_the_optimizer(name):
    model = Tiny()
    model.b.requires_grad_(False)
    ctx = _context(_spec(optimizer={"name": name, "weight_decay": 0.5}), model=model)
    opt = ctx.make_optimizer(model.parameters())
    assert [p for group in opt.param_groups for p in group["params"]] == [model.w]
    model.w.grad = torch.ones(2, dtype=D)
    model.b.grad = torch.ones(1, dtype=D)  # even with a gradient, a frozen parameter never moves
    opt.step()
    assert model.b.item() == 0.5 and not torch.equal(model.w.detach(), torch.tensor([1.0, -2.0], dtype=D))


# ------------------------------------------------------------------------------------------------ augmentation
def _images(n=64, channels=1, size=4):
    """Images whose columns differ (a flip shows) with values 1…size·size per channel, all > 0."""
    base = torch.arange(1, size * size + 1, dtype=D).reshape(1, 1, size, size)
    return base.expand(n, channels, size, size).clone() + torch.arange(channels, dtype=D)[None, :, None, None]


def test_no_augmentation_leaves_the_batch_as_is():
    ctx = _context(_spec())
    x = _images()
    assert torch.equal(ctx.augment(x), x)
    masks = (x > 8).to(torch.float32)
    out_x, out_m = ctx.augment_with_masks(x, masks)
    assert torch.equal(out_x, x) and torch.equal(out_m, masks)


def test_horizontal_flip_flips_some_images_and_keeps_others():
    ctx = _context(_spec(augmentation={"horizontal_flip": True}))
    x = _images()
    out = ctx.augment(x)
    flipped = [bool(torch.equal(o, i.flip(-1))) for o, i in zip(out, x)]
    kept = [bool(torch.equal(o, i)) for o, i in zip(out, x)]
    assert all(f != k for f, k in zip(flipped, kept)) and any(flipped) and any(kept)


def test_random_crop_pads_with_the_datas_fill_or_the_given_one():
    ctx = _context(_spec(augmentation={"crop_padding": 2}), data=_data(fill=-3.0))
    x = _images()
    out = ctx.augment(x)
    assert out.shape == x.shape and bool((out == -3.0).any()) and not torch.equal(out, x)
    assert set(out.unique().tolist()) <= set(x.unique().tolist()) | {-3.0}
    out = _context(_spec(augmentation={"crop_padding": 2}), data=_data(fill=-3.0)).augment(x, fill=-7.0)
    assert bool((out == -7.0).any()) and not bool((out == -3.0).any())


def test_affine_and_cutout_are_applied():
    x = _images()
    rotated = _context(_spec(augmentation={"affine": {"degrees": 90}})).augment(x.float())
    assert rotated.shape == x.shape and not torch.equal(rotated, x)
    cut = _context(_spec(augmentation={"cutout": 2})).augment(x)
    zeros = (cut == 0).sum(dim=(1, 2, 3))
    assert bool((zeros >= 1).all()) and bool((zeros <= 4).all())
    assert torch.equal(cut[cut != 0], x[cut != 0])
    two = _images(channels=2)
    cut = _context(_spec(augmentation={"cutout": 2})).augment(two, cutout_channels=1)
    assert torch.equal(cut[:, 1], two[:, 1]) and bool((cut[:, 0] == 0).any())


def test_masks_get_the_images_crop_and_flip_and_pad_with_background():
    x = _images(channels=2)
    masks = torch.stack([x[:, 0] > 8, x[:, 0] <= 3], dim=1).to(torch.float32)
    ctx = _context(_spec(augmentation={"crop_padding": 1, "horizontal_flip": True}), data=_data(fill=20.0))
    out_x, out_m = ctx.augment_with_masks(x, masks)
    assert out_m.dtype == torch.float32 and out_x.shape == x.shape and out_m.shape == masks.shape
    padded = out_x[:, 0] == 20.0
    assert bool(padded.any()) and bool((out_x[:, 1][padded] == 20.0).all())
    inside = ~padded
    assert torch.equal(out_m[:, 0][inside], (out_x[:, 0][inside] > 8).float())
    assert torch.equal(out_m[:, 1][inside], (out_x[:, 0][inside] <= 3).float())
    assert bool((out_m[:, 0][padded] == 0).all()) and bool((out_m[:, 1][padded] == 0).all())
    assert not torch.equal(out_x, x)


def test_masks_pad_with_background_under_a_per_channel_fill():
    x = _images(channels=2)
    masks = torch.ones(64, 1, 4, 4)
    fill = torch.tensor([-5.0, -6.0], dtype=D).reshape(1, 2, 1, 1)
    ctx = _context(_spec(augmentation={"crop_padding": 1}), data=_data(fill=fill))
    out_x, out_m = ctx.augment_with_masks(x, masks)
    padded = out_x[:, 0] == -5.0
    assert bool(padded.any()) and bool((out_x[:, 1][padded] == -6.0).all())
    assert torch.equal(out_m[:, 0], (~padded).float())


def test_masks_are_rebinarised_after_the_affine_and_keep_their_labels_under_cutout():
    x = _images().float()  # the affine's grid is float32
    masks = (x > 8).to(torch.float32)
    ctx = _context(_spec(augmentation={"affine": {"degrees": 30, "scale": [0.8, 1.2]}}))
    out_x, out_m = ctx.augment_with_masks(x, masks)
    assert set(out_m.unique().tolist()) == {0.0, 1.0} and out_m.dtype == torch.float32
    assert not torch.equal(out_m, masks) and not torch.equal(out_x, x)
    ones = torch.ones(64, 1, 4, 4, dtype=torch.long)
    out_x, out_m = _context(_spec(augmentation={"cutout": 2})).augment_with_masks(x, ones)
    assert torch.equal(out_m, ones) and out_m.dtype == torch.long and bool((out_x == 0).any())


def test_segmentation_batches_augment_images_and_masks_together():
    n = 8
    x = _images(n=n)
    masks = ((x - 1) % 4 == 0).to(torch.float32)  # the first column: a flip moves it
    data = TensorData(train_x=x, train_y=masks, test_x=x, test_y=masks, fill=0.0, task="segmentation")
    ctx = _context(_spec(batch_size=n, augmentation={"horizontal_flip": True}), data=data)
    ((bx, by),) = _take(ctx.batches())
    assert torch.equal(by, ((bx - 1) % 4 == 0).float())
    assert not torch.equal(bx, x) and not torch.equal(bx, x.flip(-1))  # some images flipped, some not
    plain = _context(_spec(batch_size=n, augmentation={"horizontal_flip": True}), data=_data(8))
    ((px, _),) = _take(plain.batches())
    assert px.shape == (8, 1, 2, 2)


def test_classification_batches_are_augmented():
    data = TensorData(train_x=_images(n=8), train_y=torch.arange(8), test_x=_images(8), test_y=torch.arange(8))
    ctx = _context(_spec(batch_size=8, augmentation={"cutout": 2}), data=data)
    ((bx, _),) = _take(ctx.batches())
    assert bool((bx == 0).any())


# ------------------------------------------------------------------------------------------------ steps and updates
def test_gradient_clipping_scales_to_the_norm_bound():
    model = Tiny()
    ctx = _context(_spec(clip_grad_norm=1.0), model=model)
    model.w.grad = torch.tensor([3.0, 0.0], dtype=D)
    model.b.grad = torch.tensor([4.0], dtype=D)
    ctx.clip_gradients()
    torch.testing.assert_close(model.w.grad, torch.tensor([0.6, 0.0], dtype=D), rtol=1e-6, atol=0)
    torch.testing.assert_close(model.b.grad, torch.tensor([0.8], dtype=D), rtol=1e-6, atol=0)
    plain = _context(_spec(), model=model)
    plain.clip_gradients()
    torch.testing.assert_close(model.b.grad, torch.tensor([0.8], dtype=D), rtol=1e-6, atol=0)


def test_the_update_carries_the_mean_loss_steps_and_a_copy_of_the_weights():
    model = Tiny()
    ctx = _context(_spec(), model=model, indices=torch.tensor([0, 4, 5]))
    assert ctx.make_update().train_loss == 0.0 and ctx.make_update().num_steps == 0
    for loss in (1.0, 2.0, 6.0):
        ctx.record_step(torch.tensor(loss, dtype=D, requires_grad=True))
    update = ctx.make_update()
    assert update.train_loss == 3.0 and update.num_steps == 3 and ctx.num_steps == 3
    assert update.client_id == 3 and update.num_samples == 3 and update.extra == {}
    update.extra["c"] = 1
    assert ctx.make_update().extra == {}  # a fresh upload dict per update
    assert ServerState(params=update.params, buffers={}).state == {}
    assert torch.equal(update.params, torch.tensor([1.0, -2.0, 0.5], dtype=D))
    assert update.buffers.keys() == {"count"} and torch.equal(update.buffers["count"], torch.tensor([3.0], dtype=D))
    with torch.no_grad():
        model.w.add_(1.0)
        model.count.add_(1.0)
    assert torch.equal(update.params, torch.tensor([1.0, -2.0, 0.5], dtype=D))  # a copy, not the live weights
    assert update.buffers["count"].item() == 3.0


# ------------------------------------------------------------------------------------------------ weights and spares
def test_load_weights_copies_and_param_views_view():
    model = Tiny()
    vector = torch.tensor([4.0, 5.0, 6.0], dtype=D)
    views = param_views(vector, model)
    assert [v.shape for v in views] == [(2,), (1,)] and views[1].item() == 6.0
    vector[2] = 9.0
    assert views[1].item() == 9.0  # views, no copies
    load_weights(model, vector, {"count": torch.tensor([8.0], dtype=D)})
    assert model.w.tolist() == [4.0, 5.0] and model.b.item() == 9.0 and model.count.item() == 8.0
    with torch.no_grad():
        model.w.add_(1.0)
    assert vector.tolist() == [4.0, 5.0, 9.0]  # the model holds a copy
    load_weights(model, torch.zeros(3, dtype=D))
    assert model.count.item() == 8.0  # buffers untouched without buffers


def test_spare_models_are_frozen_reused_per_slot_and_leave_the_template_alone():
    template = Tiny()
    spares = SpareModels(template)
    first = spares.load("global", torch.tensor([1.0, 2.0, 3.0], dtype=D), {"count": torch.tensor([7.0], dtype=D)})
    assert first is not template and not first.training
    assert all(not p.requires_grad for p in first.parameters())
    assert first.w.tolist() == [1.0, 2.0] and first.count.item() == 7.0
    assert template.w.tolist() == [1.0, -2.0] and template.count.item() == 3.0 and template.w.requires_grad
    again = spares.load("global", torch.tensor([4.0, 5.0, 6.0], dtype=D), None)
    assert again is first and first.w.tolist() == [4.0, 5.0] and again.count.item() == 7.0
    other = spares.load("previous", torch.zeros(3, dtype=D), None)
    assert other is not first and first.w.tolist() == [4.0, 5.0]


def test_global_model_is_the_rounds_weights_frozen():
    model = Tiny()
    ctx = _context(_spec(), model=model, spares=SpareModels(model))
    with torch.no_grad():
        model.w.add_(1.0)  # local training moves the working model, never the teacher
        model.count.add_(1.0)
    teacher = ctx.global_model()
    assert teacher.count.item() == 3.0  # the round's buffers too
    assert teacher is not model and teacher.w.tolist() == [1.0, -2.0] and not teacher.training
    assert [t.shape for t in ctx.global_tensors] == [(2,), (1,)]
    assert ctx.frozen_model("x", torch.ones(3, dtype=D)).b.item() == 1.0
    with pytest.raises(AssertionError, match="^engine created no spare models$"):
        _context(_spec()).global_model()


def test_param_views_walk_the_parameters_in_order():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    vector = torch.arange(1.0, 10.0)
    views = param_views(vector, model)
    assert [v.tolist() for v in views] == [[[1.0, 2.0], [3.0, 4.0]], [5.0, 6.0], [[7.0, 8.0]], [9.0]]


def test_one_step_reports_its_own_loss_and_a_half_mask_is_background():
    ctx = _context(_spec())
    ctx.record_step(torch.tensor(2.5, dtype=D))
    assert ctx.make_update().train_loss == 2.5
    x = _images(n=4)
    half = torch.full((4, 1, 4, 4), 0.5)  # midway between foreground and background, as bilinear resampling can give
    _, masks = _context(_spec(augmentation={"horizontal_flip": True})).augment_with_masks(x, half)
    assert torch.equal(masks, torch.zeros(4, 1, 4, 4))


@pytest.mark.usefixtures("linear_model")
def test_spare_frozen_models_are_shared_not_copied_per_client(tmp_path):
    """MOON and the teacher regularizers use two spare instances for the whole run (no deep copies per
    client): the previous-model slot and the global-model slot."""
    created = []
    original = SpareModels.load

    def counting(self, slot, params, buffers):
        if slot not in self.slots:
            created.append(slot)
        return original(self, slot, params, buffers)

    SpareModels.load = counting
    try:
        train(make_spec("moon", {"regularizers": [{"name": "kd", "weight": 0.1}]}, rounds=2), tmp_path)
    finally:
        SpareModels.load = original
    assert sorted(created) == ["global", "moon_previous"]


SEG = {
    "algorithm": "fedavg",
    "dataset": "retinal",
    "dataset_params": {"image_size": 16},
    "model": "unet",
    "model_params": {"init_features": 2},
    "partition": "natural",
    "num_clients": 6,
    "clients_per_round": 6,
    "rounds": 1,
    "synthetic": True,
}


def test_masks_become_float_targets_and_the_context_knows_the_task():
    data = prepare_data(RunSpec(**SEG, eval_mode="personal", client_test="natural"), torch.device("cpu"))
    assert data.tensors.task == "segmentation"
    assert data.tensors.train_y.dtype == torch.float32 and data.tensors.train_y.shape[1:] == (2, 16, 16)
    assert set(data.tensors.train_y.unique().tolist()) <= {0.0, 1.0}
    assert data.input_shape == (3, 16, 16)  # the synthetic stand-in honours dataset_params.image_size
    assert sum(len(p) for p in data.client_test) == len(data.tensors.test_y)  # natural: each site's test images
    assert data.client_test_from_test and data.client_test_data(2)[1].shape[1:] == (2, 16, 16)


def test_augmentation_moves_masks_with_their_images():
    spec = RunSpec(**{**SEG, "augmentation": {"crop_padding": 3, "horizontal_flip": True}})
    masks = random_masks((16, 2, 16, 16), seed=2)
    images = torch.cat([masks[:, :1], torch.rand(16, 2, 16, 16)], dim=1)  # image channel 0 = the disc mask
    data = TensorData(images, masks, images[:0], masks[:0], fill=0.0, task="segmentation")
    model = build_model("unet", 2, (3, 16, 16), init_features=2)
    server = ServerState(params=torch.nn.utils.parameters_to_vector(model.parameters()).detach(), buffers={})
    ctx = ClientContext(
        spec=spec,
        client_id=0,
        round_index=1,
        model=model,
        server=server,
        payload={},
        state={},
        data=data,
        indices=torch.arange(16),
        generator=torch.Generator().manual_seed(0),
        device=torch.device("cpu"),
        lr=0.1,
    )
    assert ctx.task == "segmentation"
    x, y = ctx.augment_with_masks(images, masks)
    assert not torch.equal(y, masks), "the batch was transformed"
    assert torch.equal(y[:, 0], x[:, 0]), "the mask went through the same crop and flip as its image"
    assert set(y.unique().tolist()) <= {0.0, 1.0}
    affine = RunSpec(**{**SEG, "augmentation": {"affine": {"degrees": 20, "scale": [0.9, 1.1]}}})
    ctx.spec = affine
    _, y = ctx.augment_with_masks(images, masks)
    assert set(y.unique().tolist()) <= {0.0, 1.0}, "re-binarised after bilinear resampling"
