"""FedPer (Arivazhagan et al., 2019): the whole model trains from the global body and the client's own head; heads
stay local (FedAlt's too)."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from personal_run_fixtures import flat_mask, initial_weights, train
from pfl_formula_fixtures import gd, mask_of, mlp, own_head_state, setup


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("bind", [True, False])
def test_fedper_trains_the_whole_model_from_the_global_body_and_its_own_head(bind):
    """FedPer: E epochs of SGD on the whole model, starting from (global body, the client's own head); the head
    is stored on the client. Without ``bind_model`` (hook-level use) the local part is the same."""
    lr = 0.3
    model = mlp()
    state, own = own_head_state(model)
    algorithm, ctx, server, _, x, y = setup("fedper", {}, state, model=model, lr=lr, bind=bind, local_epochs=2)
    head = mask_of(model, model.head_parameter_names())
    w = server.params.clone()
    w[head] = own
    update = algorithm.local_train(ctx)
    w = gd(model, w, x, y, lr, 2)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], w[head], rtol=0, atol=F64_ATOL)
    assert state["local_buffers"] == {}


def test_fedper_and_fedalt_keep_heads_local(tmp_path):
    for name in ("fedper", "fedalt"):
        spec, _, ckpt = train(tmp_path, algorithm=name)
        _, model, w0 = initial_weights(spec)
        head = flat_mask(model, model.head_parameter_names())
        assert torch.equal(ckpt["server"]["params"][head], w0[head])
        assert not torch.equal(ckpt["client_states"][0]["local_params"], ckpt["client_states"][1]["local_params"])
