"""The packed training path (``fedbench.engine.packed``): clients trained at once with stacked parameters give the
sequential path's results up to floating-point summation order, and runs it cannot express fall back with a reason.

Compared in float64 (the ``float64`` fixture): the two paths do the same arithmetic in another order (a batched
convolution, the proximal term over one flat vector instead of per tensor, a masked mean), so they differ by a few
float64 roundings amplified by the few SGD steps of the run: ``F64_ATOL`` (conftest) bounds that. A wrong step —
a dropped batch, a step too many, momentum not reset, a state read from the wrong client, the padding of a short
batch counted in the mean — moves the weights by far more (the ``*_detects_*`` tests check that it does).

On tiny problems: one packed round against the same clients trained one after another by the methods' own
``local_train`` (unequal client sizes: unequal step counts and short last batches; a returning SCAFFOLD client with
its own state; a client without samples), the SGD update written out by hand, the padding of a short batch and its
masked mean, the model call on a flat vector, and the training-path decision with the reason a user reads.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from fedbench.algorithms import build_algorithm, functional
from fedbench.algorithms.context import ServerState, SpareModels
from fedbench.data.federated import FederatedData
from fedbench.data.store import TensorData
from fedbench.engine import packed
from fedbench.engine.accel import Acceleration
from fedbench.engine.loop import init_model
from fedbench.engine.state import RunState
from fedbench.errors import ConfigError
from fedbench.settings import Packing, Settings
from tests.algorithm_fixtures import LinearModel, make_spec, train
from tests.conftest import F64_ATOL

# (method, params, overrides): momentum, weight decay and Nesterov are spread over the methods
CASES = {
    "fedavg": ({}, {"optimizer": {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3}}),
    "fedprox": ({"mu": 0.1}, {"optimizer": {"lr": 0.05, "momentum": 0.9, "nesterov": True}}),
    "fedtrip": ({"mu": 0.4}, {"optimizer": {"lr": 0.05, "momentum": 0.9}}),
    # μ/E with E = 2 epochs; μ = 1 with E = 1 (the scaling then leaves μ as it is)
    "fedtrip_epoch_scaled": (
        {"mu": 0.4, "epoch_scaled": True},
        {"algorithm": "fedtrip", "local_epochs": 2, "optimizer": {"lr": 0.05}},
    ),
    "fedtrip_mu_one": ({"mu": 1.0, "epoch_scaled": True}, {"algorithm": "fedtrip", "optimizer": {"lr": 0.05}}),
    "scaffold": ({}, {"optimizer": {"lr": 0.05, "momentum": 0.5}}),
    "feddyn": ({"alpha": 0.1}, {"optimizer": {"lr": 0.05}}),
    "fedlc": ({"tau": 1.0}, {"optimizer": {"lr": 0.05, "momentum": 0.9}}),
    "moon": ({"mu": 1.0, "tau": 0.5}, {"optimizer": {"lr": 0.05, "momentum": 0.9}}),
    "moon_pre_activation": (
        {"mu": 1.0, "tau": 0.5, "representation": "pre_activation"},
        {"algorithm": "moon", "optimizer": {"lr": 0.05, "momentum": 0.9}},
    ),
}


def _spec(case: str, **extra):
    params, overrides = CASES[case]
    overrides = {**overrides, **extra}
    algorithm = overrides.pop("algorithm", case)
    # Dirichlet(0.3) over 5 clients: unequal client sizes, so unequal step counts and short last batches;
    # 3 of 5 clients per round over 3 rounds: some clients return, with their state, others start fresh.
    setup = dict(
        num_clients=5, clients_per_round=3, rounds=3, batch_size=32, partition_params={"alpha": 0.3, "min_size": 5}
    )
    setup.update(overrides)
    return make_spec(algorithm, params, **setup)


def _assert_same_run(a, b):
    (result_a, sink_a, final_a), (result_b, sink_b, final_b) = a, b
    assert result_a.status == result_b.status == "done"
    torch.testing.assert_close(final_a["server"]["params"], final_b["server"]["params"], rtol=0, atol=F64_ATOL)
    for key, value in final_a["server"]["state"].items():
        if torch.is_tensor(value):
            torch.testing.assert_close(value, final_b["server"]["state"][key], rtol=0, atol=F64_ATOL)
    assert final_a["client_states"].keys() == final_b["client_states"].keys()
    for client, state in final_a["client_states"].items():
        assert state.keys() == final_b["client_states"][client].keys()
        for key, value in state.items():
            other = final_b["client_states"][client][key]
            if torch.is_tensor(value) and value.is_floating_point():
                torch.testing.assert_close(value, other, rtol=0, atol=F64_ATOL)
            elif torch.is_tensor(value):
                assert torch.equal(value, other)
    for ra, rb in zip(sink_a.records, sink_b.records, strict=True):
        assert ra.train_loss == pytest.approx(rb.train_loss, rel=0, abs=F64_ATOL)
        assert ra.test_loss == pytest.approx(rb.test_loss, rel=0, abs=F64_ATOL)


@pytest.mark.parametrize("case", sorted(CASES))
def test_packed_clients_equal_sequential_clients(case, float64, tmp_path):
    spec = _spec(case)
    sequential = train(spec, tmp_path, "sequential.pt", packing="sequential")
    together = train(spec, tmp_path, "packed.pt", packing="packed")
    assert sequential[0].settings["packing"]["executor"] == "sequential"
    assert together[0].settings["packing"] == {"executor": "packed", "reason": "requested"}
    _assert_same_run(sequential, together)


@pytest.mark.parametrize(
    ("case", "model", "extra"),
    [
        # FedTrip's 3-conv LeNet-5 (its ``layers.Conv2d`` takes PyTorch's convolution under vmap), with Table IV
        # EMNIST's augmentation: the packed clients draw the same augmented batches from their own streams
        (
            "fedtrip",
            "fedtrip_cnn",
            {
                "dataset": "mnist",
                "synthetic": True,
                "augmentation": {"horizontal_flip": True, "affine": {"degrees": 10, "translate": [0.2, 0.2]}},
            },
        ),
        ("scaffold", "digits_cnn", {"model_params": {"width": 4, "hidden": 16}}),
    ],
)
def test_packed_conv_models_equal_sequential(case, model, extra, float64, tmp_path):
    # one round of 3 of 10 clients keeps the float64 convolutions quick; the rounds with client state are above
    spec = _spec(case, model=model, **{"model_params": {}, "rounds": 1, "num_clients": 10, **extra})
    _assert_same_run(
        train(spec, tmp_path, "sequential.pt", packing="sequential"),
        train(spec, tmp_path, "packed.pt", packing="packed"),
    )


def test_equality_test_detects_padding_counted_in_the_mean(float64, tmp_path, monkeypatch):
    """The runs above have short last batches: counting their padding in the mean is caught."""
    spec = _spec("fedavg")
    sequential = train(spec, tmp_path, "sequential.pt", packing="sequential")
    monkeypatch.setattr(functional, "masked_mean", lambda values, mask: values.mean())
    wrong = train(spec, tmp_path, "packed.pt", packing="packed")
    with pytest.raises(AssertionError):
        _assert_same_run(sequential, wrong)


def test_equality_test_detects_a_client_state_not_read(float64, tmp_path, monkeypatch):
    """SCAFFOLD's c_i of a returning client enters its correction; leaving it out is caught."""
    from fedbench.algorithms.methods.scaffold import Scaffold

    spec = _spec("scaffold")
    sequential = train(spec, tmp_path, "sequential.pt", packing="sequential")
    original = Scaffold.packed_inputs

    def without_own_control(self, ctx):
        original(self, ctx)  # creates c_i as before
        return {"correction": ctx.payload["control"]}

    monkeypatch.setattr(Scaffold, "packed_inputs", without_own_control)
    wrong = train(spec, tmp_path, "packed.pt", packing="packed")
    with pytest.raises(AssertionError):
        _assert_same_run(sequential, wrong)


# ------------------------------------------------------------------------------------------ the fallback decision
def _choice(algorithm: str, params=None, requested="packed", device="cpu", **overrides):
    spec = make_spec(algorithm, params or {}, **overrides)
    model = init_model(spec, 10, (1, 8, 8), torch.device("cpu"))
    return packed.choose_training_path(
        requested, build_algorithm(algorithm, spec.algorithm_params), spec, model, torch.device(device)
    )


def test_packable_run_is_packed_when_requested_and_on_cuda_under_auto():
    assert _choice("fedavg").packed
    assert _choice("fedavg", requested="auto", device="cuda").packed
    auto_cpu = _choice("fedavg", requested="auto")
    assert not auto_cpu.packed and "CUDA only" in auto_cpu.reason
    assert _choice("fedavg", requested="sequential").as_dict() == {"executor": "sequential", "reason": "requested"}


@pytest.mark.parametrize(
    ("algorithm", "params", "overrides", "reason"),
    [
        ("fednova", {}, {}, "does not declare a packed local step"),
        ("ditto", {}, {}, "does not declare a packed local step"),
        ("fedavg", {}, {"model": "mlp", "model_params": {"batch_norm": True}}, "BatchNorm"),
        ("fedavg", {"regularizers": [{"name": "kd", "weight": 0.1}]}, {}, "regularizers"),
        ("fedavg", {}, {"optimizer": {"name": "adam", "lr": 0.001}}, "optimizer adam"),
        ("fedavg", {}, {"clip_grad_norm": 1.0}, "clipping"),
        ("fedavg", {}, {"clients_per_round": 1}, "nothing to pack"),
    ],
)
def test_unpackable_runs_fall_back_with_a_reason(algorithm, params, overrides, reason):
    choice = _choice(algorithm, params, **overrides)
    assert choice.path == "sequential"
    assert reason in choice.reason


def test_a_subclass_does_not_inherit_the_packed_declaration():
    from fedbench.algorithms.methods.fedavg import FedAvg

    class Changed(FedAvg):  # e.g. a method that overrides the local step
        def loss(self, ctx, x, y, logits):
            return super().loss(ctx, x, y, logits) * 2

    assert packed.declares_packed_step(FedAvg(FedAvg.Params()))
    assert not packed.declares_packed_step(Changed(FedAvg.Params()))


def test_an_unknown_training_path_is_a_user_error():
    from fedbench.errors import FedbenchError
    from fedbench.settings import Settings

    with pytest.raises(FedbenchError, match="--packing 'gpu'"):
        Settings(packing="gpu")


# ------------------------------------------------------------------------------------------ through the CLI
def test_run_option_selects_the_path_records_it_and_keeps_the_spec_hash(write_recipe, registry_url, tmp_path):
    import json

    from typer.testing import CliRunner

    from fedbench.cli import app

    runner = CliRunner()
    recipe = write_recipe()
    other = f"sqlite:///{tmp_path / 'other.db'}"
    common = ["run", str(recipe), "--scale", "smoke", "--only", "algorithm=fedprox"]
    assert runner.invoke(app, [*common, "--packing", "packed", "--registry", registry_url]).exit_code == 0
    assert runner.invoke(app, [*common, "--packing", "sequential", "--registry", other]).exit_code == 0
    packed_run = json.loads(runner.invoke(app, ["runs", "--registry", registry_url, "--json"]).stdout)[0]
    sequential_run = json.loads(runner.invoke(app, ["runs", "--registry", other, "--json"]).stdout)[0]
    assert packed_run["spec_hash"] == sequential_run["spec_hash"]
    assert packed_run["provenance"]["packing"] == {"executor": "packed", "reason": "requested"}
    assert sequential_run["provenance"]["packing"] == {"executor": "sequential", "reason": "requested"}


def test_a_bad_training_path_exits_2_with_one_line(write_recipe, registry_url, monkeypatch, capsys):
    import sys

    from fedbench.cli import main

    monkeypatch.setattr(
        sys, "argv", ["fedbench", "run", str(write_recipe()), "--packing", "gpu", "--registry", registry_url]
    )
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert "--packing" in err and "'gpu'" in err and len(err.strip().splitlines()) == 1
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()  # nothing registered


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs in a GPU session)")
@pytest.mark.parametrize("case", ["fedtrip", "moon_pre_activation", "scaffold"])
def test_packed_equals_sequential_on_cuda(case, float64, tmp_path):
    """The same comparison on a GPU: vmapped CUDA kernels against the sequential CUDA path (float64)."""
    spec = _spec(case)
    plain = Acceleration()  # the two paths alone: no fused optimizer or channels-last for the sequential one
    sequential = train(spec, tmp_path, "sequential.pt", packing="sequential", device="cuda", acceleration=plain)
    together = train(spec, tmp_path, "packed.pt", packing="packed", device="cuda", acceleration=plain)
    assert together[0].settings["packing"]["executor"] == "packed"
    _assert_same_run(sequential, together)


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


ROUND_CASES = {
    "fedavg": ({}, {"momentum": 0.9, "weight_decay": 0.1, "nesterov": True}),
    "fedavg-plain": ({}, {}),
    "fedprox": ({"mu": 0.5}, {"momentum": 0.5, "weight_decay": 0.05}),
    "scaffold": ({}, {"momentum": 0.5}),
}


@pytest.mark.parametrize("case", sorted(ROUND_CASES))
def test_a_packed_round_equals_the_clients_trained_one_after_another(case, float64):
    params, optimizer = ROUND_CASES[case]
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


# ------------------------------------------------------------------------------------------ the training path decision
def _decision(algorithm="fedavg", params=None, requested="packed", device="cpu", model=None, **overrides):
    spec = make_spec(algorithm, params or {}, **overrides)
    model = LinearModel(10, (1, 8, 8)) if model is None else model
    return packed.choose_training_path(
        requested, build_algorithm(algorithm, spec.algorithm_params), spec, model, torch.device(device)
    )


def test_the_decision_and_its_reason_in_words():
    assert _decision().as_dict() == {"executor": "packed", "reason": "requested"}
    assert _decision().packed and not _decision(requested="sequential").packed
    assert _decision(clients_per_round=2).packed  # two clients are already worth packing
    assert _decision(requested="auto", device="cuda").as_dict() == {
        "executor": "packed",
        "reason": "auto: CUDA, packable run",
    }
    assert _decision(requested="auto").as_dict() == {
        "executor": "sequential",
        "reason": "auto: the packed executor is used on CUDA only (slower on a CPU)",
    }
    assert _decision(requested="sequential", model=nn.Dropout(0.5)).reason == "requested"
    assert _decision(clients_per_round=1).as_dict() == {
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
        choice = _decision(algorithm, params, requested=requested, device="cuda", model=model, **overrides)
        assert choice.as_dict() == {"executor": "sequential", "reason": f"fallback: {reason}"}


def test_a_recorded_decision_cannot_be_changed():
    choice = _decision()
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.reason = "edited"  # type: ignore[misc]
    assert choice.as_dict() == {"executor": "packed", "reason": "requested"}


def test_a_dropout_of_zero_and_one_frozen_parameter_among_many_are_judged_right():
    assert _decision(model=nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0))).packed
    partly = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    partly[1].bias.requires_grad_(False)
    assert _decision(model=partly).reason == "fallback: model digits_mlp has frozen parameters"


def test_an_unknown_training_path_is_a_config_error_naming_the_choices():
    for name in ("auto", "packed", "sequential"):
        assert Settings(packing=name).packing == Packing(name)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^--packing 'gpu': expected one of auto, packed, sequential$"):
        Settings(packing="gpu")  # type: ignore[arg-type]


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
