"""The round loop (engine/loop.py) checked by hand: the client schedule, bytes, the per-round record, eval_every,
divergence (the round it is recorded at), a run stopped after a round, resume, and the checkpoint layout check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from algorithm_fixtures import (
    BASE,
    MLP,
    Sink,
    Stopped,
    final_params,
    interrupt,
    make_spec,
    stop_after,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms.context import ServerState
from fedbench.algorithms.methods.fedavg import FedAvg
from fedbench.checkpoint.format import CheckpointRejected, load_checkpoint
from fedbench.data.federated import prepare_data
from fedbench.engine import EngineOptions, client_schedule, loop, packed, run
from fedbench.engine.accel import Acceleration
from fedbench.engine.loop import init_model
from fedbench.errors import FedbenchError, RunDiverged, WriteFailed
from fedbench.seeding import derive_seed, torch_generator
from fedbench.spec import RunSpec

# digits (8×8 inputs, 10 classes), digits_mlp with hidden 16: 64·16 + 16 weights/biases, then 16·10 + 10
MLP16_PARAMS = 64 * 16 + 16 + 16 * 10 + 10


def test_client_schedule_is_drawn_round_by_round_from_the_sampling_stream():
    spec = make_spec("fedavg", num_clients=7, clients_per_round=3, rounds=5, seed=3)
    rng = np.random.default_rng(derive_seed(3, "sampling"))
    expected = [sorted(int(c) for c in rng.choice(7, 3, replace=False)) for _ in range(5)]
    assert loop.client_schedule(spec) == expected
    assert len(expected) == 5 and all(len(set(r)) == 3 for r in expected)


def test_a_non_finite_client_loss_is_divergence_at_that_round():
    class Update:
        client_id = 4
        train_loss = 0.5

    loop.check_client_loss(Update(), 3)  # finite: nothing
    for bad in (math.nan, math.inf, -math.inf):
        Update.train_loss = bad
        with pytest.raises(RunDiverged) as caught:
            loop.check_client_loss(Update(), 3)
        assert caught.value.round_index == 3
        assert str(caught.value) == f"diverged at round 3: client 4 training loss is {bad}"


def test_init_model_is_seeded_and_leaves_the_global_generator_alone():
    spec = make_spec("fedavg", seed=5)
    before = torch.random.get_rng_state()
    a = loop.init_model(spec, 10, (1, 8, 8), torch.device("cpu"))
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(derive_seed(5, "init"))
    from fedbench.models import build_model

    b = build_model(spec.model, 10, (1, 8, 8), **spec.model_params)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    assert sum(p.numel() for p in a.parameters()) == MLP16_PARAMS


@pytest.mark.parametrize(("algorithm", "up_floats", "down_floats"), [("fedavg", 1, 1), ("scaffold", 2, 2)])
def test_bytes_are_four_per_float_sent_times_the_rounds_clients(algorithm, up_floats, down_floats):
    """FedAvg sends w both ways; SCAFFOLD also sends its control variate (c down, Δc up): float32 = 4 bytes."""
    spec = make_spec(algorithm, num_clients=5, clients_per_round=3, rounds=2)
    sink = Sink()
    result = loop.run(spec, sink)
    assert result.info["num_params"] == MLP16_PARAMS
    for record in sink.records:
        assert record.bytes_up == 3 * up_floats * MLP16_PARAMS * 4
        assert record.bytes_down == 3 * down_floats * MLP16_PARAMS * 4


def test_train_loss_is_the_sample_weighted_mean_of_the_clients_losses(monkeypatch):
    seen: list = []
    real = FedAvg.local_train

    def spy(self, ctx):
        update = real(self, ctx)
        seen.append((ctx.round_index, update.train_loss, update.num_samples))
        return update

    monkeypatch.setattr(FedAvg, "local_train", spy)
    spec = make_spec("fedavg", num_clients=4, clients_per_round=3, rounds=2)
    sink = Sink()
    loop.run(spec, sink)
    for record in sink.records:
        mine = [(loss, n) for r, loss, n in seen if r == record.round]
        assert len(mine) == 3 and len({n for _, n in mine}) > 1  # unequal sizes: weighting matters
        expected = sum(loss * n for loss, n in mine) / sum(n for _, n in mine)
        assert record.train_loss == pytest.approx(expected, rel=1e-12)
        assert record.wall_seconds >= 0.0


def test_evaluation_every_eval_every_rounds_and_at_the_last_and_only_then(tmp_path):
    spec = make_spec("fedavg", rounds=5, eval_every=2)
    result, sink, checkpoint = train(spec, tmp_path)
    assert result.status == "done" and result.rounds_done == 5
    assert [r.round for r in sink.records] == [1, 2, 3, 4, 5]
    evaluated = [r.round for r in sink.records if r.test_acc is not None]
    assert evaluated == [2, 4, 5]
    optional = [
        "test_acc",
        "test_loss",
        "personal_mean",
        "personal_weighted_mean",
        "personal_std",
        "personal_per_client",
        "personal_val_mean",
        "personal_val_per_client",
        "personal_metrics",
        "finetune_mean",
        "finetune_weighted_mean",
        "finetune_std",
        "finetune_per_client",
    ]
    for record in sink.records:
        if record.round in (1, 3):
            assert all(getattr(record, name) is None for name in optional)
        else:  # global only: no personalised field
            assert all(getattr(record, name) is None for name in optional[2:])
    # the last round's accuracy is the final global model's, on the test set, counted by hand
    from fedbench.data.federated import prepare_data

    data = prepare_data(spec, torch.device("cpu"))
    model = loop.init_model(spec, data.num_classes, data.input_shape, torch.device("cpu"))
    torch.nn.utils.vector_to_parameters(checkpoint["server"]["params"], model.parameters())
    with torch.no_grad():
        predicted = model(data.tensors.test_x).argmax(1)
    correct = int((predicted == data.tensors.test_y).sum())
    assert sink.records[-1].test_acc == correct / len(data.tensors.test_y)
    assert sink.records[-1].test_loss > 0


def test_personal_evaluation_only_in_personal_or_both_modes():
    for mode, has_global, has_personal in (("personal", False, True), ("both", True, True), ("global", True, False)):
        spec = make_spec("fedavg", rounds=1, eval_mode=mode, client_test_fraction=0.25)
        sink = Sink()
        loop.run(spec, sink)
        (record,) = sink.records
        assert (record.test_acc is not None) == has_global
        assert (record.personal_mean is not None) == has_personal


def diverging(monkeypatch, at_round: int, how: str):
    """FedAvg that goes wrong in round ``at_round``: a NaN client loss, or NaN aggregated weights."""
    real_train, real_aggregate = FedAvg.local_train, FedAvg.aggregate

    def local_train(self, ctx):
        update = real_train(self, ctx)
        if how == "loss" and ctx.round_index == at_round:
            update.train_loss = math.nan
        return update

    def aggregate(self, server, updates, round_index):
        real_aggregate(self, server, updates, round_index)
        if how == "weights" and round_index == at_round:
            server.params[0] = math.inf

    real_round = packed.train_round

    def train_round(state, algorithm, clients, round_index, *args):
        updates, contexts = real_round(state, algorithm, clients, round_index, *args)
        if how == "loss" and round_index == at_round:
            updates[-1].train_loss = math.nan
        return updates, contexts

    monkeypatch.setattr(FedAvg, "local_train", local_train)
    monkeypatch.setattr(FedAvg, "aggregate", aggregate)
    monkeypatch.setattr(packed, "train_round", train_round)


@pytest.mark.parametrize("how", ["loss", "weights"])
@pytest.mark.parametrize("packing", ["sequential", "packed"])
def test_divergence_is_recorded_at_the_round_it_happens(monkeypatch, tmp_path, how, packing):
    diverging(monkeypatch, 3, how)
    spec = make_spec("fedavg", rounds=5)
    sink = Sink()
    result = loop.run(spec, sink, EngineOptions(checkpoint_path=tmp_path / "run.pt").with_settings(packing=packing))
    assert result.status == "diverged"
    assert result.diverged_round == 3 and result.rounds_done == 2
    if how == "weights":
        assert result.message == "diverged at round 3: aggregated global weights contain NaN/inf"
    else:  # the first client checked with a NaN loss: every client sequentially, the last one when packed
        clients = loop.client_schedule(spec)[2]
        client = clients[0] if packing == "sequential" else clients[-1]
        assert result.message == f"diverged at round 3: client {client} training loss is nan"
    assert [r.round for r in sink.records] == [1, 2]
    assert result.info["num_params"] == MLP16_PARAMS
    assert result.settings["packing"]["executor"] == packing


def test_a_non_finite_test_loss_is_divergence(monkeypatch):
    real = loop.evaluate
    monkeypatch.setattr(loop, "evaluate", lambda *a: (real(*a)[0], math.inf))
    result = loop.run(make_spec("fedavg", rounds=3, eval_every=2), Sink())
    assert result.status == "diverged" and result.diverged_round == 2 and result.rounds_done == 1
    assert result.message == "diverged at round 2: test loss is not finite"


def test_a_run_stopped_after_a_round_resumes_there_and_gives_the_same_numbers(tmp_path):
    spec = make_spec("fedavg", rounds=4, num_clients=5, clients_per_round=2)
    _, straight, reference = train(spec, tmp_path / "a")

    seen: list[int] = []
    sink = Sink()
    with pytest.raises(Stopped):
        train(spec, tmp_path / "b", sink=sink, on_round=stop_after(2, lambda r: seen.append(r.round)))
    assert seen == [1, 2] and [r.round for r in sink.records] == [1, 2]
    second, _, final = train(spec, tmp_path / "b", sink=sink, on_round=lambda r: seen.append(r.round))
    assert second.status == "done" and second.rounds_done == 4
    assert second.info["resumed_from"] == 2 and "checkpoint_rejected" not in second.info
    assert seen == [1, 2, 3, 4]
    assert torch.equal(final["server"]["params"], reference["server"]["params"])
    fields = [(r.round, r.train_loss, r.test_acc, r.test_loss, r.bytes_up, r.bytes_down) for r in sink.records]
    assert fields == [
        (r.round, r.train_loss, r.test_acc, r.test_loss, r.bytes_up, r.bytes_down) for r in straight.records
    ]


def test_on_round_hears_of_a_round_once_it_is_logged_and_checkpointed(tmp_path):
    """A caller stopped in ``on_round`` (a kill between rounds) leaves the sink and the checkpoint at that round."""
    spec = make_spec("fedavg", rounds=3)
    path = tmp_path / "run.pt"
    sink = Sink()
    heard: list = []

    def on_round(record) -> None:
        heard.append((record.round, [r.round for r in sink.records], load_checkpoint(path, spec.spec_hash)["round"]))

    assert loop.run(spec, sink, EngineOptions(checkpoint_path=path, on_round=on_round)).status == "done"
    assert heard == [(1, [1], 1), (2, [1, 2], 2), (3, [1, 2, 3], 3)]


def test_a_learning_rate_schedule_sets_each_rounds_client_lr(monkeypatch):
    lrs: list = []
    real = FedAvg.local_train

    def spy(self, ctx):
        lrs.append((ctx.round_index, ctx.lr))
        return real(self, ctx)

    monkeypatch.setattr(FedAvg, "local_train", spy)
    spec = make_spec(
        "fedavg",
        rounds=3,
        clients_per_round=1,
        optimizer={"lr": 0.2},
        lr_schedule={"name": "exponential", "gamma": 0.5},
    )
    loop.run(spec, Sink())
    assert lrs == [(1, pytest.approx(0.2)), (2, pytest.approx(0.1)), (3, pytest.approx(0.05))]


def test_a_write_failure_says_the_run_resumes_from_the_round_before(tmp_path):
    class FailingSink(Sink):
        def log_round(self, record) -> None:
            if record.round == 3:
                raise WriteFailed("the registry", "disk full", "free space")
            super().log_round(record)

    spec = make_spec("fedavg", rounds=4)
    with pytest.raises(WriteFailed) as caught:
        loop.run(spec, FailingSink(), EngineOptions(checkpoint_path=tmp_path / "run.pt"))
    assert "from round 2" in str(caught.value)
    with pytest.raises(WriteFailed) as caught:
        loop.run(spec, FailingSink())
    assert "from the start" in str(caught.value)


SPEC = make_spec("fedavg", num_clients=4, rounds=3)


def fresh_server() -> ServerState:
    return ServerState(params=torch.zeros(6), buffers={"running": torch.ones(2)})


def valid_payload(**changes):
    payload = {
        "spec_hash": SPEC.spec_hash,
        "round": 2,
        "server": {"params": torch.zeros(6), "buffers": {"running": torch.ones(2)}, "state": {}},
        "client_states": {0: {}, 3: {"x": torch.zeros(1)}},
        "client_files": {1: ["a.safetensors", "0" * 64]},
        "finetune_start": None,
    }
    payload.update(changes)
    return payload


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"round": 1},
        {"round": 3},
        {"finetune_start": {"params": torch.zeros(6)}},
        {"client_files": {}},
        {"client_states": {}},
    ],
)
def test_a_checkpoint_laid_out_as_this_runs_state_passes(changes):
    loop.check_layout(SPEC, valid_payload(**changes), fresh_server())
    without_manifest = valid_payload(**changes)
    del without_manifest["client_files"]  # checkpoints from before the client-state store
    loop.check_layout(SPEC, without_manifest, fresh_server())


def server(**changes):
    value = {"params": torch.zeros(6), "buffers": {"running": torch.ones(2)}, "state": {}}
    value.update(changes)
    return value


KEYS = "its payload has keys {}, not those of this fedbench's checkpoints"


SERVER_KEYS = "its server state is not {params, buffers, state}"


WEIGHTS = "its global weights are not (6,) torch.float32 (another model?)"


BUFFERS = "its model buffers are not this model's"


BUFFER = "its buffer 'running' does not have this model's shape (2,)"


CLIENTS = "its client states are not a dict of client 0..3 → state"


MANIFEST = "its client-state manifest is not a dict of client → [file name, sha256]"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        (
            {"extra": 1},
            KEYS.format(["client_files", "client_states", "extra", "finetune_start", "round", "server", "spec_hash"]),
        ),
        ({"round": 0}, "its round 0 is outside 1..3"),
        ({"round": 4}, "its round 4 is outside 1..3"),
        ({"server": [1]}, SERVER_KEYS),
        ({"server": {"params": torch.zeros(6), "buffers": {"running": torch.ones(2)}}}, SERVER_KEYS),
        ({"server": server(extra={})}, SERVER_KEYS),
        ({"server": server(params=torch.zeros(5))}, WEIGHTS),
        ({"server": server(params=torch.zeros(6, dtype=torch.float64))}, WEIGHTS),
        ({"server": server(params=[0.0] * 6)}, WEIGHTS),
        ({"server": server(buffers={})}, BUFFERS),
        ({"server": server(buffers=[])}, BUFFERS),
        ({"server": server(buffers={"running": torch.ones(2), "other": torch.ones(2)})}, BUFFERS),
        ({"server": server(buffers={"running": torch.ones(3)})}, BUFFER),
        ({"server": server(buffers={"running": torch.ones(2, dtype=torch.float64)})}, BUFFER),
        ({"server": server(buffers={"running": [1.0, 1.0]})}, BUFFER),
        ({"server": server(state=[])}, "its server state is not a dict"),
        ({"client_states": []}, CLIENTS),
        ({"client_states": {4: {}}}, CLIENTS),
        ({"client_states": {-1: {}}}, CLIENTS),
        ({"client_states": {"0": {}}}, CLIENTS),
        ({"client_states": {0: []}}, CLIENTS),
        ({"client_states": {0: {}, 3: []}}, CLIENTS),
        ({"client_files": []}, MANIFEST),
        ({"client_files": {4: ["a", "b"]}}, MANIFEST),
        ({"client_files": {-1: ["a", "b"]}}, MANIFEST),
        ({"client_files": {"1": ["a", "b"]}}, MANIFEST),
        ({"client_files": {1: ("a", "b")}}, MANIFEST),
        ({"client_files": {1: ["a"]}}, MANIFEST),
        ({"client_files": {1: ["a", "b", "c"]}}, MANIFEST),
        ({"client_files": {1: ["a", 2]}}, MANIFEST),
        ({"client_files": {1: [2, "b"]}}, MANIFEST),
        ({"client_files": {1: ["a", "b"], 2: ["a"]}}, MANIFEST),
        ({"finetune_start": [1]}, "its fine-tuning start point is not a dict"),
    ],
)
def test_a_checkpoint_laid_out_otherwise_is_rejected_with_its_reason(changes, reason):
    payload = valid_payload(**changes)
    with pytest.raises(CheckpointRejected) as caught:
        loop.check_layout(SPEC, payload, fresh_server())
    assert caught.value.reason == reason


def test_a_missing_key_is_rejected():
    for key in ("spec_hash", "round", "server", "client_states", "finetune_start"):
        payload = valid_payload()
        del payload[key]
        with pytest.raises(CheckpointRejected):
            loop.check_layout(SPEC, payload, fresh_server())


def test_no_checkpoint_file_is_a_fresh_start_and_a_bad_one_a_reason(tmp_path):
    assert loop.resume_point(SPEC, fresh_server(), None, None, torch.device("cpu")) == (None, None)
    missing = tmp_path / "none.pt"
    assert loop.resume_point(SPEC, fresh_server(), missing, None, torch.device("cpu")) == (None, None)
    garbage = tmp_path / "bad.pt"
    garbage.write_bytes(b"not a checkpoint")
    payload, reason = loop.resume_point(SPEC, fresh_server(), garbage, None, torch.device("cpu"))
    assert payload is None and isinstance(reason, str) and reason
    folder = tmp_path / "a_folder.pt"
    folder.mkdir()
    payload, reason = loop.resume_point(SPEC, fresh_server(), folder, None, torch.device("cpu"))
    assert payload is None and reason == "it cannot be read (Is a directory)"


@pytest.mark.usefixtures("head_mlp")
def test_frozen_parameters_are_restored_after_an_aggregation_that_moves_them(monkeypatch, tmp_path):
    """A fixed ETF classifier keeps w^0's values exactly even when the aggregate moves every coordinate."""
    real = FedAvg.aggregate

    def aggregate(self, server, updates, round_index):
        real(self, server, updates, round_index)
        server.params += 0.25

    monkeypatch.setattr(FedAvg, "aggregate", aggregate)
    spec = make_spec("fedavg", model=MLP, model_params={"classifier": "etf"}, rounds=2)
    _, _, checkpoint = train(spec, tmp_path)
    model = loop.init_model(spec, 10, (1, 8, 8), torch.device("cpu"))
    start = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    fixed = torch.cat([torch.full((p.numel(),), not p.requires_grad) for p in model.parameters()])
    assert 0 < int(fixed.sum()) < len(fixed)
    final = checkpoint["server"]["params"]
    assert torch.equal(final[fixed], start[fixed])
    assert not torch.equal(final[~fixed], start[~fixed])


def test_a_rejected_checkpoint_is_reported_once_and_the_run_starts_from_round_zero(tmp_path):
    spec = make_spec("fedavg", rounds=2)
    straight = Sink()
    loop.run(spec, straight)
    path = tmp_path / "run.pt"
    path.write_bytes(b"\x00" * 40)
    warnings: list[str] = []
    sink = Sink()
    result = loop.run(spec, sink, EngineOptions(checkpoint_path=path, on_warning=warnings.append))
    assert result.status == "done" and result.info["resumed_from"] == 0
    reason = result.info["checkpoint_rejected"]
    assert warnings == [f"checkpoint {path} not used: {reason}; the run starts again from round 0"]
    assert [(r.round, r.train_loss, r.test_acc) for r in sink.records] == [
        (r.round, r.train_loss, r.test_acc) for r in straight.records
    ]


def test_a_finished_run_has_no_divergence_and_a_bare_result_is_empty():
    result = loop.run(make_spec("fedavg", rounds=1), Sink())
    assert (result.status, result.rounds_done, result.diverged_round, result.message) == ("done", 1, None, None)
    bare = loop.RunResult("done", 3)
    assert (bare.settings, bare.info, bare.diverged_round, bare.message) == ({}, {}, None, None)
    assert bare.settings is not loop.RunResult("done", 3).settings  # never one dict shared by every result
    record = loop.RoundRecord(round=1, train_loss=0.5, wall_seconds=0.0, bytes_up=0, bytes_down=0)
    assert record.test_acc is None and record.test_loss is None and record.personal_metrics is None
    assert record.finetune_per_client is None and record.personal_val_per_client is None


def test_wall_seconds_is_the_rounds_elapsed_clock(monkeypatch):
    """A fake clock that advances 1.5 s per reading: each round reads it when it begins and when it ends."""
    readings = iter(range(100))
    monkeypatch.setattr(loop, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: 1.5 * next(readings))}))
    sink = Sink()
    result = loop.run(make_spec("fedavg", rounds=3), sink)
    assert [r.wall_seconds for r in sink.records] == [1.5, 1.5, 1.5]
    assert result.settings["packing"]["executor"] == "sequential"  # the default path
    assert result.settings["acceleration"] == Acceleration().as_dict()  # none asked for: none used


def test_fine_tuning_is_evaluated_after_the_last_round_only_and_survives_a_resume(tmp_path, monkeypatch):
    """finetune.start = best: a scripted accuracy per evaluation (0.5, 0.9, 0.3) makes round 2 the best; a run
    interrupted after round 2 must carry that start point through its checkpoint."""
    real = loop.evaluate
    script: list[float] = []
    monkeypatch.setattr(loop, "evaluate", lambda *a: (script.pop(0), real(*a)[1]))
    spec = make_spec("fedavg", rounds=3, client_test_fraction=0.25, finetune={"epochs": 1, "start": "best"})
    script[:] = [0.5, 0.9, 0.3]
    _, straight, final = train(spec, tmp_path / "a")
    assert [r.finetune_mean is not None for r in straight.records] == [False, False, True]
    assert len(straight.records[-1].finetune_per_client) == 4
    assert final["finetune_start"]["round"] == 2
    script[:] = [0.5, 0.9, 0.3]
    sink = Sink()
    interrupt(spec, tmp_path / "b", 2, sink=sink)
    _, _, resumed = train(spec, tmp_path / "b", sink=sink)
    assert resumed["finetune_start"]["round"] == 2 and not script
    fields = [(r.round, r.test_acc, r.finetune_mean, r.finetune_per_client) for r in sink.records]
    assert fields == [(r.round, r.test_acc, r.finetune_mean, r.finetune_per_client) for r in straight.records]


def test_a_run_reuses_a_cache_filled_with_verified_data(monkeypatch):
    """By default a run verifies its data set: a worker's cache loaded (verified) for an earlier run is reused."""
    from fedbench.data import federated

    loads: list[bool] = []
    real = federated.load_arrays
    monkeypatch.setattr(
        federated, "load_arrays", lambda spec, root, verify: loads.append(verify) or real(spec, root, verify)
    )
    cache = federated.ArraysCache()
    spec = make_spec("fedavg", rounds=1)
    cache.load(spec, None, True)
    loop.run(spec, Sink(), EngineOptions(arrays=cache))
    assert loads == [True]
    loop.run(spec, Sink(), EngineOptions(arrays=cache).with_settings(verify=False))  # unverified data is another entry
    assert loads == [True, False]


def test_the_test_set_is_evaluated_in_batches_of_a_thousand_by_default(monkeypatch, tmp_path):
    """A 2,500-sample test set (digits' test split tiled): the test loss is the sum of float32 per-batch sums over
    batches of 1,000, 1,000 and 500, in float64, as computed here by hand from the final weights."""
    real = loop.prepare_data

    def tiled(*args):
        data = real(*args)
        repeats = -(-2500 // len(data.tensors.test_y))
        data.tensors.test_x = data.tensors.test_x.repeat(repeats, 1, 1, 1)[:2500]
        data.tensors.test_y = data.tensors.test_y.repeat(repeats)[:2500]
        return data

    monkeypatch.setattr(loop, "prepare_data", tiled)
    spec = make_spec("fedavg", rounds=1)
    _, sink, checkpoint = train(spec, tmp_path)
    data = tiled(spec, torch.device("cpu"), None, True, None)
    model = loop.init_model(spec, data.num_classes, data.input_shape, torch.device("cpu"))
    torch.nn.utils.vector_to_parameters(checkpoint["server"]["params"], model.parameters())
    model.eval()
    total = 0.0
    with torch.no_grad():
        for start in (0, 1000, 2000):
            x, y = data.tensors.test_x[start : start + 1000], data.tensors.test_y[start : start + 1000]
            total += float(torch.nn.functional.cross_entropy(model(x), y, reduction="sum").double())
    assert sink.records[-1].test_loss == total / 2500


def test_a_resumed_method_is_told_the_last_round_and_the_clients_that_trained_in_it(monkeypatch, tmp_path):
    trained: list[tuple[int, int]] = []
    told: list = []
    real = FedAvg.local_train

    def local_train(self, ctx):
        trained.append((ctx.round_index, ctx.client_id))
        return real(self, ctx)

    monkeypatch.setattr(FedAvg, "local_train", local_train)
    monkeypatch.setattr(FedAvg, "resume_states", lambda self, server, states, r, clients: told.append((r, clients)))
    spec = make_spec("fedavg", rounds=4, num_clients=6, clients_per_round=2)
    interrupt(spec, tmp_path, 3)
    assert told == []
    train(spec, tmp_path)
    assert told == [(3, sorted(c for r, c in trained if r == 3))]

    def refuse(self, server, states, r, clients):
        raise FedbenchError("its client states are stale")

    monkeypatch.setattr(FedAvg, "resume_states", refuse)
    interrupt(spec, tmp_path / "again", 2)
    with pytest.raises(FedbenchError) as caught:
        train(spec, tmp_path / "again")
    assert str(caught.value) == f"checkpoint {tmp_path / 'again' / 'run.pt'}: its client states are stale"


def test_packed_clients_are_the_rounds_scheduled_clients(float64, tmp_path):
    """The packed path trains the same clients each round as the sequential one: the same numbers (float64)."""
    spec = make_spec("fedavg", rounds=3, num_clients=6, clients_per_round=2)
    _, one, sequential = train(spec, tmp_path, "sequential.pt", packing="sequential")
    result, together, packed_run = train(spec, tmp_path, "packed.pt", packing="packed")
    assert result.settings["packing"]["executor"] == "packed"
    torch.testing.assert_close(packed_run["server"]["params"], sequential["server"]["params"], rtol=0, atol=F64_ATOL)
    for a, b in zip(one.records, together.records, strict=True):
        assert a.train_loss == pytest.approx(b.train_loss, rel=1e-9)


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


def test_a_round_without_diagnostics_is_stored_without_any(registry_url):
    """A record built without diagnostics (a plug-in's sink, a round the spec does not diagnose) stores none: the
    registry's diagnostic reads skip it, as they skip the engine's undiagnosed rounds."""
    from fedbench.engine.loop import RoundRecord
    from fedbench.recipes.resolve import resolve_spec
    from fedbench.registry import Registry

    spec = resolve_spec(dict(algorithm="fedavg", dataset="digits", model="digits_mlp", seed=0))
    registry = Registry(registry_url)
    entry = dict(spec_hash=spec.spec_hash, spec=spec.model_dump(mode="json"), labels={}, paper="p", recipe="r")
    entry |= dict(algorithm="fedavg", dataset="digits", seed=0, scale="full", synthetic=False, targets=[])
    registry.ensure_runs([entry])
    run_id = registry.claim(spec.spec_hash, "host:1")
    record = RoundRecord(round=1, train_loss=1.0, wall_seconds=0.1, bytes_up=0, bytes_down=0, test_acc=0.5)
    assert record.diagnostics is None
    registry.log_round(run_id, record)
    assert [row.diagnostics for row in registry.curves([run_id])[run_id]] == [None]
    assert registry.diagnostic_values([run_id], "update_norm") == {run_id: {}}
