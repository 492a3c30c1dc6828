"""Local training (no communication): each client continues its own model, the server keeps w⁰, and ``loss = "dr"``
needs an ETF head and uses L_DR."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from algorithm_fixtures import (
    HeadMLP,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import load_weights
from fedbench.errors import ConfigError
from personal_run_fixtures import initial_weights, train
from pfl_formula_fixtures import CLASSES, DIM, data, flat, gd, mlp, setup


# ------------------------------------------------------------------------------------------- local training
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("first_participation", [True, False])
def test_local_training_continues_the_clients_own_model_and_the_server_keeps_w0(first_participation):
    lr = 0.3
    torch.manual_seed(11)
    v0 = flat(mlp()) + 0.4 * torch.randn(flat(mlp()).shape)
    state = {} if first_participation else {"personal_params": v0.clone(), "personal_buffers": {}}
    algorithm, ctx, server, _, x, y = setup("local", {}, state, lr=lr, local_epochs=2)
    start = server.params.clone() if first_participation else v0
    update = algorithm.local_train(ctx)
    expected = gd(ctx.model, start, x, y, lr, 2)
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["personal_params"], expected, rtol=0, atol=F64_ATOL)
    load_weights(ctx.model, server.params)
    assert torch.allclose(flat(algorithm.eval_model(ctx)), expected, rtol=0, atol=F64_ATOL)
    before = server.params.clone()
    algorithm.aggregate(server, [update], 1)
    assert torch.equal(server.params, before)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_local_training_with_dot_regression_needs_an_etf_and_uses_l_dr():
    from fedbench.algorithms.methods.dot_regression import dot_regression_loss

    with pytest.raises(ConfigError, match="run with algorithm_params.loss = 'dr' needs a fixed etf classifier"):
        build_algorithm("local", {"loss": "dr"}).check_model(mlp(), "run")
    build_algorithm("local", {}).check_model(mlp(), "run")  # plain CE needs no fixed classifier
    torch.manual_seed(12)
    etf = HeadMLP(CLASSES, (DIM,), classifier="etf", hidden=5)
    build_algorithm("local", {"loss": "dr"}).check_model(etf, "run")
    x, y = data()
    for loss, expected in (("dr", dot_regression_loss), ("ce", F.cross_entropy)):
        algorithm, ctx, _, _, _, _ = setup("local", {"loss": loss}, model=etf)
        with torch.no_grad():
            logits = etf(x)
        assert float(algorithm.objective(ctx, x, y, logits)) == pytest.approx(float(expected(logits, y)), abs=1e-12)


def test_local_training_never_shares(tmp_path):
    spec, _, ckpt = train(tmp_path, algorithm="local")
    _, _, w0 = initial_weights(spec)
    assert torch.equal(ckpt["server"]["params"], w0)
    assert not torch.equal(ckpt["client_states"][0]["personal_params"], ckpt["client_states"][1]["personal_params"])
