"""CCVR (Luo et al., NeurIPS 2021): the clients' class statistics (Eq. 3), their exact pooling (Eq. 4), the virtual
representations drawn from the pooled Gaussians and the classifier retrained on them in the last round, by hand
in float64; the rounds before are FedAvg."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from algorithm_fixtures import client_context
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientUpdate, ServerState
from fedbench.algorithms.methods.ccvr import class_statistics, pooled_statistics, virtual_representations
from fedbench.seeding import torch_generator
from pfl_formula_fixtures import CLASSES, gd, mask_of, setup
from pfl_formula_fixtures import mlp_features as features


def by_hand(z: torch.Tensor, y: torch.Tensor):
    counts = torch.bincount(y, minlength=CLASSES).double()
    means = torch.stack([z[y == c].mean(0) if (y == c).any() else torch.zeros(z.shape[1]) for c in range(CLASSES)])
    covs = torch.stack([torch.cov(z[y == c].T) if (y == c).sum() > 1 else torch.zeros(5, 5) for c in range(CLASSES)])
    return counts, means, covs


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "labels",
    [
        [0, 0, 0, 1, 1, 2, 0, 1],  # class 2 once, class 3 never
        [0, 0, 0, 1, 1, 2, 0, 2],  # classes 1 and 2 twice: Σ divides by 2 − 1
    ],
)
def test_class_statistics_are_counts_means_and_unbiased_covariances(labels):
    """Eq. 3 on the client's features; a class with one sample has Σ = 0, one with none μ = 0 and Σ = 0."""
    _, ctx, server, _, x, _ = setup("ccvr", {})
    y = torch.tensor(labels)
    got = class_statistics(ctx.model, x, y, CLASSES, batch_size=3)
    for a, b in zip(got, by_hand(features(server.params, x), y)):
        assert torch.allclose(a, b, rtol=0, atol=F64_ATOL)


def test_pooled_statistics_equal_those_of_all_clients_data_together():
    """Eq. 4 pools exactly: the statistics of the union of the clients' features."""
    g = torch.Generator().manual_seed(3)
    z = torch.randn(14, 5, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1, 0, 2, 1, 0, 1, 0, 0, 1, 2, 0, 3, 1])
    parts = [slice(0, 6), slice(6, 13), slice(13, 14)]
    stacked = [torch.stack(s) for s in zip(*(by_hand(z[p], y[p]) for p in parts))]
    for a, b in zip(pooled_statistics(*stacked), by_hand(z, y)):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)


def test_virtual_representations_are_the_mean_plus_scaled_eigenvector_noise():
    """μ_c + V diag(√λ) ε per class present, ε from the generator; a singular Σ (λ = 0) adds nothing along its null
    space."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(3, 2, generator=g, dtype=torch.float64)
    covariance = torch.stack([a @ a.T, torch.eye(3, dtype=torch.float64)])  # class 0: rank 2
    mean = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    z, y = virtual_representations(mean, covariance, 4, torch.tensor([True, False]), torch.Generator().manual_seed(7))
    noise = torch.randn(4, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    values, vectors = torch.linalg.eigh(covariance[0])
    assert torch.equal(y, torch.zeros(4, dtype=torch.long))
    assert torch.allclose(z, mean[0] + (noise * values.clamp(min=0).sqrt()) @ vectors.T, rtol=0, atol=1e-12)
    null = vectors[:, 0]  # the smallest eigenvalue's direction, 0 up to rounding
    assert torch.allclose((z - mean[0]) @ null, torch.zeros(4, dtype=torch.float64), atol=1e-6)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_ccvr_trains_as_fedavg_before_the_last_round_and_calibrates_the_head_in_it():
    """Rounds < T: FedAvg's local steps and average. Round T: no local step, the clients' statistics uploaded; the
    server keeps the body and retrains the head on M_c draws per class with SGD (one epoch, the run's batch size,
    the keyed stream's order)."""
    lr, per_class = 0.2, 6
    algorithm, ctx, server, _, x, y = setup("ccvr", {"virtual_per_class": per_class}, lr=lr, rounds=3, batch_size=8)
    update = algorithm.local_train(ctx)  # round 1 of 3
    assert torch.allclose(update.params, gd(ctx.model, server.params, x, y, lr, 1), rtol=0, atol=F64_ATOL)
    assert "class_statistics" not in update.extra
    w = server.params.clone()
    last = client_context(algorithm, ctx.spec, ctx.model, server, ctx.data, ctx.indices, {}, round_index=3)
    final = algorithm.local_train(last)
    assert final.num_steps == 0 and torch.equal(final.params, w)
    calibrated = ServerState(w.clone(), {})
    algorithm.aggregate(calibrated, [final], 3)
    generator = torch_generator(algorithm.spec.seed, "ccvr", 3)
    # the statistics as the client computes them (checked against by_hand above): a covariance rounded otherwise would
    # move the draws by up to √(rounding) along its zero eigenvalues (√λ amplifies 1e-17 to 3e-9)
    counts, mean, cov = class_statistics(ctx.model, x, y, CLASSES)
    z, labels = virtual_representations(mean, cov, per_class, counts > 0, generator)
    head = mask_of(ctx.model, ctx.model.head_parameter_names())
    h = w[head].clone()
    order = torch.randperm(len(labels), generator=generator)
    for start in range(0, len(labels), 8):
        chosen = order[start : start + 8]
        h = h.detach().requires_grad_(True)
        loss = F.cross_entropy(z[chosen] @ h[:20].view(CLASSES, 5).T + h[20:], labels[chosen])
        h = h.detach() - lr * torch.autograd.grad(loss, h)[0]
    assert torch.equal(calibrated.params[~head], w[~head])
    assert torch.allclose(calibrated.params[head], h, rtol=0, atol=F64_ATOL)
    assert not torch.allclose(h, w[head], atol=1e-3)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_ccvr_averages_as_fedavg_before_the_last_round():
    algorithm, _, server, _, _, _ = setup("ccvr", {}, rounds=3)
    g = torch.Generator().manual_seed(2)
    updates = [
        ClientUpdate(k, torch.randn(59, generator=g, dtype=torch.float64), {}, n, 1, 0.0) for k, n in ((0, 1), (1, 3))
    ]
    ours, fedavg = ServerState(server.params.clone(), {}), ServerState(server.params.clone(), {})
    algorithm.aggregate(ours, updates, 2)
    build_algorithm("fedavg", {}).aggregate(fedavg, updates, 2)
    assert torch.equal(ours.params, fedavg.params)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_calibrating_the_head_leaves_the_model_s_own_classifier_alone():
    algorithm, ctx, server, *_ = setup("ccvr", {})
    before = [p.detach().clone() for p in ctx.model.classifier.parameters()]
    z = torch.randn(12, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    y = torch.arange(12) % CLASSES
    head = server.params[algorithm._head]
    trained = algorithm.calibrated_head(head, z, y, torch.Generator().manual_seed(4))
    assert not torch.equal(trained, head)  # it did train
    assert all(torch.equal(p, b) for p, b in zip(ctx.model.classifier.parameters(), before))
