"""The ``feature_snapshot`` diagnostic (``fedbench.engine.diagnostics.snapshots``): the features of a fixed sample of
test points, of the round's global model and of client 0's local model, as float16 bytes. The sample is the same every
round and for every method; the stored values are the models' float32 features to within float16's precision; the size
is bounded; a round client 0 did not train in says so; and recording it leaves training bit for bit as it was."""

from __future__ import annotations

import base64

import numpy as np
import pytest
import torch

from conftest import ListSink
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import load_weights
from fedbench.engine import EngineOptions, run
from fedbench.engine.diagnostics import check_diagnostics
from fedbench.engine.diagnostics.snapshots import (
    MAX_VALUES,
    SAMPLE_SIZE,
    SNAPSHOT_CLIENT,
    feature_snapshot,
    sample_order,
)
from fedbench.engine.loop import client_schedule, init_model, set_up, train
from fedbench.errors import ConfigError
from fedbench.execution.contract import check_method, contract_spec
from fedbench.seeding import numpy_rng

DIGITS_TEST = 360  # scikit-learn's digits: the test split the contract setting evaluates on


def decode(value: dict, key: str) -> np.ndarray:
    raw = base64.b64decode(value[key])
    return np.frombuffer(raw, dtype="<f2").reshape(value["shape"]).astype(np.float32)


def snapshots(spec) -> dict[int, dict]:
    sink = ListSink()
    assert run(spec, sink, EngineOptions()).status == "done"
    return {r.round: r.diagnostics["feature_snapshot"] for r in sink.records if r.diagnostics}


def test_the_sample_is_the_same_every_round_and_for_every_method_and_only_the_seed_moves_it():
    found = {
        name: snapshots(contract_spec(name, rounds=2, diagnostics=["feature_snapshot"]))
        for name in ("fedavg", "scaffold")
    }
    values = [value for by_round in found.values() for value in by_round.values()]
    assert len(values) == 4
    points = values[0]["points"]
    assert len(points) == min(SAMPLE_SIZE, DIGITS_TEST) and len(set(points)) == len(points)
    assert all(v["points"] == points and v["labels"] == values[0]["labels"] for v in values)
    assert points == sample_order(contract_spec("fedavg").seed, DIGITS_TEST)[: len(points)].tolist()
    # drawn from its own stream, the one the module names: the snapshots a registry holds keep their points
    stream = numpy_rng(contract_spec("fedavg").seed, "feature_snapshot")
    assert points == stream.permutation(DIGITS_TEST)[: len(points)].tolist()
    other = snapshots(contract_spec("fedavg", rounds=1, seed=1, diagnostics=["feature_snapshot"]))[1]
    assert other["points"] != points


def test_stored_features_are_the_models_float32_features_to_within_float16_precision(monkeypatch):
    """Computed here independently: each round's aggregated weights and client 0's upload, captured as the method
    produces them, loaded into a fresh model; float16 rounds to nearest, so |stored − exact| ≤ 2⁻¹¹ |exact|."""
    captured: dict[int, tuple[torch.Tensor, dict[int, torch.Tensor]]] = {}
    aggregate = Algorithm.aggregate

    def capturing(self, server, updates, round_index):
        aggregate(self, server, updates, round_index)
        captured[round_index] = (server.params.clone(), {u.client_id: u.params.clone() for u in updates})

    monkeypatch.setattr(Algorithm, "aggregate", capturing)
    spec = contract_spec("fedavg", rounds=3, diagnostics=["feature_snapshot"])
    training = set_up(spec, EngineOptions())
    sink = ListSink()
    train(training, sink)
    data = training.state.data
    model = init_model(spec, data.num_classes, data.input_shape, torch.device("cpu")).eval()
    checked = 0
    for record in sink.records:
        value = record.diagnostics["feature_snapshot"]
        assert value["dtype"] == "float16" and value["client"] == SNAPSHOT_CLIENT
        x = data.tensors.test_x[value["points"]]
        assert value["labels"] == data.tensors.test_y[value["points"]].tolist()
        global_params, uploads = captured[record.round]
        for key, params in (("global", global_params), ("local", uploads.get(SNAPSHOT_CLIENT))):
            if params is None:
                continue
            load_weights(model, params)
            with torch.no_grad():
                exact = model.features(x).numpy()
            stored = decode(value, key)
            assert stored.shape == exact.shape
            assert np.all(np.abs(stored - exact) <= 2.0**-11 * np.abs(exact) + 6e-8)
            assert np.abs(exact).max() > 0  # not a trivial comparison of zeros
            checked += 1
    assert checked > len(sink.records)  # the global model every round and client 0's model at least once


def test_a_round_client_0_did_not_train_in_says_so_and_stores_no_local_model():
    spec = contract_spec("fedavg", rounds=3, diagnostics=["feature_snapshot"])
    schedule = client_schedule(spec)
    assert any(SNAPSHOT_CLIENT in clients for clients in schedule)
    assert any(SNAPSHOT_CLIENT not in clients for clients in schedule)  # the setting has both kinds of round
    for round_index, value in snapshots(spec).items():
        trained = SNAPSHOT_CLIENT in schedule[round_index - 1]
        assert (value["local"] is not None) == trained
        assert ("note" in value) == (not trained)
        if not trained:
            assert value["note"] == f"client {SNAPSHOT_CLIENT} did not train in this round"


def test_wider_features_keep_a_prefix_of_the_same_sample_within_the_size_bound():
    narrow = snapshots(contract_spec("fedavg", rounds=1, diagnostics=["feature_snapshot"]))[1]
    # ResNet-18's 512-d features keep the whole sample; any wider one keeps fewer points
    assert MAX_VALUES // 512 == SAMPLE_SIZE and MAX_VALUES // 513 < SAMPLE_SIZE
    wide = snapshots(
        contract_spec("fedavg", rounds=1, model_params={"hidden": 1024}, diagnostics=["feature_snapshot"])
    )[1]
    assert narrow["shape"] == [DIGITS_TEST, 16]
    assert wide["shape"] == [MAX_VALUES // 1024, 1024]
    assert wide["points"] == narrow["points"][: MAX_VALUES // 1024]
    for value in (narrow, wide):
        n, d = value["shape"]
        assert len(value["points"]) == len(value["labels"]) == n
        for key in ("global", "local"):
            if value[key] is not None:
                assert len(base64.b64decode(value[key])) == 2 * n * d <= 2 * MAX_VALUES


def test_recording_snapshots_leaves_training_bit_for_bit_unchanged():
    """The engine contract's diagnostics property: the run recording every diagnostic (feature_snapshot among them)
    every round trains as the run recording none, and records the same after a stop and a resume."""
    (result,) = check_method(contract_spec("fedavg"), ["diagnostics"])
    assert result.status == "pass" and "feature_snapshot" in result.detail
    plain = ListSink()
    run(contract_spec("fedavg", rounds=3), plain, EngineOptions())
    recorded = ListSink()
    run(contract_spec("fedavg", rounds=3, diagnostics=["feature_snapshot"]), recorded, EngineOptions())
    for a, b in zip(plain.records, recorded.records, strict=True):
        assert (a.train_loss, a.test_acc, a.test_loss) == (b.train_loss, b.test_acc, b.test_loss)


def test_a_run_that_cannot_record_snapshots_fails_when_it_starts():
    spec = contract_spec("fedavg", diagnostics=["feature_snapshot"])
    fedavg = build_algorithm("fedavg", {})
    message = (
        "^diagnostic 'feature_snapshot' tells the test points apart by class: dataset 'digits' is a segmentation task$"
    )
    with pytest.raises(ConfigError, match=message):
        check_diagnostics(spec, fedavg, "segmentation", None)
    message = (
        r"^diagnostic 'feature_snapshot' reads FedModel\.features\(x\): model 'digits_mlp' is not a FedModel "
        r"\(fedbench\.models\)$"
    )
    with pytest.raises(ConfigError, match=message):
        check_diagnostics(spec, fedavg, "classification", torch.nn.Linear(2, 2))
    check_diagnostics(contract_spec("fedavg"), fedavg, "segmentation", torch.nn.Linear(2, 2))  # not asked for


def test_features_too_wide_for_one_point_are_refused_in_one_line(monkeypatch):
    monkeypatch.setattr("fedbench.engine.diagnostics.snapshots.MAX_VALUES", 8)
    training = set_up(contract_spec("fedavg", diagnostics=["feature_snapshot"]), EngineOptions())
    with pytest.raises(ConfigError, match="16 values per point, more than the 8"):
        feature_snapshot(training.state, training.state.server, [])
