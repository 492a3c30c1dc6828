"""``fedbench/algorithms/partial.py``, the partial personalisation FedPer, FedRep, FedAlt and FedBN share: parameter
masks in the flat order, stored models are copies, a first participation starts from the server's head, and the
server averages the shared part only."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from conftest import F64_ATOL
from fedbench.algorithms.base import ClientUpdate
from fedbench.algorithms.context import ServerState, load_weights
from pfl_formula_fixtures import BNModel, flat, mask_of, mlp, own_head_state, setup


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("name", ["fedper", "fedrep", "fedalt"])
def test_first_participation_starts_from_the_servers_head_and_eval_uses_the_own_head(name):
    """A client without a local part starts from w^t whole (the server's head is w^0's, never averaged);
    evaluation puts the client's own head on the current global body."""
    model = mlp()
    algorithm, ctx, server, _, _, _ = setup(name, {}, {}, model=model)
    head = mask_of(model, model.head_parameter_names())
    w_t = server.params.clone()
    algorithm.begin_local(ctx)
    assert torch.equal(flat(model), w_t)
    assert torch.equal(flat(algorithm.eval_model(ctx)), w_t)
    ctx.state.update(own_head_state(model)[0])
    expected = w_t.clone()
    expected[head] = ctx.state["local_params"]
    load_weights(model, w_t)
    assert torch.equal(flat(algorithm.eval_model(ctx)), expected)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("name", ["fedper", "fedrep", "fedalt", "fedbn"])
def test_server_averages_the_shared_part_only(name):
    """Σ_k (n_k/Σn) w_k on the shared part; the local part (heads; FedBN: BN weights and all BN buffers) keeps the
    server's values."""
    torch.manual_seed(8)
    model = BNModel() if name == "fedbn" else mlp()
    algorithm, _, server, _, _, _ = setup(name, {}, model=model)
    local_names = model.batchnorm_parameter_names() if name == "fedbn" else model.head_parameter_names()
    local = mask_of(model, local_names)
    before = server.params.clone()
    old_buffers = {n: b.clone() for n, b in server.buffers.items()}
    sizes = (1, 3)
    updates = []
    for k, n in enumerate(sizes):
        buffers = {b: v + (k + 1) if v.is_floating_point() else v + 5 * (k + 1) for b, v in old_buffers.items()}
        updates.append(ClientUpdate(k, before + torch.randn(before.shape), buffers, n, 1, 0.0))
    algorithm.aggregate(server, updates, 1)
    average = 0.25 * updates[0].params + 0.75 * updates[1].params
    assert torch.allclose(server.params[~local], average[~local], rtol=0, atol=F64_ATOL)
    assert torch.equal(server.params[local], before[local])
    assert local.any() and (~local).any()
    for buffer, value in server.buffers.items():  # only FedBN's model has buffers: all of them BN's, kept
        assert torch.equal(value, old_buffers[buffer]), buffer
    if name == "fedbn":
        assert set(server.buffers) == set(old_buffers) and len(old_buffers) == 3


# ------------------------------------------------------------------------------------------- the shared plumbing
def test_partial_personalisation_masks_follow_the_flat_parameter_order():
    from fedbench.algorithms.partial import parameter_mask

    model = mlp()
    mask = parameter_mask(model, ["classifier.bias", "encoder.1.bias"])
    sizes = [p.numel() for p in model.parameters()]
    expected = torch.cat([torch.full((n,), i in (1, 3)) for i, n in enumerate(sizes)])
    assert mask.dtype == torch.bool and torch.equal(mask, expected)
    assert math.prod(mask.shape) == sum(sizes)


def test_stored_models_are_copies():
    from fedbench.algorithms.partial import restore_model, store_model

    ctx = ServerState(torch.zeros(1), {})  # anything with a ``state`` dict
    params, buffers = torch.arange(3.0), {"b": torch.ones(2)}
    store_model(ctx, "personal", params, buffers)
    params += 1
    buffers["b"] += 1
    assert torch.equal(ctx.state["personal_params"], torch.arange(3.0))
    assert torch.equal(ctx.state["personal_buffers"]["b"], torch.ones(2))
    model = nn.Linear(1, 1)
    assert restore_model(ctx, "other", model) is False
    ctx.state["m_params"], ctx.state["m_buffers"] = torch.tensor([2.0, 3.0]), {}
    assert restore_model(ctx, "m", model) is True
    assert float(model.weight.detach()) == 2.0 and float(model.bias.detach()) == 3.0


def test_a_model_under_another_classifier_shares_the_encoder_and_uses_the_new_head():
    from fedbench.algorithms.partial import WithClassifier

    model = mlp(0)
    head = nn.Linear(model.feature_dim, 3)
    combined = WithClassifier(model, head)
    assert combined.encoder is model.encoder and combined.classifier is head  # shared, not copied
    assert combined.feature_dim == model.feature_dim
    x = torch.randn(4, 6)
    with torch.no_grad():
        assert torch.equal(combined(x), head(model.features(x)))
