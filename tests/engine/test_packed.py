"""The packed executor (``fedbench.engine.packed``): clients trained at once with stacked parameters give the
sequential path's results up to floating-point summation order, and runs it cannot express fall back with a reason.

Compared in float64 (the ``float64`` fixture): the two paths do the same arithmetic in another order (a batched
convolution, the proximal term over one flat vector instead of per tensor, a masked mean), so they differ by a few
float64 roundings amplified by the few SGD steps of the run: ``F64_ATOL`` (conftest) bounds that. A wrong step —
a dropped batch, a step too many, momentum not reset, a state read from the wrong client, the padding of a short
batch counted in the mean — moves the weights by far more (the ``*_detects_*`` tests check that it does).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.algorithms import build_algorithm, functional
from fedbench.engine import packed
from fedbench.engine.loop import init_model
from tests.algorithm_fixtures import make_spec, train
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
    from fedbench.algorithms.scaffold import Scaffold

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
    return packed.choose_executor(
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
    assert choice.executor == "sequential"
    assert reason in choice.reason


def test_a_subclass_does_not_inherit_the_packed_declaration():
    from fedbench.algorithms.fedavg import FedAvg

    class Changed(FedAvg):  # e.g. a method that overrides the local step
        def loss(self, ctx, x, y, logits):
            return super().loss(ctx, x, y, logits) * 2

    assert packed.declares_packed_step(FedAvg(FedAvg.Params()))
    assert not packed.declares_packed_step(Changed(FedAvg.Params()))


def test_unknown_executor_is_a_user_error():
    from fedbench.errors import FedbenchError

    with pytest.raises(FedbenchError, match="--packing 'gpu'"):
        packed.check_packing("gpu")


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


def test_bad_executor_exits_2_with_one_line(write_recipe, registry_url):
    from typer.testing import CliRunner

    from fedbench.cli import app

    result = CliRunner().invoke(app, ["run", str(write_recipe()), "--packing", "gpu", "--registry", registry_url])
    assert result.exit_code == 2
    assert "--packing 'gpu'" in result.output and len(result.output.strip().splitlines()) == 1
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()  # nothing registered


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs in a GPU session)")
@pytest.mark.parametrize("case", ["fedtrip", "moon_pre_activation", "scaffold"])
def test_packed_equals_sequential_on_cuda(case, float64, tmp_path):
    """The same comparison on a GPU: vmapped CUDA kernels against the sequential CUDA path (float64)."""
    spec = _spec(case)
    sequential = train(spec, tmp_path, "sequential.pt", packing="sequential", device="cuda")
    together = train(spec, tmp_path, "packed.pt", packing="packed", device="cuda")
    assert together[0].settings["packing"]["executor"] == "packed"
    _assert_same_run(sequential, together)
