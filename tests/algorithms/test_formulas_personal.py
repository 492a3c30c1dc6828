"""Defining formulas of the personalised and fixed-classifier methods, against hand computations.

As in ``test_formulas_global.py``: tiny float64 problems, the paper's equation written out in plain torch
arithmetic, compared with what fedbench gives through its real hooks (``forward``, ``objective``,
``local_train``) to within F64_ATOL.
"""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (  # noqa: F401  (head_mlp: a fixture, used through usefixtures)
    MLP,
    HeadMLP,
    client_context,
    fresh_server,
    head_mlp,
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.dot_regression import dot_regression_loss
from fedbench.algorithms.params import FEDDR_PLUS_PARAMS
from fedbench.data.store import TensorData

CLASSES, DIM = 4, 6


def etf_model(seed: int = 0) -> HeadMLP:
    torch.manual_seed(seed)
    model = HeadMLP(CLASSES, (DIM,), classifier="etf", hidden=5)
    with torch.no_grad():
        model.encoder[1].bias.add_(1.0)  # no all-zero ReLU feature row: every cosine is defined
    return model


# ------------------------------------------------------------------------------------------- FedDr+ / Dot-Regression
@pytest.mark.usefixtures("float64")
def test_dot_regression_loss_is_half_the_mean_squared_cosine_gap():
    """FedDr+ Eq. 2: L_DR = ½·mean_b (cos(f_b, v_{y_b}) − 1)², the cosines being the etf head's logits."""
    logits = torch.tensor([[0.2, -0.5, 0.9], [0.7, 0.1, -0.3], [-0.4, 0.6, 0.0], [1.0, 0.3, 0.2]])
    y = torch.tensor([2, 0, 1, 1])
    by_hand = 0.5 * ((0.9 - 1) ** 2 + (0.7 - 1) ** 2 + (0.6 - 1) ** 2 + (0.3 - 1) ** 2) / 4
    assert float(dot_regression_loss(logits, y)) == pytest.approx(by_hand, rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("feddr_plus", [False, True], ids=["dot_regression", "feddr_plus"])
def test_feddrplus_objective_by_hand(feddr_plus):
    """FedDr+ Eq. 2–4 through the method's hooks: the etf head's logits are ⟨f/‖f‖, v_c⟩ with V the frozen simplex
    ETF; the objective is L_DR (β = 1) or 0.9·L_DR + 0.1·(1/d)‖f(x;θ) − f(x;θ_g)‖² (FedDr+, β = 0.9)."""
    params = FEDDR_PLUS_PARAMS if feddr_plus else {}
    spec = make_spec("dot_regression", params, model=MLP, model_params={"classifier": "etf"})
    algorithm = build_algorithm("dot_regression", params)
    model = etf_model()
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    torch.manual_seed(1)
    x, y = torch.randn(7, DIM), torch.tensor([0, 1, 2, 3, 0, 1, 2])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(7), {})
    algorithm.begin_local(ctx)
    teacher_features = model.encoder(x).detach()
    with torch.no_grad():
        for p in model.encoder.parameters():
            p.add_(0.2 * torch.randn_like(p))  # the client has moved away from θ_g
    logits = algorithm.forward(ctx, x)
    f = model.encoder(x)
    v = model.classifier.weight.detach()
    cosines = ((f / f.norm(dim=1, keepdim=True)) @ v.T).detach()
    assert torch.allclose(logits, cosines, rtol=0, atol=F64_ATOL)
    gram = v @ v.T  # simplex ETF: unit rows, pairwise inner products −1/(C−1)
    assert torch.allclose(gram, torch.full_like(gram, -1 / (CLASSES - 1)).fill_diagonal_(1.0), rtol=0, atol=F64_ATOL)
    l_dr = 0.5 * sum((float(cosines[b, y[b]]) - 1) ** 2 for b in range(7)) / 7
    l_fd = float(((f - teacher_features) ** 2).sum().detach()) / (7 * 5)
    assert l_fd > 0
    expected = 0.9 * l_dr + 0.1 * l_fd if feddr_plus else l_dr
    objective = algorithm.objective(ctx, x, y, logits)
    assert float(objective.detach()) == pytest.approx(expected, rel=0, abs=F64_ATOL)


# ------------------------------------------------------------------------------------------- LG-Mix
def trace_by_hand(h: torch.Tensor, center: bool, drop_smallest: bool) -> float:
    """tr(Σ) of LG-Mix Eq. 5 over the rows of h (÷ n: cancels in Eq. 6), centred and without the smallest eigenvalue
    as the [code] computes it, or the paper's plain Σ h hᵀ."""
    n = h.shape[0]
    centred = h - h.mean(0) if center else h
    sigma = centred.T @ centred / n
    if not drop_smallest:
        return float(torch.diagonal(sigma).sum())
    eigenvalues = torch.linalg.eigvalsh(sigma).abs()
    return float(eigenvalues.sum() - eigenvalues.min())


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("center, drop_smallest", [(True, True), (False, False)])
def test_lgmix_lambda_and_eq2_from_two_local_steps_by_hand(center, drop_smallest):
    """LG-Mix Eq. 1–6 through ``local_train`` and ``after_aggregation``: two full-batch SGD steps from the personal
    model w_c; h_c = its penultimate features before each step, h_g = those of u(t) (both steps); λ = tr Σ_c /
    (tr Σ_c + tr Σ_g); the upload is u + Δw_c and the new personal model w_c + λΔw_c + (1 − λ)Δu."""
    params = {"center": center, "drop_smallest": drop_smallest}
    lr = 0.3
    spec = make_spec("lgmix", params, model=MLP, local_steps=2, batch_size=8, optimizer={"lr": lr})
    algorithm = build_algorithm("lgmix", params)
    torch.manual_seed(2)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    u = server.params.clone()
    w_c = u + 0.3 * torch.randn_like(u)  # the client's personal model differs from u(t)
    state = {"personal_params": w_c.clone(), "personal_buffers": {}}
    x, y = torch.randn(8, DIM), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), state)
    update = algorithm.local_train(ctx)

    reference = HeadMLP(CLASSES, (DIM,), hidden=5)

    def at(w: torch.Tensor) -> HeadMLP:
        torch.nn.utils.vector_to_parameters(w, reference.parameters())
        return reference

    def features(w: torch.Tensor) -> torch.Tensor:
        return at(w).encoder(x).detach()

    def step(w: torch.Tensor) -> torch.Tensor:
        loss = torch.nn.functional.cross_entropy(at(w.clone().requires_grad_(False))(x), y)
        grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(reference.parameters()))])
        return w - lr * grad

    w_1 = step(w_c)
    w_2 = step(w_1)
    local = trace_by_hand(torch.cat([features(w_c), features(w_1)]), center, drop_smallest)
    glob = trace_by_hand(torch.cat([features(u), features(u)]), center, drop_smallest)
    lam = local / (local + glob)
    assert 0.05 < lam < 0.95  # a λ that neither limit (FedAvg, local training) explains
    assert float(state["lambda"]) == pytest.approx(lam, rel=0, abs=F64_ATOL)  # round 1: λ̄ = λ
    assert torch.allclose(update.params, u + (w_2 - w_c), rtol=0, atol=F64_ATOL)  # upload u(t) + Δw_c
    server.params = u + torch.linspace(-0.2, 0.3, u.numel())  # u(t+1): the server has aggregated
    algorithm.after_aggregation(ctx, server)
    expected = w_c + lam * (w_2 - w_c) + (1 - lam) * (server.params - u)  # LG-Mix Eq. 2
    assert torch.allclose(state["personal_params"], expected, rtol=0, atol=F64_ATOL)


def test_lgmix_attaching_flops_are_the_global_models_forward_pass_on_every_batch():
    """Eq. 6's h_g: the global model's forward pass on each of the K local batches of B samples."""
    flops = build_algorithm("lgmix", {}).attach_flops_per_round(
        steps=5, samples=230, batch_size=50, num_params=1000, forward_flops=300.0, backward_flops=600.0
    )
    assert flops == 5 * 50 * 300.0


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


def test_only_trainable_scopes_the_trained_parameters_and_keeps_frozen_ones_frozen():
    """Inside the block only the named parameters train; a parameter frozen before (a fixed ETF classifier) stays
    frozen unless ``respect_frozen=False``; every flag comes back afterwards."""
    from fedbench.algorithms.base import only_trainable

    model = etf_model()
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    assert flags["classifier.weight"] is False and flags["encoder.1.weight"] is True
    with only_trainable(model, ["classifier.weight", "encoder.1.weight"]):
        assert {n for n, p in model.named_parameters() if p.requires_grad} == {"encoder.1.weight"}
    assert {name: p.requires_grad for name, p in model.named_parameters()} == flags
    with only_trainable(model, ["classifier.weight"], respect_frozen=False):
        assert {n for n, p in model.named_parameters() if p.requires_grad} == {"classifier.weight"}
    assert {name: p.requires_grad for name, p in model.named_parameters()} == flags


@pytest.mark.usefixtures("head_mlp", "float64")
def test_proximal_term_skips_frozen_parameters():
    """The proximal term ‖Θ − Θ_g‖² counts the *trainable* parameters only: a frozen ETF classifier that differs from
    the teacher's (it never does in training; here it is moved on purpose) adds nothing."""
    from fedbench.algorithms.functional import proximal

    model = etf_model()
    reference = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable < sum(p.numel() for p in model.parameters())  # the classifier is frozen
    assert float(proximal(model.parameters(), reference).detach()) == pytest.approx(trainable * 0.01, rel=1e-12)


# ------------------------------------------------------------------------------------------- FedAvg (the base class)
@pytest.mark.usefixtures("float64")
def test_fedavg_aggregation_by_hand():
    """FedAvg: w ← Σ_k (n_k/Σn)·w_k; floating buffers (BN statistics) with the same weights; integer buffers
    (num_batches_tracked) are the first client's."""
    from fedbench.algorithms.base import ClientUpdate
    from fedbench.algorithms.context import ServerState

    algorithm = build_algorithm("fedavg", {})
    server = ServerState(torch.zeros(3), {})
    sizes = (1, 3, 6)
    updates = [
        ClientUpdate(
            k,
            torch.tensor([1.0, -2.0, 0.5]) * (k + 1),
            {"bn.running_mean": torch.tensor([k, 2.0 * k]), "bn.num_batches_tracked": torch.tensor(4 + k)},
            n,
            1,
            0.0,
        )
        for k, n in enumerate(sizes)
    ]
    algorithm.aggregate(server, updates, 1)
    p = [0.1, 0.3, 0.6]
    assert torch.allclose(
        server.params, torch.tensor([1.0, -2.0, 0.5]) * (0.1 * 1 + 0.3 * 2 + 0.6 * 3), rtol=0, atol=F64_ATOL
    )
    assert torch.allclose(
        server.buffers["bn.running_mean"], torch.tensor([p[1] + 2 * p[2], 2 * p[1] + 4 * p[2]]), rtol=0, atol=F64_ATOL
    )
    assert (
        server.buffers["bn.num_batches_tracked"].dtype == torch.int64
        and int(server.buffers["bn.num_batches_tracked"]) == 4
    )


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
def test_lgmix_traces_accumulate_over_the_rounds_batches():
    """Eq. 5's Σ sums over every local batch of the round, for h_c and for h_g: one epoch of two different batches
    (the batches as the engine draws them); h_c of the second batch is taken at the weights after the first step."""
    spec = make_spec("lgmix", {}, model=MLP, local_epochs=1, batch_size=4, optimizer={"lr": 0.3})
    algorithm = build_algorithm("lgmix", {})
    torch.manual_seed(5)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    u = server.params.clone()
    w_c = u + 0.3 * torch.randn_like(u)
    x, y = torch.randn(8, DIM), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    data = TensorData(x, y, x, y)
    twin = client_context(algorithm, spec, HeadMLP(CLASSES, (DIM,), hidden=5), server, data, torch.arange(8), {})
    (x1, y1), (x2, y2) = list(twin.batches())
    state = {"personal_params": w_c.clone(), "personal_buffers": {}}
    ctx = client_context(algorithm, spec, model, server, data, torch.arange(8), state)
    algorithm.local_train(ctx)

    reference = HeadMLP(CLASSES, (DIM,), hidden=5)

    def at(w):
        torch.nn.utils.vector_to_parameters(w, reference.parameters())
        return reference

    loss = torch.nn.functional.cross_entropy(at(w_c)(x1), y1)
    w_1 = w_c - 0.3 * torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(reference.parameters()))])
    local = trace_by_hand(torch.cat([at(w_c).encoder(x1), at(w_1).encoder(x2)]).detach(), True, True)
    glob = trace_by_hand(at(u).encoder(torch.cat([x1, x2])).detach(), True, True)
    assert float(state["lambda"]) == pytest.approx(local / (local + glob), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_lgmix_client_without_data_keeps_the_global_update():
    """A client with no local step has Δw_c = 0 and λ = 0 [proposal]: w_c(t+1) = w_c(t) + Δu(t)."""
    spec = make_spec("lgmix", {}, model=MLP)
    algorithm = build_algorithm("lgmix", {"history": False})
    torch.manual_seed(6)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    u = server.params.clone()
    w_c = u + 0.3 * torch.randn_like(u)
    state = {"personal_params": w_c.clone(), "personal_buffers": {}}
    x, y = torch.randn(1, DIM), torch.tensor([0])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(0), state)
    update = algorithm.local_train(ctx)
    assert float(state["lambda"]) == 0.0 and torch.allclose(update.params, u, rtol=0, atol=F64_ATOL)
    server.params = u + 0.1
    algorithm.after_aggregation(ctx, server)
    assert torch.allclose(state["personal_params"], w_c + 0.1, rtol=0, atol=F64_ATOL)
    evaluated = algorithm.eval_model(ctx)  # personalised evaluation uses w_c(t+1), not u(t+1)
    assert torch.allclose(torch.nn.utils.parameters_to_vector(evaluated.parameters()), w_c + 0.1, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp")
def test_lgmix_needs_penultimate_features():
    """Eq. 6 compares penultimate features: a model without a features/head split is a user error naming why."""
    from fedbench.errors import ConfigError

    spec = make_spec("lgmix", {}, model=MLP)
    algorithm = build_algorithm("lgmix", {})
    model = torch.nn.Sequential(torch.nn.Linear(DIM, CLASSES))
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    x, y = torch.randn(2, DIM), torch.tensor([0, 1])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(2), {})
    with pytest.raises(
        ConfigError, match=r"^lgmix needs a model with a features/head split \(penultimate features h\)$"
    ):
        algorithm.local_train(ctx)


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


def test_model_outputs_needs_both_halves_of_the_split():
    """(logits, penultimate features) for a model with ``features`` and ``head``; a model with only one of them (a
    torchvision VGG has a ``features`` block but no ``head``) is run whole and has no penultimate features."""
    from fedbench.algorithms.base import model_outputs

    vgg_like = torch.nn.Sequential()
    vgg_like.features = torch.nn.Linear(3, 3)
    x = torch.randn(2, 3)
    logits, features = model_outputs(vgg_like, x)
    assert features is None and torch.equal(logits, vgg_like(x))


def test_a_fixed_classifier_must_be_frozen_normalising_and_of_its_kind():
    """require_classifier: the head must be frozen, normalise the features and have the kind's Gram matrix; the
    error says what to set."""
    from fedbench.algorithms.fixed_classifier import require_classifier
    from fedbench.errors import ConfigError
    from fedbench.models.heads import build_classifier, simplex_etf

    model = torch.nn.Module()
    model.classifier = build_classifier("etf", 5, CLASSES)
    require_classifier(model, "etf", "dot_regression")  # the real thing passes
    hint = r"^dot_regression needs a fixed etf classifier: build the model with model_params.classifier = 'etf'"
    plain = torch.nn.Linear(5, CLASSES, bias=False)  # ETF rows, frozen, but no feature normalisation
    with torch.no_grad():
        plain.weight.copy_(simplex_etf(CLASSES, 5))
    plain.weight.requires_grad_(False)
    model.classifier = plain
    with pytest.raises(ConfigError, match=hint):
        require_classifier(model, "etf", "dot_regression")
    model.classifier = build_classifier("linear", 5, CLASSES, bias=False, normalize_features=True)  # trainable
    with pytest.raises(ConfigError, match=hint + r" \(models with a 'classifier' option, e.g. vgg11, mobilenet\)$"):
        require_classifier(model, "etf", "dot_regression")
    model.classifier = build_classifier("orthonormal", 5, CLASSES)  # frozen and normalising, but not an ETF
    with pytest.raises(ConfigError, match=hint + r".* \(the model's frozen classifier rows are not etf\)$"):
        require_classifier(model, "etf", "dot_regression")
