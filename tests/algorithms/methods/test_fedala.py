"""FedALA (Zhang et al., AAAI 2023): the adaptive local aggregation θ̂ = θ + (Θ − θ) ⊙ W on the higher layers, W's
clipped gradient steps (to convergence in the first round, one epoch later), then FedAvg's local steps, by hand in
float64; the personalised model evaluated."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from fedbench.algorithms.methods.fedala import higher_layer_names
from pfl_formula_fixtures import gd, loss_and_grad, mask_of, mlp, setup


def test_higher_layers_are_the_last_modules_holding_parameters():
    model = mlp()
    assert higher_layer_names(model, 1) == ["classifier.weight", "classifier.bias"]
    assert higher_layer_names(model, 2) == [n for n, _ in model.named_parameters()]
    assert higher_layer_names(model, 0) == []


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("first_round", [True, False])
def test_fedala_learns_w_then_trains_the_mixed_model_by_hand(first_round):
    """s = 100 % and full batches, so each W epoch is one step W ← clip(W − η ∇_θ̂L ⊙ (Θ − θ), 0, 1). First round
    (no W yet): W = 1, epochs until the std of the last 2 epoch losses is below a huge threshold, i.e. 3; later: one
    epoch from the stored W. Lower layers come from Θ. Then one epoch of GD from θ̂; θ and W are stored."""
    lr, eta = 0.3, 5.0
    params = {"rand_percent": 100.0, "layer_idx": 1, "eta": eta, "threshold": 1e9, "loss_window": 2}
    theta = torch.randn(59, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    state = {"local_params": theta.clone(), "local_buffers": {}}
    stored = torch.rand(24, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    if not first_round:
        state["ala_weights"] = stored.clone()
    algorithm, ctx, server, _, x, y = setup("fedala", params, state, lr=lr, local_epochs=1)
    glob = server.params.clone()
    high = mask_of(ctx.model, ["classifier.weight", "classifier.bias"])
    weights = torch.ones(24, dtype=torch.float64) if first_round else stored

    def mixed(w):
        result = glob.clone()
        result[high] = theta[high] + (glob - theta)[high] * w
        return result

    for _ in range(3 if first_round else 1):
        grad = loss_and_grad(ctx.model, mixed(weights), x, y)[1]
        weights = (weights - eta * grad[high] * (glob - theta)[high]).clamp(0, 1)
    assert 0 < int(((weights > 0) & (weights < 1)).sum()) < 24  # the clip bites on some entries, not all
    update = algorithm.local_train(ctx)
    assert torch.allclose(state["ala_weights"], weights, rtol=0, atol=F64_ATOL)
    assert torch.allclose(update.params, gd(ctx.model, mixed(weights), x, y, lr, 1), rtol=0, atol=F64_ATOL)
    assert torch.equal(state["local_params"], update.params)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedala_first_participation_and_no_higher_layer_train_from_the_global_model():
    """No θ yet, or p = 0: θ̂ = Θ, no W is learned (FedAvg's local steps)."""
    theta = torch.randn(59, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    for params, state in (({}, {}), ({"layer_idx": 0}, {"local_params": theta, "local_buffers": {}})):
        algorithm, ctx, server, _, x, y = setup("fedala", params, dict(state), local_epochs=1)
        update = algorithm.local_train(ctx)
        assert "ala_weights" not in ctx.state
        assert torch.allclose(update.params, gd(ctx.model, server.params, x, y, 0.3, 1), rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedala_evaluates_the_adaptive_mix_of_its_model_and_the_global_one():
    algorithm, ctx, server, _, x, _ = setup("fedala", {})
    theta = torch.randn(59, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    weights = torch.rand(24, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    assert torch.equal(torch.nn.utils.parameters_to_vector(algorithm.eval_model(ctx).parameters()), server.params)
    ctx.state.update(local_params=theta, local_buffers={}, ala_weights=weights)
    got = torch.nn.utils.parameters_to_vector(algorithm.eval_model(ctx).parameters())
    high = mask_of(ctx.model, ["classifier.weight", "classifier.bias"])
    expected = server.params.clone()
    expected[high] = theta[high] + (server.params - theta)[high] * weights
    assert torch.allclose(got, expected, rtol=0, atol=F64_ATOL)


def recording_batches(ctx):
    """Record the sample each W epoch is drawn from (the ALA passes ask for ``indices``; local training does not)."""
    drawn = []
    batches = ctx.batches

    def recorded(indices=None, **kwargs):
        if indices is not None:
            drawn.append(indices.clone())
        return batches(indices=indices, **kwargs)

    ctx.batches = recorded
    return drawn


def later_round(params, **overrides):
    theta = torch.randn(59, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    return setup("fedala", params, {"local_params": theta, "local_buffers": {}}, local_epochs=1, **overrides)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    ("eta", "threshold", "epochs"),
    [
        (1e-12, 1e-9, 3),  # W barely moves: the last 2 losses' std is below 1e-9 as soon as there are 3
        (5.0, 1e-12, 6),  # W learns: the std never falls below 1e-12, so the cap of 6 first-round epochs
        (1e-300, 0.0, 6),  # a constant loss has std 0, which is not below a threshold of 0
    ],
)
def test_the_first_round_trains_w_until_the_last_losses_settle_or_the_cap(eta, threshold, epochs):
    """Stop once more than ``loss_window`` epochs are done and the std of the last ``loss_window`` losses is below
    the threshold; otherwise after ``max_first_epochs``."""
    params = {"rand_percent": 100.0, "eta": eta, "threshold": threshold, "loss_window": 2, "max_first_epochs": 6}
    algorithm, ctx, *_ = later_round(params)
    drawn = recording_batches(ctx)
    algorithm.local_train(ctx)
    assert len(drawn) == epochs


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(("percent", "size"), [(50.0, 4), (10.0, 1), (100.0, 8)])
def test_w_trains_on_s_percent_of_the_client_s_samples_at_least_one(percent, size):
    algorithm, ctx, *_ = later_round({"rand_percent": percent, "max_first_epochs": 1})
    drawn = recording_batches(ctx)
    algorithm.local_train(ctx)
    assert [len(sample) for sample in drawn] == [size]  # of its 8 samples
    assert len(set(drawn[0].tolist())) == size and set(drawn[0].tolist()) <= set(range(8))


@pytest.mark.usefixtures("head_mlp", "float64")
def test_a_client_with_one_sample_still_learns_w():
    from algorithm_fixtures import client_context

    algorithm, ctx, server, *_ = later_round({"max_first_epochs": 1})
    one = client_context(algorithm, ctx.spec, ctx.model, server, ctx.data, torch.arange(1), ctx.state)
    algorithm.local_train(one)
    assert "ala_weights" in one.state
