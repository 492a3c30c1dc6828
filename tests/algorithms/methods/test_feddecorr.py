"""FedDecorr (Shi et al., ICLR 2023): L_FedDecorr = ‖K‖_F²/d² of the batch-standardised features' correlation matrix,
written out entry by entry in float64; its extremes (uncorrelated features: 1/d; one shared direction: 1); a batch of
one adds nothing; the client's loss adds β·L on the penultimate features and its gradient drives the local steps."""

from __future__ import annotations

import math

import pytest
import torch

from algorithm_fixtures import LINEAR, MLP, HeadMLP, client_context, fresh_server, make_spec
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.methods.feddecorr import decorrelation
from global_formula_fixtures import ce_value, close, problem, server_and_model


def decorrelation_by_hand(z: torch.Tensor) -> float:
    """Σ_jk K_jk² / d², K_jk = (1/B) Σ_b ẑ_bj ẑ_bk, ẑ_bj = (z_bj − mean_j) / √(var_j + 1e-8) (biased var)."""
    batch, dim = z.shape
    rows = z.tolist()
    means = [sum(r[j] for r in rows) / batch for j in range(dim)]
    stds = [math.sqrt(sum((r[j] - means[j]) ** 2 for r in rows) / batch + 1e-8) for j in range(dim)]
    hat = [[(r[j] - means[j]) / stds[j] for j in range(dim)] for r in rows]
    total = 0.0
    for j in range(dim):
        for k in range(dim):
            total += (sum(h[j] * h[k] for h in hat) / batch) ** 2
    return total / dim**2


@pytest.mark.usefixtures("float64")
def test_decorrelation_by_hand_and_its_extremes():
    torch.manual_seed(8)
    z = torch.randn(7, 5) @ torch.randn(5, 5)  # correlated dimensions
    assert float(decorrelation(z)) == pytest.approx(decorrelation_by_hand(z), rel=0, abs=F64_ATOL)
    # columns orthogonal to each other and to the constant column (so centred): K = I, ‖I‖²/d² = 1/d
    q, _ = torch.linalg.qr(torch.cat([torch.ones(8, 1), torch.randn(8, 4)], dim=1))
    uncorrelated = q[:, 1:]
    assert float(decorrelation(uncorrelated)) == pytest.approx(decorrelation_by_hand(uncorrelated), rel=0, abs=F64_ATOL)
    assert float(decorrelation(uncorrelated)) == pytest.approx(1 / 4, abs=1e-6)
    collapsed = torch.randn(6, 1) * torch.tensor([[1.0, -2.0, 3.0]])  # every dimension on one direction: |K_jk| = 1
    assert float(decorrelation(collapsed)) == pytest.approx(1.0, abs=1e-6)
    assert float(decorrelation(torch.randn(1, 4))) == 0.0  # one sample: no correlations
    # two samples: every standardised dimension is ±1, so every |K_jk| = 1 and ‖K‖²/d² = 1 (up to the ε in std)
    assert float(decorrelation(torch.tensor([[0.0, 1.0, 5.0], [2.0, -1.0, 3.0]]))) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.usefixtures("linear_model", "float64")
def test_feddecorr_loss_and_local_step_by_hand():
    """Softmax regression's features are the inputs themselves (no gradient through them), so the term's value is
    added and its gradient w.r.t. the weights is 0: one step is FedAvg's; the value is checked by hand."""
    beta = 0.3
    x, y, data = problem(6)
    spec = make_spec("feddecorr", {"beta": beta}, model=LINEAR, local_steps=1, batch_size=64)
    algorithm = build_algorithm("feddecorr", {"beta": beta})
    model, server = server_and_model(algorithm, spec)
    ctx = client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {})
    logits = algorithm.forward(ctx, x)
    loss = algorithm.objective(ctx, x, y, logits)
    expected = float(ce_value(server.params, x, y)) + beta * decorrelation_by_hand(x)
    assert float(loss.detach()) == pytest.approx(expected, rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_feddecorr_gradient_flows_into_the_encoder():
    """On an MLP the term's gradient reaches the encoder: one local step differs from β = 0's by −η·β·∇L_FedDecorr,
    which autograd of the by-hand formula gives."""
    x, y, data = problem(7, samples=12)
    updates = {}
    for beta in (0.0, 2.0):
        spec = make_spec("feddecorr", {"beta": beta}, model=MLP, model_params={"hidden": 5}, local_steps=1, batch_size=64,
                         optimizer={"lr": 0.1}, dataset="digits")  # fmt: skip
        algorithm = build_algorithm("feddecorr", {"beta": beta})
        torch.manual_seed(0)
        model = HeadMLP(3, (4,), hidden=5)
        algorithm.bind_model(spec, model, (4,), 3)
        server = fresh_server(model)
        w = server.params.clone()
        updates[beta] = algorithm.local_train(
            client_context(algorithm, spec, model, server, data, torch.arange(12), {})
        ).params
        if beta:
            theta = w.clone().requires_grad_(True)
            # the encoder Linear(4, 5) is the first 20 + 5 entries (weight, bias) of the flat vector
            features = torch.relu(x @ theta[:20].view(5, 4).T + theta[20:25])
            hand = torch.autograd.grad(_decorrelation_autograd(features), theta)[0]
            assert close(updates[0.0] - updates[beta], 0.1 * beta * hand)
            assert hand[:25].abs().sum() > 0


def _decorrelation_autograd(z):
    """The same formula in tensor form, for autograd (``decorrelation_by_hand`` checks the values)."""
    centred = z - z.mean(0)
    hat = centred / torch.sqrt((centred**2).mean(0) + 1e-8)
    return ((hat.T @ hat / z.shape[0]) ** 2).sum() / z.shape[1] ** 2
