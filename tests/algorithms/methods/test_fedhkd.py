"""FedHKD's hyper-knowledge (Chen et al., ICLR 2023) against hand computations.

A 2-layer MLP (body φ: Linear + ReLU, head g: Linear) in float64, four classes. Written out in plain torch below:
a client's upload (per class c it holds: the count n_c, Σ softmax(z/T) over its samples, and (h̄_c + noise)·n_c with
h̄_c the mean representation and one N(0, σ²) vector per client from the client's generator), over more than one
1000-sample chunk; the server's count-weighted per-class averages H̄_c, Q̄_c and the classes with knowledge; the local
objective CE + λ·KL(Q̄ ‖ softmax(g(H̄)/T)) (batch-mean over the classes with knowledge) + γ·mean ‖φ(x) − H̄_y‖² (zero
for labels without knowledge, still counted in the mean) — and plain CE in the first round.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from algorithm_fixtures import (
    MLP,
    HeadMLP,
    client_context,
    fresh_server,
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm, validate_algorithm_params
from fedbench.algorithms.context import ClientUpdate, load_weights
from fedbench.data.store import TensorData
from fedbench.errors import ConfigError

pytestmark = pytest.mark.usefixtures("head_mlp", "float64")

CLASSES, DIM, HIDDEN = 4, 6, 5


PARAMS = {"lam": 0.3, "gamma": 0.7, "temperature": 0.5, "noise_std": 0.4}


def setup(params: dict = PARAMS):
    spec = make_spec("fedhkd", params, model=MLP)
    algorithm = build_algorithm("fedhkd", params)
    torch.manual_seed(0)
    model = HeadMLP(CLASSES, (DIM,), hidden=HIDDEN)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    return spec, algorithm, model, server


def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach()


def test_client_knowledge_is_per_class_sums_over_every_chunk_with_one_noise_vector():
    """1003 training samples (two chunks of ≤ 1000), picked out of 1100 by the client's indices: class 0 once,
    class 2 never. The upload is (n_c·(h̄_c + ν), Σ_b softmax(z_b/T) over class c, n_c), ν = σ·N(0, I) from the
    client's generator; a class the client lacks uploads zeros. The client keeps its trained model for evaluation."""
    spec, algorithm, model, server = setup()
    torch.manual_seed(1)
    x = torch.randn(1100, DIM)
    y = torch.tensor([1, 3, 3] * 366 + [1, 3])[:1100].clone()
    indices = torch.randperm(1100)[:1003]
    y[indices[0]] = 0  # the client's only sample of class 0 (class 2: none anywhere)
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), indices, {})
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))  # the client's trained model
    trained = flat(model).clone()
    noise_generator = torch.Generator()
    noise_generator.set_state(ctx.generator.get_state())
    update = ClientUpdate(0, trained.clone(), {}, 1003, 5, 0.0)
    algorithm.end_local(ctx, update)

    with torch.no_grad():
        z = model.encoder(x[indices])
        soft = torch.softmax(model.classifier(z) / 0.5, dim=1)
    labels = y[indices]
    noise = 0.4 * torch.randn(HIDDEN, generator=noise_generator)
    counts = torch.tensor([float((labels == c).sum()) for c in range(CLASSES)])
    assert counts.tolist() == [1.0, counts[1].item(), 0.0, counts[3].item()] and counts.sum() == 1003
    means = torch.zeros(CLASSES, HIDDEN)
    soft_sums = torch.zeros(CLASSES, CLASSES)
    for c in (0, 1, 3):
        means[c] = z[labels == c].mean(0) + noise
        soft_sums[c] = soft[labels == c].sum(0)
    uploaded_features, uploaded_soft, uploaded_counts = update.extra["knowledge"]
    assert torch.equal(uploaded_counts, counts)
    assert torch.allclose(uploaded_soft, soft_sums, rtol=0, atol=F64_ATOL)
    assert torch.allclose(uploaded_features, means * counts[:, None], rtol=0, atol=F64_ATOL)
    assert torch.equal(uploaded_features[2], torch.zeros(HIDDEN))
    # the trained model is the client's personalised model: evaluation loads it whatever the working model holds
    load_weights(model, server.params)
    assert torch.allclose(flat(algorithm.eval_model(ctx)), trained, rtol=0, atol=F64_ATOL)


def uploads() -> list[ClientUpdate]:
    """Two clients' uploads, made by hand: class totals 1 (class 0), 5 (class 1), 0 (class 2), 6 (class 3)."""
    torch.manual_seed(2)
    updates = []
    for k, counts in enumerate(([1.0, 2.0, 0.0, 4.0], [0.0, 3.0, 0.0, 2.0])):
        n = torch.tensor(counts)
        feature_sums = torch.randn(CLASSES, HIDDEN) * n[:, None]
        soft_sums = torch.softmax(torch.randn(CLASSES, CLASSES), dim=1) * n[:, None]
        params = torch.randn(CLASSES * HIDDEN + CLASSES + HIDDEN * DIM + HIDDEN)
        updates.append(ClientUpdate(k, params, {}, int(n.sum()), 3, 0.0, {"knowledge": (feature_sums, soft_sums, n)}))
    return updates


def knowledge_by_hand(updates: list[ClientUpdate]):
    features, soft, present = torch.zeros(CLASSES, HIDDEN), torch.zeros(CLASSES, CLASSES), []
    for c in range(CLASSES):
        total = sum(float(u.extra["knowledge"][2][c]) for u in updates)
        present.append(total > 0)
        if total > 0:
            features[c] = sum(u.extra["knowledge"][0][c] for u in updates) / total
            soft[c] = sum(u.extra["knowledge"][1][c] for u in updates) / total
    return features, soft, torch.tensor(present)


def test_server_averages_the_knowledge_per_class_weighted_by_counts():
    """H̄_c = Σ_k n_kc·h̄_kc / Σ_k n_kc, Q̄_c likewise; classes no client holds carry no knowledge. The model is
    FedAvg's sample-weighted average (7 and 5 samples)."""
    _, algorithm, _, server = setup()
    updates = uploads()
    algorithm.aggregate(server, updates, 1)
    features, soft, present = algorithm.payload(server, 2)["knowledge"]
    expected_features, expected_soft, expected_present = knowledge_by_hand(updates)
    assert present.tolist() == expected_present.tolist() == [True, True, False, True]
    assert torch.allclose(features, expected_features, rtol=0, atol=F64_ATOL)
    assert torch.allclose(soft, expected_soft, rtol=0, atol=F64_ATOL)
    expected_params = (7 * updates[0].params + 5 * updates[1].params) / 12
    assert torch.allclose(server.params, expected_params, rtol=0, atol=F64_ATOL)


def test_local_objective_adds_the_two_hyper_knowledge_terms():
    """Eq. 8 on a batch of 8 whose labels include class 2 (no knowledge): with Q̄ and H̄ the server's averages,
    L = CE + λ·Σ_{c present} Σ_j Q̄_cj (log Q̄_cj − log softmax(g(H̄_c)/T)_j) / |present|
          + γ·Σ_{b: y_b present} ‖φ(x_b) − H̄_{y_b}‖² / (B·d)."""
    spec, algorithm, model, server = setup()
    updates = uploads()
    algorithm.aggregate(server, updates, 1)
    load_weights(model, server.params)
    torch.manual_seed(3)
    x, y = torch.randn(8, DIM), torch.tensor([0, 1, 2, 3, 3, 2, 1, 1])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), {}, round_index=2)
    logits = algorithm.forward(ctx, x)
    loss = algorithm.objective(ctx, x, y, logits)

    features, soft, present = knowledge_by_hand(updates)
    with torch.no_grad():
        z = model.encoder(x)
        ce = F.cross_entropy(model.classifier(z), y)
        log_help = torch.log_softmax(model.classifier(features) / 0.5, dim=1)
    kd = sum((soft[c] * (soft[c].log() - log_help[c])).sum() for c in (0, 1, 3)) / 3
    feature_term = sum(((z[b] - features[y[b]]) ** 2).sum() for b in range(8) if y[b] != 2) / (8 * HIDDEN)
    assert float(kd) > 1e-3 and float(feature_term) > 1e-3  # both terms matter
    expected = ce + 0.3 * kd + 0.7 * feature_term
    assert float(loss.detach()) == pytest.approx(float(expected), rel=0, abs=F64_ATOL)


def test_first_round_without_knowledge_is_plain_cross_entropy():
    spec, algorithm, model, server = setup()
    torch.manual_seed(3)
    x, y = torch.randn(8, DIM), torch.tensor([0, 1, 2, 3, 3, 2, 1, 1])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), {})
    logits = algorithm.forward(ctx, x)
    loss = algorithm.objective(ctx, x, y, logits)
    with torch.no_grad():
        ce = F.cross_entropy(model(x), y)
    assert float(loss.detach()) == pytest.approx(float(ce), rel=0, abs=F64_ATOL)


def test_defaults_and_bounds():
    """[code] defaults λ = γ = 0.05, T = 0.5, σ = 2 (LG-Mix gives none); λ, γ, σ ≥ 0 and T > 0."""
    params = build_algorithm("fedhkd", {}).params
    assert (params.lam, params.gamma, params.temperature, params.noise_std) == (0.05, 0.05, 0.5, 2.0)
    accepted = validate_algorithm_params("fedhkd", {"lam": 0.0, "gamma": 0.0, "temperature": 0.5, "noise_std": 0.0})
    assert (accepted.lam, accepted.gamma, accepted.temperature, accepted.noise_std) == (0.0, 0.0, 0.5, 0.0)
    for rejected in ({"lam": -1e-9}, {"gamma": -1e-9}, {"temperature": 0.0}, {"noise_std": -1e-9}):
        with pytest.raises(ConfigError, match=next(iter(rejected))):
            validate_algorithm_params("fedhkd", rejected)
