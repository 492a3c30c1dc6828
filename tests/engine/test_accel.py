"""CUDA speed switches (``fedbench.engine.accel``) checked on the CPU: channels-last leaves a run's result as it is up
to rounding (float64), a CPU run gets none of the switches, and precision is a hash-neutral spec field."""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch

from fedbench.algorithms import functional
from fedbench.engine import accel
from fedbench.engine.accel import Acceleration
from tests.algorithm_fixtures import make_spec, train
from tests.conftest import F64_ATOL


def test_a_cpu_run_gets_no_switch_and_cuda_gets_the_fast_ones():
    assert Acceleration.for_device(torch.device("cpu"), fast=True, compile=True) == Acceleration()
    cuda = Acceleration.for_device(torch.device("cuda:1"))
    assert cuda == Acceleration(channels_last=True, fused_optimizer=True, compile=False)
    assert accel.optimizer_options(cuda, torch.device("cuda:1")) == {"fused": True}
    assert accel.optimizer_options(cuda, torch.device("cpu")) == {}
    assert Acceleration.for_device(torch.device("cuda"), fast=False) == Acceleration()


def test_flat_parameters_of_a_channels_last_model_are_the_nchw_vector():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(), torch.nn.LazyLinear(4))
    model(torch.zeros(1, 3, 6, 6))
    plain = torch.nn.utils.parameters_to_vector(model.parameters())
    model = model.to(memory_format=torch.channels_last)
    assert not model[0].weight.is_contiguous()
    assert torch.equal(functional.flat_parameters(model.parameters()), plain)


def test_channels_last_run_equals_the_plain_run(float64, tmp_path):
    spec = make_spec(
        "scaffold",
        {},
        model="digits_cnn",
        model_params={"width": 4, "hidden": 16},
        num_clients=4,
        clients_per_round=2,
        rounds=2,
        optimizer={"lr": 0.05, "momentum": 0.9},
    )
    plain = train(spec, tmp_path, "plain.pt")
    nhwc = train(spec, tmp_path, "nhwc.pt", acceleration=Acceleration(channels_last=True))
    assert nhwc[0].settings["acceleration"]["channels_last"] and not plain[0].settings["acceleration"]["channels_last"]
    torch.testing.assert_close(plain[2]["server"]["params"], nhwc[2]["server"]["params"], rtol=0, atol=F64_ATOL)
    for client, state in plain[2]["client_states"].items():
        torch.testing.assert_close(state["control"], nhwc[2]["client_states"][client]["control"], rtol=0, atol=F64_ATOL)


def test_precision_is_a_hash_neutral_spec_field():
    fp32 = make_spec("fedavg", {})
    assert fp32.precision == "fp32"
    assert "precision" not in fp32.canonical_json()  # existing specs keep their hashes
    assert make_spec("fedavg", {}, precision="tf32").spec_hash != fp32.spec_hash


def test_precision_sets_the_cuda_flags_and_nothing_on_a_cpu():
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    before = (matmul.fp32_precision, conv.fp32_precision)
    try:
        assert accel.set_precision("tf32", torch.device("cpu")) == {"precision": "tf32", "tf32": False}
        assert (matmul.fp32_precision, conv.fp32_precision) == before
        assert accel.set_precision("tf32", torch.device("cuda")) == {"precision": "tf32", "tf32": True}
        assert (matmul.fp32_precision, conv.fp32_precision) == ("tf32", "tf32")
        accel.set_precision("fp32", torch.device("cuda"))
        assert (matmul.fp32_precision, conv.fp32_precision) == ("ieee", "ieee")
    finally:
        matmul.fp32_precision, conv.fp32_precision = before


def test_cpu_provenance_records_the_settings(tmp_path):
    result = train(make_spec("fedavg", {}, rounds=1), tmp_path)[0]
    assert result.settings == {
        # the default training path is auto (``Settings.packing``): sequential on a CPU
        "packing": {
            "executor": "sequential",
            "reason": "auto: the packed executor is used on CUDA only (slower on a CPU)",
        },
        "acceleration": {"channels_last": False, "fused_optimizer": False, "compile": False},
        "precision": "fp32",
        "tf32": False,
    }


def test_the_switches_are_an_immutable_value():
    fast = Acceleration(channels_last=True)
    assert {fast, Acceleration(channels_last=True)} == {fast}  # hashable: equal settings are one value
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.compile = True  # type: ignore[misc]


def test_channels_last_applies_only_when_asked_and_only_to_conv_models():
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    assert accel.prepare_model(conv, Acceleration()).get_submodule("0").weight.is_contiguous()
    nhwc = accel.prepare_model(conv, Acceleration(channels_last=True)).get_submodule("0").weight
    assert nhwc.is_contiguous(memory_format=torch.channels_last) and not nhwc.is_contiguous()
    mlp = torch.nn.Sequential(torch.nn.Linear(3, 4))
    assert accel.prepare_model(mlp, Acceleration(channels_last=True)).get_submodule("0").weight.is_contiguous()


def test_precision_sets_the_legacy_flags_of_a_pytorch_before_2_9(monkeypatch):
    """PyTorch < 2.9 has no ``fp32_precision``: the legacy ``allow_tf32`` flags carry the setting."""
    matmul, cudnn = types.SimpleNamespace(allow_tf32=None), types.SimpleNamespace(allow_tf32=None)
    monkeypatch.setattr(torch.backends.cuda, "matmul", matmul)
    monkeypatch.setattr(torch.backends, "cudnn", cudnn)
    assert accel.set_precision("tf32", torch.device("cuda")) == {"precision": "tf32", "tf32": True}
    assert (matmul.allow_tf32, cudnn.allow_tf32) == (True, True)
    accel.set_precision("fp32", torch.device("cuda"))
    assert (matmul.allow_tf32, cudnn.allow_tf32) == (False, False)
