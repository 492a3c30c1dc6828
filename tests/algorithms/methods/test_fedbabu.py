"""FedBABU (Oh et al., ICLR 2022): the body trains while the head stays at its initialisation."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    initial_params,
    make_spec,
    train,
)
from conftest import F64_ATOL
from global_formula_fixtures import head_and_body
from pfl_formula_fixtures import gd, mask_of, mlp, setup


@pytest.mark.usefixtures("linear_model")
def test_fedbabu_head_never_changes_while_the_body_trains(tmp_path):
    spec = make_spec(
        "fedbabu", rounds=3, clients_per_round=2, optimizer={"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-2}
    )
    _, sink, ckpt = train(spec, tmp_path)
    head0, body0 = head_and_body(spec, initial_params(spec))
    head, body = head_and_body(spec, ckpt["server"]["params"])
    assert set(head) == {"classifier.weight", "classifier.bias"}
    assert all(torch.equal(head[n], head0[n]) for n in head)
    assert all(not torch.equal(body[n], body0[n]) for n in body)
    assert sink.records[-1].test_acc > 0.3


# ------------------------------------------------------------------------------------------- FedBABU
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("frozen_before", [False, True])
def test_fedbabu_trains_the_body_only_and_restores_the_heads_flags(frozen_before):
    """FedBABU: E epochs of SGD on the body with the head fixed; the head's requires_grad flags are what they were
    before (so that fine-tuning can train it; a head bias frozen before stays frozen)."""
    lr = 0.3
    model = mlp()
    if frozen_before:
        model.classifier.bias.requires_grad_(False)
    algorithm, ctx, server, _, x, y = setup("fedbabu", {}, {}, model=model, lr=lr, local_epochs=2)
    head = mask_of(model, model.head_parameter_names())
    update = algorithm.local_train(ctx)
    expected = gd(model, server.params.clone(), x, y, lr, 2, ~head)
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.equal(update.params[head], server.params[head])
    assert model.classifier.weight.requires_grad
    assert model.classifier.bias.requires_grad is not frozen_before
    assert all(p.requires_grad for p in model.encoder.parameters())
