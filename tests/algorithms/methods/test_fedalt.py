"""FedAlt (Pillutla et al., ICML 2022): the personal steps, then the shared ones, by hand."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from pfl_formula_fixtures import gd, mask_of, mlp, own_head_state, setup


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "fraction, schedule, personal_steps",
    [(None, {"local_epochs": 3}, 2), (1 / 3, {"local_epochs": 3}, 1), (0.25, {"local_steps": 4}, 1), (1.0, {}, 1)],
)
def test_fedalt_personal_then_shared_steps_by_hand(fraction, schedule, personal_steps):
    """FedAlt Alg. 1: round(personal_fraction · K) steps of the personal head v_k with u fixed, then the other
    steps of the shared body u with v_k fixed (K = the round's planned steps; the default fraction 1/2 rounds
    1.5 to 2)."""
    lr = 0.3
    params = {} if fraction is None else {"personal_fraction": fraction}
    model = mlp()
    state, own = own_head_state(model)
    algorithm, ctx, server, _, x, y = setup("fedalt", params, state, model=model, lr=lr, **schedule)
    steps = ctx.planned_steps()
    head = mask_of(model, model.head_parameter_names())
    w = server.params.clone()
    w[head] = own
    update = algorithm.local_train(ctx)
    w = gd(model, w, x, y, lr, personal_steps, head)
    w = gd(model, w, x, y, lr, steps - personal_steps, ~head)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], w[head], rtol=0, atol=F64_ATOL)
