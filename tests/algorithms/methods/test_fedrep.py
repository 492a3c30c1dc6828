"""FedRep (Collins et al., ICML 2021): the head phase, then the body phase, each training only its part; the body is
shared and the heads stay distinct."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from fedbench.algorithms.context import load_weights
from personal_run_fixtures import flat_mask, initial_weights, train
from pfl_formula_fixtures import gd, mask_of, mlp, own_head_state, setup


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "params, schedule, head_steps, body_steps",
    [
        ({}, {"local_epochs": 2}, 2, 1),  # head for the run's E epochs, then the body for 1
        ({"head_epochs": 3, "body_epochs": 2}, {"local_epochs": 1}, 3, 2),
        ({"head_epochs": 0, "body_epochs": 2}, {"local_epochs": 2}, 0, 2),
        ({}, {"local_steps": 2, "local_epochs": 3}, 2, 2),  # a step budget: each phase "epoch" is local_steps
        ({"head_epochs": 2, "body_epochs": 3}, {"local_steps": 2}, 4, 6),
    ],
)
def test_fedrep_head_then_body_phases_by_hand(params, schedule, head_steps, body_steps):
    """FedRep Alg. 1 from (φ^t, the client's own head h_k): head steps with the body fixed, then body steps with
    the head fixed; the new head stays in the client's state."""
    lr = 0.3
    model = mlp()
    state, own = own_head_state(model)
    algorithm, ctx, server, _, x, y = setup("fedrep", params, state, model=model, lr=lr, **schedule)
    head = mask_of(model, model.head_parameter_names())
    w = server.params.clone()
    w[head] = own
    update = algorithm.local_train(ctx)
    w = gd(model, w, x, y, lr, head_steps, head)
    w = gd(model, w, x, y, lr, body_steps, ~head)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], w[head], rtol=0, atol=F64_ATOL)


def test_fedrep_shares_the_body_and_keeps_heads_distinct(tmp_path):
    spec, records, ckpt = train(tmp_path, algorithm="fedrep", algorithm_params={"head_epochs": 1, "body_epochs": 1})
    data, model, w0 = initial_weights(spec)
    head = flat_mask(model, model.head_parameter_names())
    server, states = ckpt["server"], ckpt["client_states"]
    assert torch.equal(server["params"][head], w0[head])  # heads are never averaged
    assert not torch.equal(server["params"][~head], w0[~head])  # the body is trained and shared
    heads = [states[k]["local_params"] for k in range(4)]
    assert all(not torch.equal(heads[0], h) for h in heads[1:])
    # Personalised accuracy of each client = (shared body, own head) on its test split, computed here.
    for k in range(4):
        params = server["params"].clone()
        params[head] = heads[k]
        load_weights(model, params, server["buffers"])
        idx = data.client_test[k]
        predictions = model(data.tensors.train_x[idx]).argmax(1)
        expected = int((predictions == data.tensors.train_y[idx]).sum()) / len(idx)
        assert records[-1].personal_per_client[k] == expected


def test_fedrep_phases_train_only_their_part(tmp_path):
    spec, _, ckpt = train(tmp_path, algorithm="fedrep", rounds=1, algorithm_params={"head_epochs": 2, "body_epochs": 0})
    _, model, w0 = initial_weights(spec)
    head = flat_mask(model, model.head_parameter_names())
    assert torch.equal(ckpt["server"]["params"], w0)  # body frozen in the head phase, head kept local
    assert not torch.equal(ckpt["client_states"][0]["local_params"], w0[head])
