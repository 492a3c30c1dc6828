"""Engine runs of the personalised methods on the digits data (a few rounds, four clients): the set-ups and the
final checkpoint a test inspects."""

from __future__ import annotations

import torch

from conftest import ListSink
from fedbench.checkpoint.format import load_checkpoint
from fedbench.data.federated import prepare_data
from fedbench.engine import EngineOptions, run
from fedbench.engine.loop import init_model
from fedbench.spec import RunSpec

DEVICE = torch.device("cpu")


BASE = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 32},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 20},
    "num_clients": 4,
    "clients_per_round": 4,
    "rounds": 2,
    "batch_size": 32,
    "optimizer": {"lr": 0.1},
    "eval_mode": "both",
    "client_test_fraction": 0.2,
}


# FedBN needs BatchNorm: LG-Mix's Digits model (fine on 1×8×8 input), a few steps only.
BN = {
    **BASE,
    "model": "fedbn_digit_cnn",
    "model_params": {},
    "num_clients": 3,
    "clients_per_round": 3,
    "local_steps": 2,
    "batch_size": 16,
}


def train_from(base, tmp_path, sink=None, **overrides):
    """The spec ``base`` with ``overrides``, trained to the end: the spec, its round records and final checkpoint."""
    spec = RunSpec(**{**base, **overrides})
    path = tmp_path / f"{spec.spec_hash}.pt"
    sink = sink if sink is not None else ListSink()
    result = run(spec, sink, EngineOptions(checkpoint_path=path))
    assert result.status == "done", result.message
    return spec, sink.records, load_checkpoint(path, spec.spec_hash, DEVICE)


def train(tmp_path, sink=None, **overrides):
    """``train_from`` the four-client ``BASE``."""
    return train_from(BASE, tmp_path, sink, **overrides)


def initial_weights(spec):
    data = prepare_data(spec, DEVICE)
    model = init_model(spec, data.num_classes, data.input_shape, DEVICE)
    return data, model, torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def flat_mask(model, names):
    names = set(names)
    return torch.cat([torch.full((p.numel(),), n in names) for n, p in model.named_parameters()])
