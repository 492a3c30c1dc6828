"""L2SGD's randomised averaging step (Hanzely & Richtárik 2020) against hand computations.

The round form fedbench trains (``fedbench/algorithms/methods/l2sgd.py``): one coin per round, U ~ U[0, 1) from the run
seed's ``l2sgd-coin`` stream (fedbench.seeding: one named stream per purpose). When U < p (and after round 1) a
participating client first pulls its own model toward the received average, x_k ← x_k − θ(x_k − x̄) with
θ = min(1, ηλ/p), then takes the round's local SGD steps on f_k from there; x_k persists across rounds in the
client's state and is the model the client is evaluated with. Softmax regression, float64.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from algorithm_fixtures import (
    LINEAR,
    LinearModel,
    client_context,
    fresh_server,
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm, validate_algorithm_params
from fedbench.algorithms.context import ClientUpdate, load_weights
from fedbench.data.store import TensorData
from fedbench.errors import ConfigError
from fedbench.seeding import torch_generator
from personal_run_fixtures import train

CLASSES, DIM, SEED, LR = 3, 4, 3, 0.05


def coin(round_index: int) -> float:
    return float(torch.rand((), generator=torch_generator(SEED, "l2sgd-coin", round_index)))


def heads(p: float) -> int:
    """The first round after round 1 whose coin is below p (an averaging round)."""
    return next(t for t in range(2, 100) if coin(t) < p)


def tails(p: float) -> int:
    return next(t for t in range(2, 100) if coin(t) >= p)


class Client:
    """One client of L2SGD, driven through the method's hooks as the engine drives them."""

    def __init__(self, params: dict, local_steps: int = 1):
        self.spec = make_spec(
            "l2sgd", params, model=LINEAR, seed=SEED, local_steps=local_steps, batch_size=6, optimizer={"lr": LR}
        )
        self.algorithm = build_algorithm("l2sgd", params)
        torch.manual_seed(0)
        self.model = LinearModel(CLASSES, (DIM,))
        self.algorithm.bind_model(self.spec, self.model, (DIM,), CLASSES)
        self.server = fresh_server(self.model)
        self.algorithm.init_server(self.server)
        self.w0 = self.server.params.clone()
        self.x = torch.randn(6, DIM)
        self.y = torch.tensor([0, 1, 2, 0, 1, 2])
        self.state: dict = {}

    def context(self, round_index: int, global_params: torch.Tensor):
        self.server.params = global_params.clone()  # x̄ = w^t, the server's average
        data = TensorData(self.x, self.y, self.x, self.y)
        return client_context(
            self.algorithm,
            self.spec,
            self.model,
            self.server,
            data,
            torch.arange(6),
            self.state,
            round_index=round_index,
        )

    def start(self, round_index: int, global_params: torch.Tensor) -> torch.Tensor:
        """The model the client's local steps start from in ``round_index`` (after ``begin_local``)."""
        ctx = self.context(round_index, global_params)
        self.algorithm.begin_local(ctx)
        return ctx.current_params().clone()


def pulled(x: torch.Tensor, average: torch.Tensor, theta: float) -> torch.Tensor:
    return x - theta * (x - average)


def sgd_step(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One full-batch SGD step on softmax regression's mean cross-entropy (weight C×d, then bias)."""
    w = w.clone().requires_grad_(True)
    weight, bias = w[: CLASSES * DIM].view(CLASSES, DIM), w[CLASSES * DIM :]
    (grad,) = torch.autograd.grad(F.cross_entropy(x @ weight.T + bias, y), w)
    return (w - LR * grad).detach()


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize(
    "lam, p, theta",
    [
        (4.0, 0.5, 0.4),  # θ = ηλ/p = 0.05·4/0.5
        (2.0, 0.25, 0.4),  # the same θ from another λ, p: λ and p enter as λ/p
        (8.0, 1.0, 0.4),  # p = 1: every round after the first averages
        (15.0, 0.5, 1.0),  # ηλ/p = 1.5, clipped to 1: the client restarts from x̄
    ],
)
def test_an_averaging_round_pulls_the_personal_model_toward_the_average(lam, p, theta):
    client = Client({"lam": lam, "p": p})
    x_k = client.w0 + 0.3 * torch.randn_like(client.w0)  # the client's own model from an earlier round
    client.state.update({"personal_params": x_k.clone(), "personal_buffers": {}})
    average = client.w0 + torch.linspace(-0.5, 0.4, client.w0.numel())
    t = 2 if p == 1.0 else heads(p)
    assert torch.allclose(client.start(t, average), pulled(x_k, average, theta), rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("linear_model", "float64")
def test_a_round_whose_coin_is_not_below_p_keeps_the_personal_model():
    client = Client({"lam": 4.0, "p": 0.5})
    x_k = client.w0 + 0.3 * torch.randn_like(client.w0)
    client.state.update({"personal_params": x_k.clone(), "personal_buffers": {}})
    average = client.w0 + 0.2
    assert torch.equal(client.start(tails(0.5), average), x_k)
    # U < p, strictly: P(U < p) = p on torch.rand's grid, so a coin equal to p is no averaging step
    t = heads(0.5)
    exact = Client({"lam": 4.0, "p": coin(t)})
    exact.state.update({"personal_params": x_k.clone(), "personal_buffers": {}})
    assert torch.equal(exact.start(t, average), x_k)


@pytest.mark.usefixtures("linear_model", "float64")
def test_first_round_starts_from_w0_and_a_late_first_participation_pulls_w0():
    """Round 1 has nothing to average (x_k = w^0 = x̄); a client first drawn in an averaging round t > 1 starts from
    w^0 and pulls it toward x̄ = w^t."""
    client = Client({"lam": 4.0, "p": 0.5})
    assert torch.equal(client.start(1, client.w0), client.w0)
    average = client.w0 + torch.linspace(-0.5, 0.4, client.w0.numel())
    client.state.clear()
    assert torch.allclose(client.start(heads(0.5), average), pulled(client.w0, average, 0.4), rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("linear_model", "float64")
def test_client_update_is_the_pull_then_the_local_steps_and_persists_as_the_evaluated_model():
    """A whole client round by hand: x_k ← x_k − 0.4(x_k − x̄), one full-batch SGD step on f_k, upload the result;
    the next round starts from it (no averaging: tails), and the client is evaluated with it."""
    client = Client({"lam": 4.0, "p": 0.5})
    x_k = client.w0 + 0.3 * torch.randn_like(client.w0)
    client.state.update({"personal_params": x_k.clone(), "personal_buffers": {}})
    average = client.w0 + torch.linspace(-0.5, 0.4, client.w0.numel())
    update = client.algorithm.local_train(client.context(heads(0.5), average))
    expected = sgd_step(pulled(x_k, average, 0.4), client.x, client.y)
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    # the next round (tails) starts from the uploaded x_k, not from the new average
    assert torch.allclose(client.start(tails(0.5), client.w0 - 1.0), expected, rtol=0, atol=F64_ATOL)
    # evaluation: the model holds x_k whatever was loaded before
    ctx = client.context(tails(0.5), average)
    client.algorithm.end_local(ctx, ClientUpdate(0, expected + 0.1, {}, 6, 1, 0.0))
    load_weights(client.model, average)
    evaluated = client.algorithm.eval_model(ctx)
    flat = torch.nn.utils.parameters_to_vector(evaluated.parameters())
    assert torch.allclose(flat, expected + 0.1, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("linear_model", "float64")
def test_defaults_and_bounds():
    """λ = 0.1, p = 0.5 (LG-Mix leaves both open: the proposal's defaults); λ ≥ 0, 0 < p ≤ 1."""
    params = build_algorithm("l2sgd", {}).params
    assert (params.lam, params.p) == (0.1, 0.5)
    assert validate_algorithm_params("l2sgd", {"lam": 0.0, "p": 1.0}).p == 1.0
    assert validate_algorithm_params("l2sgd", {"p": 1e-9}).p == 1e-9
    for rejected in ({"lam": -1e-9}, {"p": 0.0}, {"p": 1.0 + 1e-9}):
        with pytest.raises(ConfigError, match=next(iter(rejected))):
            validate_algorithm_params("l2sgd", rejected)


@pytest.mark.usefixtures("float64")
def test_l2sgd_full_pull_each_round_restarts_from_the_average(tmp_path):
    # θ = ηλ/p = 1 on every round (p = 1): each round starts from x − (x − x̄) = x̄ (in exact arithmetic), so the
    # uploads are FedAvg's.
    _, _, fedavg = train(tmp_path, algorithm="fedavg", rounds=3)
    _, _, l2sgd = train(tmp_path, algorithm="l2sgd", rounds=3, algorithm_params={"lam": 10.0, "p": 1.0})
    assert torch.allclose(fedavg["server"]["params"], l2sgd["server"]["params"], rtol=0, atol=F64_ATOL)
    _, _, local = train(tmp_path, algorithm="local", rounds=3)
    _, _, apart = train(tmp_path, algorithm="l2sgd", rounds=3, algorithm_params={"lam": 0.0})
    assert torch.equal(local["client_states"][2]["personal_params"], apart["client_states"][2]["personal_params"])
