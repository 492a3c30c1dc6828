"""The composable regularizers (``fedbench/algorithms/regularizers.py``): each term by hand (KD, NTD, FD, LD,
prox), their combination in the objective (convex or added), their defaults and bounds, the teacher of each batch,
and a regularizer of weight 0 that leaves its base method as it is."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from algorithm_fixtures import (
    LINEAR,
    MLP,
    HeadMLP,
    LinearModel,
    client_context,
    fresh_server,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms import regularizers as reg
from fedbench.data.store import TensorData
from global_formula_fixtures import ntd_by_hand
from pfl_formula_fixtures import CLASSES, DIM


# ------------------------------------------------------------------------------------------- regularizers
@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_regularizer_terms():
    torch.manual_seed(6)
    z, z_g, y = torch.randn(5, 4), torch.randn(5, 4), torch.tensor([0, 1, 2, 3, 0])
    for term in (reg.logit_matching, reg.feature_distillation):
        assert float(term(z, z)) == 0.0 and float(term(z, z_g)) > 0
    assert float(reg.logit_matching(z, z_g)) == pytest.approx(float(((z - z_g) ** 2).sum() / 20), rel=0, abs=F64_ATOL)
    assert float(reg.distillation(z, z, 3.0)) == pytest.approx(0.0, abs=F64_ATOL)
    kd = (
        sum(
            float(
                (
                    torch.softmax(z_g[b] / 3, 0) * (torch.log_softmax(z_g[b] / 3, 0) - torch.log_softmax(z[b] / 3, 0))
                ).sum()
            )
            for b in range(5)
        )
        * 9
        / 5
    )
    assert float(reg.distillation(z, z_g, 3.0)) == pytest.approx(kd, rel=0, abs=F64_ATOL)
    assert float(reg.not_true_distillation(z, z_g, y, 2.0)) == pytest.approx(
        ntd_by_hand(z, z_g, y, 2.0), rel=0, abs=F64_ATOL
    )
    shifted = z.clone()
    shifted[torch.arange(5), y] -= 7.0  # the student's true-class logit does not enter NTD either
    assert torch.equal(reg.not_true_distillation(shifted, z_g, y, 2.0), reg.not_true_distillation(z, z_g, y, 2.0))


@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_objective_combines_regularizers_convex_or_added():
    torch.manual_seed(7)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    params = {
        "regularizers": [
            {"name": "ld", "weight": 0.2},
            {"name": "prox", "weight": 0.5},
            {"name": "fd", "weight": 0.1, "combine": "add"},
        ]
    }
    algorithm = build_algorithm("fedavg", params)
    spec = make_spec("fedavg", params, model=LINEAR, optimizer={"lr": 0.1})
    model = LinearModel(3, (4,))
    server = fresh_server(model)
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), {})
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # move away from the teacher θ_g
        logits = algorithm.forward(ctx, x)
        teacher = ctx.global_model()
        prox = 0.5 * sum(((p - g) ** 2).sum() for p, g in zip(model.parameters(), teacher.parameters()))
        expected = (
            0.8 * F.cross_entropy(logits, y)
            + 0.2 * F.mse_loss(logits, teacher(x))
            + 0.5 * prox
            + 0.1 * F.mse_loss(x, x)
        )  # the linear model's features are its inputs
        assert float(algorithm.objective(ctx, x, y, logits)) == pytest.approx(float(expected), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize(
    "base,name",
    [
        ("fedavg", "prox"),
        ("fedavg", "kd"),
        ("fedavg", "ntd"),
        ("fedavg", "ld"),
        ("fedavg", "fd"),
        ("dot_regression", "fd"),
        ("scaffold", "kd"),
    ],
)
def test_regularizer_with_weight_zero_equals_its_base_method(tmp_path, base, name):
    model_params = {"classifier": "etf" if base == "dot_regression" else "linear"}
    setup = dict(
        rounds=2,
        clients_per_round=2,
        model=MLP,
        model_params=model_params,
        optimizer={"lr": 1.0 if base == "dot_regression" else 0.05, "momentum": 0.5},
    )
    _, plain_sink, plain = train(make_spec(base, **setup), tmp_path, "plain.pt")
    zero = {"regularizers": [{"name": name, "weight": 0.0}]}
    _, zero_sink, zeroed = train(make_spec(base, zero, **setup), tmp_path, "zero.pt")
    assert torch.equal(zeroed["server"]["params"], plain["server"]["params"])
    assert [r.train_loss for r in zero_sink.records] == [r.train_loss for r in plain_sink.records]
    some = {"regularizers": [{"name": name, "weight": 0.3}]}
    _, _, weighted = train(make_spec(base, some, **setup), tmp_path, "some.pt")
    assert not torch.allclose(weighted["server"]["params"], plain["server"]["params"], atol=1e-6)


# ------------------------------------------------------------------------------------------- regularizers
def test_regularizer_defaults_and_bounds():
    """FedDr+ spec §3.3: τ = 3 (FedNTD's) unless set, τ > 0, weights ≥ 0; prox is added, the others convex unless
    ``combine`` says otherwise; convex weights may sum to exactly 1 (β = 0: the regularizers alone), not more."""
    from fedbench.algorithms import validate_algorithm_params
    from fedbench.errors import ConfigError

    (kd,) = validate_algorithm_params("fedavg", {"regularizers": [{"name": "kd", "weight": 0.0}]}).regularizers
    assert (kd.tau, kd.combine, kd.mode) == (3.0, None, "convex")
    (prox,) = validate_algorithm_params(
        "fedavg", {"regularizers": [{"name": "prox", "weight": 1, "combine": "convex"}]}
    ).regularizers
    assert prox.mode == "convex"
    validate_algorithm_params("fedavg", {"regularizers": [{"name": "kd", "weight": 0.5, "tau": 1e-9}]})
    validate_algorithm_params(
        "fedavg", {"regularizers": [{"name": "kd", "weight": 0.5}, {"name": "fd", "weight": 0.5}]}
    )
    for bad in ({"name": "kd", "weight": -1e-9}, {"name": "kd", "weight": 0.1, "tau": 0.0}):
        with pytest.raises(ConfigError, match="regularizers"):
            validate_algorithm_params("fedavg", {"regularizers": [bad]})
    with pytest.raises(
        ConfigError, match=r"regularizers: Value error, the weights of the convex regularizers sum to more than 1$"
    ):
        validate_algorithm_params(
            "fedavg", {"regularizers": [{"name": "kd", "weight": 0.5}, {"name": "fd", "weight": 0.5 + 1e-9}]}
        )


def test_a_regularizer_spec_rejects_unknown_keys_and_is_immutable():
    """A misspelt key is an error, not a silently ignored setting; a resolved spec cannot change afterwards."""
    import pydantic

    from fedbench.algorithms import validate_algorithm_params
    from fedbench.errors import ConfigError

    with pytest.raises(ConfigError, match="temp"):
        validate_algorithm_params("fedavg", {"regularizers": [{"name": "kd", "weight": 0.1, "temp": 3}]})
    (kd,) = validate_algorithm_params("fedavg", {"regularizers": [{"name": "kd", "weight": 0.1}]}).regularizers
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        kd.weight = 0.5


@pytest.mark.usefixtures("head_mlp", "float64")
def test_the_teacher_of_each_batch_is_the_global_model_on_that_batch():
    """LD (Kim et al.): (1/C)‖z − z_g‖² with z_g the round's global model on *this* batch — on a second batch too
    (the teacher's outputs are computed once per batch, never reused for another)."""
    params = {"regularizers": [{"name": "ld", "weight": 1.0, "combine": "add"}]}
    spec = make_spec("fedavg", params, model=MLP)
    algorithm = build_algorithm("fedavg", params)
    torch.manual_seed(4)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    teacher = HeadMLP(CLASSES, (DIM,), hidden=5)
    teacher.load_state_dict(model.state_dict())
    x, y = torch.randn(6, DIM), torch.tensor([0, 1, 2, 3, 0, 1])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(6), {})
    algorithm.begin_local(ctx)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # the client moved away from θ_g
    for batch in (x[:3], x[3:]):
        target = y[: len(batch)]
        logits = algorithm.forward(ctx, batch)
        expected = torch.nn.functional.cross_entropy(logits, target) + ((logits - teacher(batch)) ** 2).mean()
        actual = algorithm.objective(ctx, batch, target, logits)
        assert float(actual.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("name", ["kd", "ntd"])
def test_kd_and_ntd_regularizers_through_the_objective_by_hand(name):
    """FedDr+ Table 1's KD (Hinton: τ²·KL(softmax(z_g/τ) ‖ softmax(z/τ))) and NTD (the same over the not-true
    classes only), convex with weight w: (1 − w)·CE + w·R, z_g the round's global model on the batch."""
    tau, weight = 2.0, 0.3
    params = {"regularizers": [{"name": name, "weight": weight, "tau": tau}]}
    spec = make_spec("fedavg", params, model=MLP)
    algorithm = build_algorithm("fedavg", params)
    torch.manual_seed(8)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    teacher = HeadMLP(CLASSES, (DIM,), hidden=5)
    teacher.load_state_dict(model.state_dict())
    x, y = torch.randn(6, DIM), torch.tensor([0, 1, 2, 3, 0, 1])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(6), {})
    algorithm.begin_local(ctx)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    logits = algorithm.forward(ctx, x)
    objective = algorithm.objective(ctx, x, y, logits)
    z, z_g = logits.detach(), teacher(x).detach()
    total = 0.0
    for b in range(6):
        keep = [c for c in range(CLASSES) if name == "kd" or c != int(y[b])]
        p_t = torch.softmax(z_g[b, keep] / tau, 0)
        total += float((p_t * (torch.log(p_t) - torch.log_softmax(z[b, keep] / tau, 0))).sum())
    expected = (1 - weight) * float(torch.nn.functional.cross_entropy(z, y)) + weight * tau**2 * total / 6
    assert float(objective.detach()) == pytest.approx(expected, rel=0, abs=F64_ATOL)
