"""FedProto (Tan et al., AAAI 2022): the prototype-regularised local steps, the local prototypes (Eq. 4), their
count-weighted aggregation (Eq. 6) and nearest-prototype inference, each by hand in float64."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from conftest import F64_ATOL
from fedbench.algorithms.context import ClientUpdate
from pfl_formula_fixtures import CLASSES, setup
from pfl_formula_fixtures import mlp_features as features
from pfl_formula_fixtures import mlp_logits as logits


def prototypes_with_class_3_missing():
    g = torch.Generator().manual_seed(11)
    prototypes = torch.rand(CLASSES, 5, generator=g, dtype=torch.float64)
    return prototypes, torch.tensor([True, True, True, False])


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("own_model", [False, True])
def test_fedproto_local_steps_prototypes_and_state_by_hand(own_model):
    """Eq. 8: two full-batch steps on CE + λ·mean((f(x) − C̄_y)²), a sample of a class without a global prototype
    adding 0 (its term's target is its own feature); from the client's own model when it has one, else from the
    server's. Eq. 4: the trained model's per-class feature sums and counts are uploaded; the model is stored."""
    lam, lr = 0.7, 0.3
    own = torch.randn(59, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    state = {"local_params": own.clone(), "local_buffers": {}} if own_model else {}
    algorithm, ctx, server, _, x, y = setup("fedproto", {"lam": lam}, state, lr=lr, local_epochs=2)
    prototypes, present = prototypes_with_class_3_missing()
    server.state["prototypes"].copy_(prototypes)
    server.state["present"].copy_(present)
    w = (own if own_model else server.params).clone()
    for _ in range(2):
        w = w.detach().requires_grad_(True)
        f = features(w, x)
        target = torch.where(present[y].unsqueeze(1), prototypes[y], f.detach())
        loss = F.cross_entropy(logits(w, x), y) + lam * ((f - target) ** 2).sum() / f.numel()
        (grad,) = torch.autograd.grad(loss, w)
        w = w.detach() - lr * grad
    update = algorithm.local_train(ctx)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.equal(state["local_params"], update.params)
    f = features(w, x)
    sums = torch.stack([f[y == c].sum(0) for c in range(CLASSES)])
    assert torch.allclose(update.extra["prototype_sums"], sums, rtol=0, atol=F64_ATOL)
    assert torch.equal(update.extra["class_counts"], torch.bincount(y, minlength=CLASSES).double())


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedproto_aggregates_prototypes_weighted_by_class_counts_and_keeps_the_model():
    """Eq. 6: C̄^(j) = Σ_i |D_i,j| C_i^(j) / Σ_i |D_i,j| over the clients holding j; a class nobody held this round
    keeps its previous prototype and presence; the server's weights are never averaged."""
    algorithm, _, server, _, _, _ = setup("fedproto", {})
    before = server.params.clone()
    previous = torch.full((CLASSES, 5), 9.0, dtype=torch.float64)
    server.state["prototypes"] = previous.clone()
    server.state["present"] = torch.tensor([False, False, False, True])
    g = torch.Generator().manual_seed(2)
    means = [torch.rand(CLASSES, 5, generator=g, dtype=torch.float64) for _ in range(2)]
    counts = [torch.tensor([3.0, 0.0, 1.0, 0.0]), torch.tensor([1.0, 2.0, 0.0, 0.0])]
    updates = [
        ClientUpdate(k, before + k, {}, int(n.sum()), 1, 0.0, {"prototype_sums": m * n[:, None], "class_counts": n})
        for k, (m, n) in enumerate(zip(means, counts))
    ]
    algorithm.aggregate(server, updates, 1)
    expected = previous.clone()
    expected[0] = (3 * means[0][0] + 1 * means[1][0]) / 4
    expected[1] = means[1][1]
    expected[2] = means[0][2]
    assert torch.allclose(server.state["prototypes"], expected, rtol=0, atol=F64_ATOL)
    assert server.state["present"].tolist() == [True, True, True, True]
    assert torch.equal(server.params, before)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedproto_evaluates_by_the_nearest_global_prototype():
    """Inference: the class of the nearest global prototype in the client's feature space, never a class without
    one; the client's own model (kept in its state with the prototypes it last received) gives the features. A
    client that never trained is evaluated with the server's model."""
    algorithm, ctx, server, _, x, y = setup("fedproto", {})
    assert algorithm.eval_model(ctx) is ctx.model  # no prototypes yet
    prototypes, present = prototypes_with_class_3_missing()
    server.state["prototypes"], server.state["present"] = prototypes, present
    own = torch.randn(59, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    ctx.state.update(local_params=own, local_buffers={})
    algorithm.after_aggregation(ctx, server)
    with torch.no_grad():
        scores = algorithm.eval_model(ctx)(x)
    distances = torch.cdist(features(own, x), prototypes) ** 2
    assert torch.allclose(scores[:, :3], -distances[:, :3], rtol=0, atol=F64_ATOL)
    # the evaluated model holds the client's whole parameters (its trained head too): what the divergence
    # diagnostics of the personal model measure
    evaluated = torch.nn.utils.parameters_to_vector(algorithm.eval_model(ctx).parameters())
    assert torch.equal(evaluated, own)
    assert torch.equal(scores.argmax(1), distances[:, :3].argmin(1))


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedproto_sends_prototype_sums_and_counts_up_and_the_prototypes_down():
    algorithm, *_ = setup("fedproto", {})
    features_dim = 5  # mlp(): DIM → 5 → CLASSES
    assert algorithm.extra_upload_floats(59) == CLASSES * features_dim + CLASSES
    assert algorithm.extra_download_floats(59) == CLASSES * features_dim


@pytest.mark.usefixtures("head_mlp", "float64")
def test_the_class_feature_sums_are_data_outside_any_graph():
    from fedbench.algorithms.methods.fedproto import class_feature_sums
    from pfl_formula_fixtures import data, mlp

    x, y = data()
    sums, counts = class_feature_sums(mlp(0), x, y, CLASSES)
    assert not sums.requires_grad and sums.grad_fn is None and not counts.requires_grad
