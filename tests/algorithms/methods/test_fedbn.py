"""FedBN (Li et al., ICLR 2021): each client trains with its own BatchNorm parameters and statistics, never averaged."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from fedbench.algorithms.context import load_weights
from personal_run_fixtures import BN, flat_mask, initial_weights, train
from pfl_formula_fixtures import BNModel, flat, gd, mask_of, setup


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedbn_trains_with_its_own_batchnorm_and_keeps_it():
    """FedBN: the client puts its own BN weights and running statistics on the global model, trains everything
    (FedAvg's step), and keeps the new BN weights and statistics; evaluation uses them with the global rest."""
    torch.manual_seed(10)
    model = BNModel()
    bn = mask_of(model, model.batchnorm_parameter_names())
    own = torch.linspace(0.5, 1.5, int(bn.sum()), dtype=torch.float64)
    own_buffers = {n: b.clone() for n, b in model.named_buffers()}
    own_buffers["encoder.2.running_mean"] += 0.3
    own_buffers["encoder.2.running_var"] += 2.0
    own_buffers["encoder.2.num_batches_tracked"] += 7
    state = {"local_params": own.clone(), "local_buffers": {n: b.clone() for n, b in own_buffers.items()}}
    algorithm, ctx, server, _, x, y = setup("fedbn", {}, state, model=model, lr=0.3, local_steps=1)
    w = server.params.clone()
    w[bn] = own
    update = algorithm.local_train(ctx)
    reference = BNModel()
    load_weights(reference, w, own_buffers)
    reference.train()
    expected = gd(reference, w, x, y, 0.3, 1)
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], expected[bn], rtol=0, atol=F64_ATOL)
    h = x @ reference.encoder[1].weight.detach().T + reference.encoder[1].bias.detach()
    mean = 0.9 * own_buffers["encoder.2.running_mean"] + 0.1 * h.mean(0)  # BN's momentum 0.1 on its own stats
    assert torch.allclose(state["local_buffers"]["encoder.2.running_mean"], mean, rtol=0, atol=F64_ATOL)
    assert int(state["local_buffers"]["encoder.2.num_batches_tracked"]) == 8
    load_weights(model, server.params, server.buffers)
    evaluated = algorithm.eval_model(ctx)
    w_eval = server.params.clone()
    w_eval[bn] = state["local_params"]
    assert torch.equal(flat(evaluated), w_eval)
    assert torch.equal(evaluated.encoder[2].running_mean, state["local_buffers"]["encoder.2.running_mean"])


# ------------------------------------------------------------------------------------ methods
def test_fedbn_keeps_batchnorm_local_and_never_averages_it(tmp_path):
    spec, _, ckpt = train(tmp_path, **{**BN, "algorithm": "fedbn"})
    _, model, w0 = initial_weights(spec)
    bn = flat_mask(model, model.batchnorm_parameter_names())
    assert bn.any()
    server, states = ckpt["server"], ckpt["client_states"]
    # The server's BN part is w^0 (never averaged) while the rest moved.
    assert torch.equal(server["params"][bn], w0[bn])
    assert not torch.equal(server["params"][~bn], w0[~bn])
    initial_buffers = dict(model.named_buffers())
    for name, value in server["buffers"].items():
        assert torch.equal(value, initial_buffers[name]), name
    # Every client holds its own BN parameters and running statistics, all different.
    local = [states[k]["local_params"] for k in range(3)]
    assert all(x.numel() == int(bn.sum()) for x in local)
    assert not torch.equal(local[0], local[1]) and not torch.equal(local[1], local[2])
    means = [states[k]["local_buffers"]["encoder.1.running_mean"] for k in range(3)]
    assert not torch.equal(means[0], means[1])
    assert set(states[0]["local_buffers"]) == {n for n, _ in model.named_buffers()}
