"""MOON (Li et al., CVPR 2021): the model-contrastive loss and its representations, the previous model as the negative
pair, its Table VIII cost, and the degenerate μ = 0 case that equals FedAvg; checked against the paper's formula
written out by hand in float64 (to within F64_ATOL) and against the method it must reduce to."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from algorithm_fixtures import (
    LINEAR,
    HeadMLP,
    client_context,
    fresh_server,
    initial_params,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import load_weights
from global_formula_fixtures import CLASSES, DIM, algorithm_flops, close, problem, server_and_model


# ------------------------------------------------------------------------------------------- MOON
@pytest.mark.usefixtures("linear_model")
def test_moon_with_zero_mu_equals_fedavg_and_keeps_the_previous_model(tmp_path):
    _, fedavg, avg_ckpt = train(make_spec("fedavg", rounds=2), tmp_path, "a.pt")
    _, moon, moon_ckpt = train(make_spec("moon", {"mu": 0.0}, rounds=2), tmp_path, "m.pt")
    assert torch.equal(moon_ckpt["server"]["params"], avg_ckpt["server"]["params"])
    assert [r.test_acc for r in moon.records] == [r.test_acc for r in fedavg.records]
    states = moon_ckpt["client_states"]
    assert len(states) == 4 and all(
        s["previous_params"].shape == avg_ckpt["server"]["params"].shape for s in states.values()
    )
    # the server holds w^0 for clients that never trained
    assert torch.equal(moon_ckpt["server"]["state"]["initial_params"], initial_params(make_spec("moon")))
    _, _, strong = train(make_spec("moon", {"mu": 5.0}, rounds=2), tmp_path, "s.pt")
    assert not torch.allclose(strong["server"]["params"], avg_ckpt["server"]["params"])


# ------------------------------------------------------------------------------------------- MOON
def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1))


def mlp_representation(model: HeadMLP, w: torch.Tensor, x: torch.Tensor, pre_activation: bool) -> torch.Tensor:
    """z of a HeadMLP at flat weights w: W₁x + b₁ (pre-activation) or ReLU of it (features)."""
    hidden = model.feature_dim
    w1, b1 = w[: hidden * DIM].view(hidden, DIM), w[hidden * DIM : hidden * DIM + hidden]
    z = x @ w1.T + b1
    return z if pre_activation else torch.relu(z)


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize("representation", ["features", "pre_activation"])
def test_moon_contrastive_loss_by_hand(representation):
    """MOON Eq. 3–4: ℓ = CE + μ·mean_b −log(e^{sim(z, z_glob)/τ} / (e^{sim(z, z_glob)/τ} + e^{sim(z, z_prev)/τ})),
    the positive pair with the round's global model, the negative with the client's previous local model (its
    round-1 upload, checked in round 2, after the server moved)."""
    mu, tau = 2.5, 0.7
    params = {"mu": mu, "tau": tau, "representation": representation}
    x, y, data = problem(7, samples=8)
    spec = make_spec("moon", params, optimizer={"lr": 0.3})
    algorithm = build_algorithm("moon", params)
    torch.manual_seed(7)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    state: dict = {}
    indices = torch.arange(len(y))
    first = algorithm.local_train(client_context(algorithm, spec, model, server, data, indices, state, 0, 1))
    server.params = server.params + 0.2 * torch.randn_like(server.params)  # another global model in round 2

    ctx = client_context(algorithm, spec, model, server, data, indices, state, 0, 2)
    algorithm.begin_local(ctx)
    w = server.params + 0.1 * torch.randn_like(server.params)  # the local model mid-training
    load_weights(model, w)
    logits = algorithm.forward(ctx, x)
    loss = algorithm.loss(ctx, x, y, logits)

    pre = representation == "pre_activation"
    z_glob, z_prev = (mlp_representation(model, v, x, pre) for v in (server.params, first.params))
    hidden = model.feature_dim

    def by_hand(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = mlp_representation(model, v, x, pre)
        positive, negative = cosine(z, z_glob) / tau, cosine(z, z_prev) / tau
        contrastive = -torch.log(positive.exp() / (positive.exp() + negative.exp())).mean()
        w2 = v[hidden * DIM + hidden : hidden * DIM + hidden + CLASSES * hidden].view(CLASSES, hidden)
        b2 = v[hidden * DIM + hidden + CLASSES * hidden :]
        logits_by_hand = torch.relu(mlp_representation(model, v, x, True)) @ w2.T + b2
        return F.cross_entropy(logits_by_hand, y) + mu * contrastive, contrastive

    w_leaf = w.clone().requires_grad_(True)
    expected, contrastive = by_hand(w_leaf)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)
    assert float(contrastive.detach()) > 0.01  # the term does not vanish here
    # the gradient flows through z only: the global and the previous model are fixed
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])
    assert close(grad, torch.autograd.grad(expected, [w_leaf])[0])


@pytest.mark.usefixtures("linear_model", "float64")
def test_moon_pre_activation_cuts_before_the_encoders_final_activation():
    """FedTrip's MOON representation is the encoder's output before its last ReLU/ReLU6 (a trailing Dropout or
    Identity may follow it); an encoder whose last layer is no activation has no such cut and is a user error."""
    from torch import nn

    from fedbench.algorithms.methods.moon import activation_cut
    from fedbench.errors import ConfigError

    def with_encoder(*layers):
        model = nn.Module()
        model.encoder = nn.Sequential(*layers)
        return model

    assert activation_cut(with_encoder(nn.Linear(2, 2), nn.ReLU(), nn.Dropout(0.5), nn.Identity())) == 1
    assert activation_cut(with_encoder(nn.ReLU(), nn.Linear(2, 2), nn.ReLU6())) == 2
    for model in (
        with_encoder(nn.ReLU(), nn.Linear(2, 2)),
        with_encoder(nn.ReLU(), nn.Tanh(), nn.Dropout()),
        with_encoder(nn.Dropout()),
        with_encoder(),
        nn.Linear(2, 2),
    ):
        with pytest.raises(
            ConfigError,
            match=r"^moon: model \w+ has no final activation to cut before; use algorithm_params.representation = "
            r"'features'$",
        ):
            activation_cut(model)


class BatchNormNet(torch.nn.Module):
    """features = ReLU(BN(Linear(x))) (BN running statistics in eval mode), head = Linear."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.encoder = nn.Sequential(nn.Linear(DIM, 5), nn.BatchNorm1d(5), nn.ReLU())
        self.classifier = nn.Linear(5, CLASSES)
        self.feature_dim = 5
        with torch.no_grad():
            self.encoder[1].bias.fill_(2.0)  # no all-zero feature row: every cosine is defined

    def features(self, x):
        return self.encoder(x)

    def head(self, z):
        return self.classifier(z)

    def forward(self, x):
        return self.head(self.features(x))


@pytest.mark.usefixtures("linear_model", "float64")
def test_moon_negative_pair_is_the_previous_model_with_its_own_batchnorm_statistics():
    """MOON's z_prev comes from the client's previous local model — its round-1 upload, weights *and* BN running
    statistics (eval mode), not those of w^0 or of the global model."""
    mu, tau = 1.5, 0.5
    params = {"mu": mu, "tau": tau}
    x, y, data = problem(9, samples=8)
    spec = make_spec("moon", params, optimizer={"lr": 0.3})
    algorithm = build_algorithm("moon", params)
    torch.manual_seed(9)
    model = BatchNormNet()
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    state: dict = {}
    first = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(8), state, 0, 1))
    assert not torch.equal(first.buffers["encoder.1.running_mean"], server.buffers["encoder.1.running_mean"])
    previous = BatchNormNet()
    load_weights(previous, first.params, first.buffers)
    server.params = server.params + 0.2 * torch.randn_like(server.params)  # another global model in round 2
    ctx = client_context(algorithm, spec, model, server, data, torch.arange(8), state, 0, 2)
    teacher = BatchNormNet()  # w^t with the server's BN statistics (train-mode passes below update the model's)
    teacher.load_state_dict(model.state_dict())
    algorithm.begin_local(ctx)
    logits = algorithm.forward(ctx, x)
    loss = algorithm.loss(ctx, x, y, logits)
    z = model.features(x)
    with torch.no_grad():
        z_glob, z_prev = teacher.eval().features(x), previous.eval().features(x)
    positive, negative = cosine(z, z_glob) / tau, cosine(z, z_prev) / tau
    expected = F.cross_entropy(model(x), y) - mu * torch.log(positive.exp() / (positive.exp() + negative.exp())).mean()
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("linear_model", "float64")
def test_moon_features_need_no_final_activation():
    """The default representation is the features themselves: softmax regression (features = the input) trains."""
    params = {"mu": 1.0, "tau": 0.5}
    x, y, data = problem(10, samples=8)
    spec = make_spec("moon", params, model=LINEAR)
    algorithm = build_algorithm("moon", params)
    model, server = server_and_model(algorithm, spec)
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(8), {}))
    assert not torch.equal(update.params, server.params)


@pytest.mark.usefixtures("linear_model", "float64")
def test_moon_cost_follows_table_viii():
    """K·M·(1+p)·FP with p = 1 (one previous model)."""
    assert algorithm_flops("moon") == 5 * 50 * (1 + 1) * 300.0
