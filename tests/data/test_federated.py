"""The federated data of a run (fedbench/data/federated.py). Per-client test sets drawn from the global test set
(``RunSpec.client_test``; FedDr+ §2.3 class-matched sets, natural per-group sets): what the engine builds, what
personal evaluation measures on them, and the spec contract; and the cache that keeps the last data set's arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import ListSink
from fedbench.algorithms.context import load_weights
from fedbench.checkpoint.format import load_checkpoint
from fedbench.data.federated import load_arrays, partition_clients, prepare_data
from fedbench.data.partition import class_matched_test_sets
from fedbench.engine import EngineOptions, run
from fedbench.engine.loop import init_model
from fedbench.errors import ConfigError
from fedbench.seeding import numpy_rng
from fedbench.spec import RunSpec

SEG = {
    "algorithm": "fedavg",
    "dataset": "retinal",
    "dataset_params": {"image_size": 16},
    "model": "unet",
    "model_params": {"init_features": 2},
    "partition": "natural",
    "num_clients": 6,
    "clients_per_round": 6,
    "rounds": 1,
    "synthetic": True,
}


def test_label_based_partitions_and_class_matched_test_sets_are_config_errors():
    with pytest.raises(ConfigError, match="segmentation task whose labels are masks; use partition 'natural'"):
        prepare_data(RunSpec(**{**SEG, "partition": "dirichlet"}), torch.device("cpu"))
    with pytest.raises(ConfigError, match="client_test = 'class_matched' matches class labels"):
        prepare_data(RunSpec(**{**SEG, "eval_mode": "personal", "client_test": "class_matched"}), torch.device("cpu"))
    assert len(prepare_data(RunSpec(**{**SEG, "partition": "iid"}), torch.device("cpu")).client_train) == 6


CPU = torch.device("cpu")


BASE = {
    "algorithm": "fedavg",
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 32},
    "partition": "shards",
    "partition_params": {"shards_per_client": 2},
    "num_clients": 5,
    "clients_per_round": 5,
    "rounds": 2,
    "batch_size": 32,
    "optimizer": {"lr": 0.1},
    "eval_mode": "personal",
    "client_test": "class_matched",
}


def class_counts(labels: torch.Tensor) -> np.ndarray:
    return torch.bincount(labels, minlength=10).numpy()


def test_disjoint_class_matched_sets_share_each_class_in_proportion_to_training_counts():
    # FedDr+ sharding (rand_set_all): the clients' test sets partition the test samples of the classes in use
    data = prepare_data(RunSpec(**BASE), CPU)
    assert data.client_test_from_test
    train = np.stack([class_counts(data.tensors.train_y[i]) for i in data.client_train])
    test = np.stack([class_counts(data.tensors.test_y[i]) for i in data.client_test])
    assert np.all(test[train == 0] == 0), "only the client's training classes"
    assert (train > 0).sum(1).max() <= 2 and test.sum() > 0
    per_class = class_counts(data.tensors.test_y)
    expected = per_class * train / np.maximum(train.sum(0), 1)
    assert np.all(np.abs(test - expected) <= 1), "shares of each class follow the training counts"
    joined = torch.cat(data.client_test)
    assert len(joined.unique()) == len(joined) == int(per_class[train.sum(0) > 0].sum())


def test_overlapping_class_matched_sets_take_the_training_count_capped():
    # FedDr+ LDA (lda_test): n_{i,k} test samples of every class k the client holds, at most cap_per_class
    spec = RunSpec(
        **{
            **BASE,
            "partition": "dirichlet",
            "partition_params": {"alpha": 0.3, "min_size": 10},
            "client_test_params": {"disjoint": False, "cap_per_class": 20},
        }
    )
    data = prepare_data(spec, CPU)
    available = class_counts(data.tensors.test_y)
    for train_idx, test_idx in zip(data.client_train, data.client_test):
        train, test = class_counts(data.tensors.train_y[train_idx]), class_counts(data.tensors.test_y[test_idx])
        assert np.array_equal(test, np.minimum(np.minimum(train, available), 20))
        assert len(test_idx.unique()) == len(test_idx)


def test_natural_test_sets_give_each_client_its_groups_test_samples():
    spec = RunSpec(
        **{
            **BASE,
            "dataset": "digits5",
            "model_params": {"hidden": 8},
            "partition": "natural",
            "partition_params": {},
            "client_test": "natural",
            "synthetic": True,
        }
    )
    arrays = load_arrays(spec)
    data = prepare_data(spec, CPU)
    for client, (train_idx, test_idx) in enumerate(zip(data.client_train, data.client_test)):
        group = np.unique(arrays.train_groups[train_idx.numpy()])
        assert group.tolist() == [client]
        assert np.array_equal(test_idx.numpy(), np.flatnonzero(arrays.test_groups == client))
    with pytest.raises(ConfigError, match="holds samples of"):
        prepare_data(RunSpec(**{**spec.model_dump(), "partition": "iid", "partition_params": {}}), CPU)
    with pytest.raises(ConfigError, match="needs a dataset with natural groups"):
        prepare_data(RunSpec(**{**BASE, "client_test": "natural"}), CPU)


def test_personal_accuracy_on_class_matched_sets_equals_an_independent_computation(tmp_path):
    spec = RunSpec(**BASE)
    sink, path = ListSink(), tmp_path / "run.pt"
    assert run(spec, sink, EngineOptions(checkpoint_path=path)).status == "done"
    server = load_checkpoint(path, spec.spec_hash, CPU)["server"]
    arrays = load_arrays(spec)
    test_sets = class_matched_test_sets(
        partition_clients(spec, arrays), arrays.train_y, arrays.test_y, numpy_rng(spec.seed, "client-test")
    )
    data = prepare_data(spec, CPU)
    model = init_model(spec, data.num_classes, data.input_shape, CPU)
    load_weights(model, server["params"], server["buffers"])
    model.eval()
    expected = []
    with torch.no_grad():
        for indices in test_sets:
            logits = model(data.tensors.test_x[torch.from_numpy(indices)])
            expected.append(float((logits.argmax(1).numpy() == arrays.test_y[indices]).mean()))
    last = sink.records[-1]
    assert last.personal_per_client == pytest.approx(expected, abs=1e-12)
    sizes = [len(t) for t in test_sets]
    assert last.personal_weighted_mean == pytest.approx(np.average(expected, weights=sizes))


def test_finetune_evaluates_on_the_class_matched_sets(tmp_path):
    sink = ListSink()
    spec = RunSpec(**{**BASE, "eval_mode": "both", "finetune": {"epochs": 0, "start": "final"}})
    assert run(spec, sink).status == "done"
    last = sink.records[-1]
    assert last.finetune_per_client == last.personal_per_client  # zero epochs: the global model on the same sets


def test_client_test_keys_are_hash_neutral_at_split_and_the_new_keys_validate():
    old = {
        "algorithm": "fedavg",
        "dataset": "digits",
        "model": "digits_mlp",
        "eval_mode": "personal",
        "client_test_fraction": 0.2,
        "client_val_fraction": 0.1,
        "eval_metrics": ["auc"],
    }
    spec = RunSpec(**old)
    assert '"client_test"' not in spec.canonical_json() and '"client_test_params"' not in spec.canonical_json()
    assert RunSpec(**{**old, "client_test": "split", "client_test_params": {}}).spec_hash == spec.spec_hash
    new = RunSpec(**BASE)
    assert '"client_test":"class_matched"' in new.canonical_json()
    assert RunSpec(**{**BASE, "client_test_params": {"disjoint": False}}).spec_hash != new.spec_hash
    with pytest.raises(ValueError, match="set client_test_fraction = 0"):
        RunSpec(**{**BASE, "client_test_fraction": 0.2})
    with pytest.raises(ValueError, match="has no parameter 'bogus'; known: disjoint, cap_per_class"):
        RunSpec(**{**BASE, "client_test_params": {"bogus": 1}})
    with pytest.raises(ValueError, match="needs client_test_fraction > 0"):
        RunSpec(**{**BASE, "client_test": "split"})


def test_cli_reports_a_client_test_source_the_data_cannot_give(tmp_path, write_recipe):
    from typer.testing import CliRunner

    from fedbench.cli import app

    recipe = write_recipe(
        """
paper = "testpaper"
name = "natural"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
num_clients = 2
clients_per_round = 2
rounds = 1
eval_mode = "personal"
client_test = "natural"

[matrix]
algorithm = ["fedavg"]

[[tables]]
name = "t"
rows = ["algorithm"]
columns = []
figure = "final"
""",
        "natural.toml",
    )
    result = CliRunner().invoke(
        app, ["run", str(recipe), "--registry", f"sqlite:///{tmp_path / 'r.db'}", "--device", "cpu"]
    )
    assert result.exit_code == 2
    assert "client_test = 'natural' needs a dataset with natural groups" in result.output


DIRICHLET = dict(
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


def test_arrays_cache_is_an_object_that_keeps_the_last_data_set(monkeypatch):
    from fedbench.data import federated

    loads = []
    real = federated.load_arrays
    monkeypatch.setattr(federated, "load_arrays", lambda spec, *a: loads.append(spec.dataset) or real(spec, *a))
    cache = federated.ArraysCache()
    spec = RunSpec(algorithm="fedavg", **DIRICHLET)
    first = cache.load(spec)
    assert cache.load(RunSpec(algorithm="fedprox", **{**DIRICHLET, "seed": 3})) is first  # same data set: no reload
    assert cache.load(RunSpec(algorithm="fedavg", **{**DIRICHLET, "synthetic": True})) is not first
    assert loads == ["digits", "digits"]
    prepare_data(spec, torch.device("cpu"))  # no cache given: loads, and leaves the cache alone
    assert loads == ["digits", "digits", "digits"] and federated.ArraysCache().load(spec) is not first


def test_class_ordered_client_splits_are_personalizedfl_s_cut_of_each_client():
    """client_split = "class_ordered": each client's train / test / validation splits are class_ordered_split of its
    partition (every sample of the client in exactly one), where "random" cuts one shuffle."""
    from fedbench.data.partition import class_ordered_split

    setup = {
        "algorithm": "fedavg",
        "dataset": "digits",
        "model": "digits_mlp",
        "num_clients": 4,
        "clients_per_round": 4,
        "rounds": 1,
        "partition": "dirichlet_pfl",
        "partition_params": {"alpha": 0.5, "equal_slices": True},
        "eval_mode": "personal",
        "client_test_fraction": 0.3,
        "client_val_fraction": 0.3,
    }
    spec = RunSpec(**{**setup, "client_split": "class_ordered"})
    data = prepare_data(spec, torch.device("cpu"))
    arrays = load_arrays(spec)
    parts = partition_clients(spec, arrays)
    assert data.info["client_sizes"] == [int(len(arrays.train_y) / 4)] * 4  # equal slices
    for client, part in enumerate(parts):
        expected = class_ordered_split(part, arrays.train_y, 0.3, 0.3)
        got = (data.client_train[client], data.client_test[client], data.client_val[client])
        assert [g.tolist() for g in got] == [e.tolist() for e in expected]
        assert sorted(np.concatenate(expected).tolist()) == part.tolist()
    shuffled = prepare_data(RunSpec(**setup), torch.device("cpu"))
    assert [t.tolist() for t in shuffled.client_test] != [t.tolist() for t in data.client_test]
