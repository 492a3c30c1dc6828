"""The set-up of the personalised-FL formula tests (tests/algorithms/test_<method>.py): a 2-layer MLP (body = Linear +
ReLU, head = Linear) on 8 samples in float64, full-batch steps, and the pieces to write a method's rule by hand."""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from algorithm_fixtures import (
    MLP,
    HeadMLP,
    client_context,
    fresh_server,
    make_spec,
)
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import param_views
from fedbench.data.store import TensorData
from fedbench.models.base import FedModel

CLASSES, DIM, N = 4, 6, 8


def etf_model(seed: int = 0) -> HeadMLP:
    torch.manual_seed(seed)
    model = HeadMLP(CLASSES, (DIM,), classifier="etf", hidden=5)
    with torch.no_grad():
        model.encoder[1].bias.add_(1.0)  # no all-zero ReLU feature row: every cosine is defined
    return model


def mlp(seed: int = 0) -> HeadMLP:
    torch.manual_seed(seed)
    return HeadMLP(CLASSES, (DIM,), hidden=5)


class BNModel(FedModel):
    """Flatten → Linear → BatchNorm1d → ReLU, then a linear head: FedBN's local part is the BN layer."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(DIM, 5), nn.BatchNorm1d(5), nn.ReLU())
        self.classifier = nn.Linear(5, CLASSES)
        self.feature_dim = 5


def data(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, DIM, generator=g, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])


def flat(model: nn.Module) -> torch.Tensor:
    return nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def mask_of(model: nn.Module, names) -> torch.Tensor:
    names = set(names)
    return torch.cat([torch.full((p.numel(),), n in names) for n, p in model.named_parameters()])


def loss_and_grad(model: nn.Module, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
    """Mean cross-entropy of the model with flat weights w on (x, y), and its gradient in w."""
    w = w.detach().clone().requires_grad_(True)
    names = [n for n, _ in model.named_parameters()]
    loss = F.cross_entropy(functional_call(model, dict(zip(names, param_views(w, model))), (x,)), y)
    (grad,) = torch.autograd.grad(loss, w)
    return loss.detach(), grad


def gd(model, w, x, y, lr, steps, mask=None):
    """``steps`` full-batch gradient steps on the parameters ``mask`` selects (all if None)."""
    for _ in range(steps):
        grad = loss_and_grad(model, w, x, y)[1]
        w = w - lr * (grad if mask is None else grad * mask)
    return w


def setup(name, params=None, state=None, model=None, seed=0, lr=0.3, bind=True, **spec_overrides):
    """A bound method, its server (w^0 remembered, then moved to w^t ≠ w^0) and a client context on 8 samples."""
    params = params or {}
    spec_overrides.setdefault("batch_size", N)
    spec = make_spec(name, params, model=MLP, optimizer={"lr": lr}, **spec_overrides)
    algorithm = build_algorithm(name, params)
    model = model if model is not None else mlp(seed)
    if bind:
        algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    w0 = server.params.clone()
    server.params = w0 + 0.2 * torch.randn(w0.shape, generator=torch.Generator().manual_seed(seed + 7))
    x, y = data()
    state = {} if state is None else state
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(N), state)
    return algorithm, ctx, server, w0, x, y


def own_head_state(ctx_model: nn.Module, seed: int = 9) -> tuple[dict, torch.Tensor]:
    head = mask_of(ctx_model, ctx_model.head_parameter_names())
    own = torch.randn(int(head.sum()), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return {"local_params": own.clone(), "local_buffers": {}}, own


def mlp_parts(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``mlp()``'s (W1, b1, W2, b2) as views of its flat weights (DIM → 5 → CLASSES)."""
    hidden = 5
    sizes = [hidden * DIM, hidden, CLASSES * hidden, CLASSES]
    w1, b1, w2, b2 = torch.split(w, sizes)
    return w1.view(hidden, DIM), b1, w2.view(CLASSES, hidden), b2


def mlp_features(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``mlp()``'s penultimate features relu(x W1ᵀ + b1), written out."""
    w1, b1, _, _ = mlp_parts(w)
    return torch.relu(x @ w1.T + b1)


def mlp_logits(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``mlp()``'s logits f(x) W2ᵀ + b2, written out."""
    _, _, w2, b2 = mlp_parts(w)
    return mlp_features(w, x) @ w2.T + b2
