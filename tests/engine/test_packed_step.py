"""``fedbench.engine.packed`` on tiny problems in float64: one packed round against the same clients trained one after
another by the methods' own ``local_train`` (unequal client sizes: unequal step counts and short last batches; a
returning SCAFFOLD client with its own state; a client without samples), the SGD update written out by hand, the
padding of a short batch and its masked mean, the model call on a flat vector, and the executor decision with the
reason a user reads."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from torch import nn

from fedbench.algorithms import build_algorithm, functional
from fedbench.algorithms.context import RunState, ServerState, SpareModels
from fedbench.data.federated import FederatedData
from fedbench.data.store import TensorData
from fedbench.engine import packed
from fedbench.errors import ConfigError
from tests.algorithm_fixtures import LinearModel, make_spec

D = torch.float64
ATOL = 1e-12  # the two paths sum the same float64 terms in another order, over a handful of steps


def _run(spec, sizes=(5, 2, 7, 0)):
    g = torch.Generator().manual_seed(0)
    n = sum(sizes)
    x = torch.randn(n, 1, 2, 2, generator=g, dtype=D)
    y = torch.randint(0, 3, (n,), generator=g)
    data = TensorData(train_x=x, train_y=y, test_x=x, test_y=y)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    federated = FederatedData(
        tensors=data,
        client_train=[torch.arange(s, s + k) for s, k in zip(starts, sizes)],
        client_test=[torch.arange(0, 1) for _ in sizes],
        num_classes=3,
        input_shape=(1, 2, 2),
        info={},
    )
    torch.manual_seed(1)
    model = LinearModel(3, (1, 2, 2)).to(D)
    server = ServerState(params=nn.utils.parameters_to_vector(model.parameters()).detach().clone(), buffers={})
    return RunState(
        spec=spec,
        data=federated,
        model=model,
        server=server,
        device=torch.device("cpu"),
        spare_models=SpareModels(model),
    )


CASES = {
    "fedavg": ({}, {"momentum": 0.9, "weight_decay": 0.1, "nesterov": True}),
    "fedavg-plain": ({}, {}),
    "fedprox": ({"mu": 0.5}, {"momentum": 0.5, "weight_decay": 0.05}),
    "scaffold": ({}, {"momentum": 0.5}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_packed_round_equals_the_clients_trained_one_after_another(case, float64):
    params, optimizer = CASES[case]
    name = case.split("-")[0]
    spec = make_spec(name, params, batch_size=3, local_epochs=2, optimizer={"lr": 0.5, **optimizer})
    algorithm = build_algorithm(name, spec.algorithm_params)
    # a client without samples (3) takes no step; SCAFFOLD's c_i update divides by the step count, so not there
    clients = [2, 0, 1] if name == "scaffold" else [2, 0, 3, 1]
    sequential, together = _run(spec), _run(spec)
    for state in (sequential, together):
        algorithm.init_server(state.server)
        state.client_states.setdefault(0, {})
        if name == "scaffold":  # a returning client: its own c_i differs from the other clients' fresh zeros
            state.client_states.setdefault(0, {})["control"] = torch.linspace(-1, 1, state.server.params.numel())
            state.server.state["control"] = torch.linspace(0.5, -0.5, state.server.params.numel())
    payload = algorithm.payload(sequential.server, 2)
    expected = []
    for client in clients:
        ctx = sequential.client_context(algorithm, client, 2, lr=0.3, payload=copy.copy(payload))
        expected.append(algorithm.local_train(ctx))
    updates, contexts = packed.train_round(together, algorithm, clients, 2, 0.3, algorithm.payload(together.server, 2))
    assert [u.client_id for u in updates] == [c.client_id for c in contexts] == clients
    steps = {2: 6, 0: 4, 3: 0, 1: 2}  # 2 epochs of ⌈7/3⌉, ⌈5/3⌉, 0, ⌈2/3⌉ batches
    assert [u.num_steps for u in updates] == [c.num_steps for c in contexts] == [steps[c] for c in clients]
    for got, want in zip(updates, expected, strict=True):
        assert (got.num_samples, got.num_steps, got.buffers) == (want.num_samples, want.num_steps, {})
        torch.testing.assert_close(got.params, want.params, rtol=0, atol=ATOL)
        assert got.train_loss == pytest.approx(want.train_loss, rel=0, abs=ATOL)
    if 3 in clients:
        empty = updates[clients.index(3)]
        assert empty.train_loss == 0.0 and torch.equal(empty.params, together.server.params)
    assert not torch.equal(updates[0].params, updates[1].params)
    for client in clients:  # ``end_local`` wrote the same client state
        want, got = sequential.client_states.peek(client), together.client_states.peek(client)
        assert want.keys() == got.keys()
        for key, value in want.items():
            torch.testing.assert_close(got[key], value, rtol=0, atol=ATOL)


def test_a_round_of_no_clients_trains_nothing():
    spec = make_spec("fedavg", batch_size=3)
    assert packed.train_round(_run(spec), build_algorithm("fedavg", {}), [], 1, 0.1, {}) == ([], [])


def test_sgd_update_by_hand():
    params = torch.tensor([[1.0, -2.0], [0.5, 0.0]], dtype=D)
    grad = torch.tensor([[0.2, 0.4], [-1.0, 3.0]], dtype=D)
    buffer = torch.tensor([[1.0, 1.0], [0.0, 2.0]], dtype=D)
    spec = make_spec("fedavg", optimizer={"momentum": 0.9, "weight_decay": 0.1})
    d = grad + 0.1 * params
    m = 0.9 * buffer + d
    new, new_buffer = packed.sgd_update(params, grad, buffer, 0.5, spec)
    torch.testing.assert_close(new_buffer, m, rtol=0, atol=1e-15)
    torch.testing.assert_close(new, params - 0.5 * m, rtol=0, atol=1e-15)
    spec = make_spec("fedavg", optimizer={"momentum": 0.9, "nesterov": True})
    new, new_buffer = packed.sgd_update(params, grad, buffer, 0.5, spec)
    m = 0.9 * buffer + grad
    torch.testing.assert_close(new_buffer, m, rtol=0, atol=1e-15)
    torch.testing.assert_close(new, params - 0.5 * (grad + 0.9 * m), rtol=0, atol=1e-15)
    new, new_buffer = packed.sgd_update(params, grad, None, 0.5, make_spec("fedavg"))
    assert new_buffer is None
    torch.testing.assert_close(new, params - 0.5 * grad, rtol=0, atol=1e-15)
    new, _ = packed.sgd_update(params, grad, None, 0.5, make_spec("fedavg", optimizer={"weight_decay": 0.2}))
    torch.testing.assert_close(new, params - 0.5 * (grad + 0.2 * params), rtol=0, atol=1e-15)


def test_a_short_batch_is_padded_with_its_first_sample_and_masked():
    long = (torch.arange(6, dtype=D).reshape(3, 2), torch.tensor([0, 1, 2]))
    short = (torch.tensor([[7.0, 8.0]], dtype=D), torch.tensor([5]))
    x, y, mask = packed._stack_batches([long, short], D)
    assert x.shape == (2, 3, 2) and torch.equal(x[0], long[0])
    assert torch.equal(x[1], torch.tensor([[7.0, 8.0]] * 3, dtype=D))
    assert y.tolist() == [[0, 1, 2], [5, 5, 5]]
    assert mask.tolist() == [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]] and mask.dtype == D


def test_masked_mean_and_cross_entropy_leave_the_padding_out():
    values = torch.tensor([1.0, 2.0, 6.0, 100.0], dtype=D)
    mask = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=D)
    assert functional.masked_mean(values, mask).item() == 3.0
    logits = torch.tensor([[0.0, 0.0], [1.0, 0.0], [5.0, -5.0]], dtype=D)
    y = torch.tensor([0, 1, 1])
    mask = torch.tensor([1.0, 1.0, 0.0], dtype=D)
    by_hand = (torch.log(torch.tensor(2.0, dtype=D)) + torch.log(1 + torch.exp(torch.tensor(1.0, dtype=D)))) / 2
    torch.testing.assert_close(functional.masked_cross_entropy(logits, y, mask), by_hand, rtol=0, atol=1e-15)


def test_model_call_runs_any_function_with_a_flat_vector():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1)).to(D)
    call = packed.ModelCall(model)
    flat = torch.arange(1.0, 10.0, dtype=D)  # W1 = [[1,2],[3,4]], b1 = [5,6], W2 = [[7,8]], b2 = [9]
    x = torch.tensor([[1.0, -1.0]], dtype=D)
    hidden = torch.tensor([[1 - 2 + 5, 3 - 4 + 6]], dtype=D)
    torch.testing.assert_close(call(lambda m, v: m(v), flat, x), hidden @ torch.tensor([[7.0], [8.0]], dtype=D) + 9)
    torch.testing.assert_close(call(lambda m, v: m[0](v), flat, x), hidden)
    assert [v.shape for v in call.views(flat).values()] == [(2, 2), (2,), (1, 2), (1,)]


# ------------------------------------------------------------------------------------------ the executor decision
def _choice(algorithm="fedavg", params=None, requested="packed", device="cpu", model=None, **overrides):
    spec = make_spec(algorithm, params or {}, **overrides)
    model = LinearModel(10, (1, 8, 8)) if model is None else model
    return packed.choose_executor(
        requested, build_algorithm(algorithm, spec.algorithm_params), spec, model, torch.device(device)
    )


def test_the_decision_and_its_reason_in_words():
    assert _choice().as_dict() == {"executor": "packed", "reason": "requested"}
    assert _choice().packed and not _choice(requested="sequential").packed
    assert _choice(clients_per_round=2).packed  # two clients are already worth packing
    assert _choice(requested="auto", device="cuda").as_dict() == {
        "executor": "packed",
        "reason": "auto: CUDA, packable run",
    }
    assert _choice(requested="auto").as_dict() == {
        "executor": "sequential",
        "reason": "auto: the packed executor is used on CUDA only (slower on a CPU)",
    }
    assert _choice(requested="sequential", model=nn.Dropout(0.5)).reason == "requested"
    assert _choice(clients_per_round=1).as_dict() == {
        "executor": "sequential",
        "reason": "one client per round: nothing to pack",
    }


@pytest.mark.parametrize(
    ("algorithm", "params", "overrides", "model", "reason"),
    [
        ("fednova", {}, {}, None, "method fednova does not declare a packed local step"),
        (
            "fedavg",
            {"regularizers": [{"name": "kd", "weight": 0.1}]},
            {},
            None,
            "method fedavg carries regularizers, which the packed step does not express",
        ),
        ("fedavg", {}, {"optimizer": {"name": "adam"}}, None, "optimizer adam (the packed step implements SGD)"),
        ("fedavg", {}, {"clip_grad_norm": 1.0}, None, "gradient clipping (clip_grad_norm) is not packed"),
        (
            "fedavg",
            {},
            {},
            nn.BatchNorm1d(2),
            "model digits_mlp has buffers (BatchNorm running statistics), which are not packed",
        ),
        (
            "fedavg",
            {},
            {},
            nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)),
            "model digits_mlp has dropout, whose per-client random masks the packed step cannot reproduce",
        ),
        ("fedavg", {}, {}, nn.Linear(2, 2).requires_grad_(False), "model digits_mlp has frozen parameters"),
    ],
)
def test_unpackable_runs_fall_back_with_their_reason(algorithm, params, overrides, model, reason):
    for requested in ("packed", "auto"):
        choice = _choice(algorithm, params, requested=requested, device="cuda", model=model, **overrides)
        assert choice.as_dict() == {"executor": "sequential", "reason": f"fallback: {reason}"}


def test_a_recorded_decision_cannot_be_changed():
    choice = _choice()
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.reason = "edited"  # type: ignore[misc]
    assert choice.as_dict() == {"executor": "packed", "reason": "requested"}


def test_a_dropout_of_zero_and_one_frozen_parameter_among_many_are_judged_right():
    assert _choice(model=nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0))).packed
    partly = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    partly[1].bias.requires_grad_(False)
    assert _choice(model=partly).reason == "fallback: model digits_mlp has frozen parameters"


def test_unknown_executor_is_a_config_error_naming_the_choices():
    for name in packed.TRAINING_PATHS:
        assert packed.check_packing(name) == name
    with pytest.raises(ConfigError, match=r"^--packing 'gpu': expected one of auto, packed, sequential$"):
        packed.check_packing("gpu")
    with pytest.raises(ConfigError):
        _choice(requested="gpu")


@pytest.mark.parametrize("name", ["fedprox", "scaffold"])
def test_a_packed_round_of_one_client_is_that_clients_local_training(name, float64):
    spec = make_spec(name, {"mu": 0.5} if name == "fedprox" else {}, batch_size=3, optimizer={"lr": 0.5})
    algorithm = build_algorithm(name, spec.algorithm_params)
    sequential, together = _run(spec), _run(spec)
    for state in (sequential, together):
        algorithm.init_server(state.server)
    for client, steps in ((2, 3), (1, 1)):  # ⌈7/3⌉ batches; one short batch of 2, whose mean loss is its own
        ctx = sequential.client_context(algorithm, client, 1, lr=0.3, payload=algorithm.payload(sequential.server, 1))
        want = algorithm.local_train(ctx)
        (got,), _ = packed.train_round(together, algorithm, [client], 1, 0.3, algorithm.payload(together.server, 1))
        assert got.num_steps == want.num_steps == steps
        torch.testing.assert_close(got.params, want.params, rtol=0, atol=ATOL)
        assert got.train_loss == pytest.approx(want.train_loss, rel=0, abs=ATOL)
