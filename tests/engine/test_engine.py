"""Engine properties: FedProx(mu=0) == FedAvg, one-client FedAvg == SGD, resume, divergence."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from fedbench.checkpoint.format import load_checkpoint
from fedbench.data.federated import prepare_data
from fedbench.engine import EngineOptions, client_schedule, run
from fedbench.engine.loop import init_model
from fedbench.seeding import derive_seed, torch_generator
from fedbench.spec import RunSpec

BASE = dict(
    dataset="digits",
    model="digits_mlp",
    model_params={"hidden": 32},
    partition="dirichlet",
    partition_params={"alpha": 0.5, "min_size": 5},
    num_clients=5,
    clients_per_round=3,
    rounds=3,
    batch_size=32,
    optimizer={"lr": 0.1, "momentum": 0.5},
)


def final_params(spec, tmp_path, sink, **kwargs):
    path = tmp_path / f"{spec.spec_hash}.pt"
    result = run(spec, sink, EngineOptions(checkpoint_path=path, **kwargs))
    return result, load_checkpoint(path, spec.spec_hash, torch.device("cpu"))


def test_fedprox_with_mu_zero_reproduces_fedavg_exactly(tmp_path, sink):
    from conftest import ListSink

    fedavg = RunSpec(algorithm="fedavg", **BASE)
    fedprox = RunSpec(algorithm="fedprox", algorithm_params={"mu": 0.0}, **BASE)
    _, a = final_params(fedavg, tmp_path, sink)
    other = ListSink()
    _, b = final_params(fedprox, tmp_path, other)
    assert torch.equal(a["server"]["params"], b["server"]["params"])
    assert [r.test_acc for r in sink.records] == [r.test_acc for r in other.records]
    # and a positive mu really changes the result
    _, c = final_params(RunSpec(algorithm="fedprox", algorithm_params={"mu": 1.0}, **BASE), tmp_path, ListSink())
    assert not torch.equal(a["server"]["params"], c["server"]["params"])


def test_one_client_fedavg_equals_plain_sgd(tmp_path, sink):
    spec = RunSpec(
        **{
            **BASE,
            "partition": "iid",
            "partition_params": {},
            "num_clients": 1,
            "clients_per_round": 1,
            "optimizer": {"lr": 0.1},
            "algorithm": "fedavg",
        }
    )
    _, checkpoint = final_params(spec, tmp_path, sink)

    # The same thing written as centralised mini-batch SGD on the client's data: the same operations in the
    # same order (averaging one client with weight 1 is exact), so the same bits.
    data = prepare_data(spec, torch.device("cpu"))
    model = init_model(spec, data.num_classes, data.input_shape, torch.device("cpu"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    indices = data.client_train[0]
    for round_index in range(1, spec.rounds + 1):
        generator = torch_generator(spec.seed, "client", round_index, 0)
        order = indices[torch.randperm(len(indices), generator=generator)]
        for start in range(0, len(order), spec.batch_size):
            batch = order[start : start + spec.batch_size]
            loss = F.cross_entropy(model(data.tensors.train_x[batch]), data.tensors.train_y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    expected = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    assert torch.equal(checkpoint["server"]["params"], expected)


def test_interrupted_run_resumes_with_identical_results(tmp_path):
    from algorithm_fixtures import run_until
    from conftest import ListSink

    spec = RunSpec(algorithm="fedprox", algorithm_params={"mu": 0.1}, **{**BASE, "rounds": 4})
    straight = ListSink()
    _, reference = final_params(spec, tmp_path / "a", straight)

    path = tmp_path / "b" / "ckpt.pt"
    resumed = ListSink()
    run_until(spec, resumed, 2, EngineOptions(checkpoint_path=path))
    assert [r.round for r in resumed.records] == [1, 2]
    resumed.log_round(type(resumed.records[0])(round=3, train_loss=9.9, wall_seconds=0, bytes_up=0, bytes_down=0))
    second = run(spec, resumed, EngineOptions(checkpoint_path=path))  # the stray round 3 is truncated and redone
    assert second.status == "done" and second.info["resumed_from"] == 2
    final = load_checkpoint(path, spec.spec_hash, torch.device("cpu"))
    assert torch.equal(final["server"]["params"], reference["server"]["params"])
    assert [(r.round, r.test_acc, r.train_loss) for r in resumed.records] == [
        (r.round, r.test_acc, r.train_loss) for r in straight.records
    ]


def test_divergence_ends_the_run_with_status_and_round(sink):
    spec = RunSpec(algorithm="fedavg", **{**BASE, "optimizer": {"lr": 1e6, "momentum": 0.9}, "rounds": 5})
    result = run(spec, sink)
    assert result.status == "diverged"
    assert 1 <= result.diverged_round <= 5
    assert all(math.isfinite(r.train_loss) for r in sink.records)


def test_client_schedule_is_seeded_and_algorithm_independent():
    a = client_schedule(RunSpec(algorithm="fedavg", **BASE))
    b = client_schedule(RunSpec(algorithm="fedprox", algorithm_params={"mu": 0.5}, **BASE))
    c = client_schedule(RunSpec(algorithm="fedavg", **{**BASE, "seed": 1}))
    assert a == b and a != c
    assert all(len(set(r)) == 3 and all(0 <= k < 5 for k in r) for r in a)


def test_same_spec_is_bit_identical(tmp_path):
    from conftest import ListSink

    spec = RunSpec(algorithm="fedavg", **BASE)
    first, second = ListSink(), ListSink()
    _, a = final_params(spec, tmp_path / "a", first)
    _, b = final_params(spec, tmp_path / "b", second)
    assert torch.equal(a["server"]["params"], b["server"]["params"])


def test_personal_evaluation_of_fedavg_is_global_model_on_client_splits(sink):

    spec = RunSpec(algorithm="fedavg", **{**BASE, "eval_mode": "both", "client_test_fraction": 0.25, "rounds": 1})
    run(spec, sink)
    record = sink.records[-1]
    assert len(record.personal_per_client) == 5
    assert record.personal_mean == pytest.approx(sum(record.personal_per_client) / 5)
    assert 0.0 <= record.personal_std


def test_learning_happens_on_digits(sink):
    spec = RunSpec(algorithm="fedavg", **{**BASE, "rounds": 5, "clients_per_round": 5})
    run(spec, sink)
    assert sink.records[-1].test_acc > 0.6


def test_seed_streams_are_independent():
    assert derive_seed(0, "partition") != derive_seed(0, "sampling")
    assert derive_seed(0, "client", 1, 2) != derive_seed(0, "client", 2, 1)


def test_arrays_cache_is_an_object_that_keeps_the_last_data_set(monkeypatch):
    from fedbench.data import federated

    loads = []
    real = federated.load_arrays
    monkeypatch.setattr(federated, "load_arrays", lambda spec, *a: loads.append(spec.dataset) or real(spec, *a))
    cache = federated.ArraysCache()
    spec = RunSpec(algorithm="fedavg", **BASE)
    first = cache.load(spec)
    assert cache.load(RunSpec(algorithm="fedprox", **{**BASE, "seed": 3})) is first  # same data set: no reload
    assert cache.load(RunSpec(algorithm="fedavg", **{**BASE, "synthetic": True})) is not first
    assert loads == ["digits", "digits"]
    prepare_data(spec, torch.device("cpu"))  # no cache given: loads, and leaves the cache alone
    assert loads == ["digits", "digits", "digits"] and federated.ArraysCache().load(spec) is not first
