"""FedRoD (Chen & Chao, ICLR 2022): one step on the balanced-softmax generic loss plus the personal head's loss on
the generic logits' residual, by hand in float64; what is uploaded, kept and evaluated."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from conftest import F64_ATOL
from pfl_formula_fixtures import CLASSES, mask_of, setup
from pfl_formula_fixtures import mlp_features as features
from pfl_formula_fixtures import mlp_logits as logits


def head_logits(head: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return z @ head[:20].view(CLASSES, 5).T + head[20:]


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("balanced, first_participation", [(True, True), (True, False), (False, False)])
def test_fedrod_trains_body_generic_and_personal_heads_by_hand(balanced, first_participation):
    """Two full-batch steps of SGD on CE(G(f) + log n, y) + CE(sg[G(f)] + P(sg[f]), y) over (w, P): the body and G
    get only the first term's gradient, P only the second's. P starts as w^0's head, or the client's own; the
    client holds classes 0 and 1 only (log 0 = −∞ leaves 2 and 3 out of the generic softmax)."""
    lr = 0.3
    own = torch.randn(24, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    state = {} if first_participation else {"personal_head": own.clone()}
    algorithm, ctx, server, w0, x, _ = setup("fedrod", {"balanced": balanced}, state, lr=lr, local_epochs=2)
    y = torch.tensor([0, 0, 1, 0, 0, 1, 0, 0])
    ctx.data.train_y.copy_(y)
    shift = torch.tensor([6.0, 2.0, 0.0, 0.0], dtype=torch.float64).log() if balanced else 0.0
    head = mask_of(ctx.model, ctx.model.head_parameter_names())
    w, p = server.params.clone(), (w0[head] if first_participation else own).clone()
    for _ in range(2):
        w, p = w.detach().requires_grad_(True), p.detach().requires_grad_(True)
        generic = logits(w, x)
        residual = head_logits(p, features(w, x).detach())
        loss = F.cross_entropy(generic + shift, y) + F.cross_entropy(generic.detach() + residual, y)
        grad_w, grad_p = torch.autograd.grad(loss, [w, p])
        w, p = w.detach() - lr * grad_w, p.detach() - lr * grad_p
    update = algorithm.local_train(ctx)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["personal_head"], p, rtol=0, atol=F64_ATOL)
    assert not torch.allclose(p, w[head], atol=1e-3)  # P is not uploaded: the upload's head is G


def test_a_flat_head_is_cut_into_the_classifier_s_tensors_in_their_order():
    from fedbench.algorithms.methods.fedrod import head_parameters

    classifier = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    vector = torch.arange(26.0)  # 12 + 4 + 8 + 2 values
    views = head_parameters(classifier, vector)
    assert list(views) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert torch.equal(torch.cat([v.reshape(-1) for v in views.values()]), vector)
    assert views["2.weight"].shape == (2, 4)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedrod_evaluates_generic_plus_personal_logits():
    """Personal evaluation: G(f(x)) + P(f(x)) with the global body and G; the generic model alone before a client
    has trained."""
    algorithm, ctx, server, _, x, _ = setup("fedrod", {})
    assert algorithm.eval_model(ctx) is ctx.model
    own = torch.randn(24, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    ctx.state["personal_head"] = own
    with torch.no_grad():
        got = algorithm.eval_model(ctx)(x)
    w = server.params
    assert torch.allclose(got, logits(w, x) + head_logits(own, features(w, x)), rtol=0, atol=F64_ATOL)
