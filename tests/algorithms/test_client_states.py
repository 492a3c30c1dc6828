"""Client states spill to one file per client and are checkpointed incrementally, so runs of
thousands of stateful clients fit in memory and checkpoint only what a round changed.

- Only the clients a round changed are written, to new files named after the round; the checkpoint's manifest names
  every client's file; superseded files go once the new checkpoint is in place.
- With a memory budget of 0, every filed state leaves memory after each checkpoint and is read back when needed:
  every method's curve and final states equal those of a run that keeps everything in memory, also across a resume.
- A resume refuses a manifest whose files are missing or changed (warning, round 0, the same curve in the end), reads
  a checkpoint written before the store (all states inline), and removes files no manifest names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from algorithm_fixtures import Sink, head_mlp, interrupt, make_spec, train  # noqa: F401  (head_mlp: a fixture)
from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.client_states import ClientStateError, ClientStates
from fedbench.checkpoint.format import read_checkpoint, save_checkpoint
from fedbench.checkpoint.location import client_state_folder
from fedbench.engine import EngineOptions, run
from fedbench.engine.loop import client_schedule
from tests.engine.test_engine_contract import BASE, SETTINGS, assert_same_tree

NAME = re.compile(r"^(\d+)-r(\d+)\.state$")


def files_of(checkpoint: Path) -> dict[int, int]:
    """client → round of its file in the run's client-state folder."""
    found = {}
    for path in client_state_folder(checkpoint).iterdir():
        match = NAME.match(path.name)
        assert match, path.name  # nothing else is left there (no temp file)
        client, round_index = int(match.group(1)), int(match.group(2))
        assert client not in found, "a superseded file was not deleted"
        found[client] = round_index
    return found


def test_a_checkpoint_writes_only_the_clients_its_round_changed(tmp_path):
    """SCAFFOLD, 8 clients, 2 per round: after round t the folder holds one file per client trained so far, and the
    file of each client is from the last round it trained."""
    spec = make_spec("scaffold", rounds=5, num_clients=8, clients_per_round=2)
    schedule = client_schedule(spec)
    path = tmp_path / "run.pt"
    written: list[tuple[int, set[int]]] = []

    def after_round(record):
        rounds = files_of(path)
        written.append((record.round, {c for c, r in rounds.items() if r == record.round}))
        last = {}
        for t, clients in enumerate(schedule[: record.round], start=1):
            last.update({c: t for c in clients})
        assert rounds == last

    run(spec, Sink(), EngineOptions(checkpoint_path=path, on_round=after_round))
    assert written == [(t, set(schedule[t - 1])) for t in range(1, 6)]
    manifest = read_checkpoint(path, spec.spec_hash)["client_files"]
    assert {c: NAME.match(name).group(2) for c, (name, _) in manifest.items()} == {
        c: str(r) for c, r in files_of(path).items()
    }


def stateful_setting(algorithm: str) -> dict:
    setting = dict(BASE, **SETTINGS.get(algorithm, {}))
    setting.update(rounds=4, eval_every=2)
    return setting


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_spilled_states_give_the_in_memory_run_also_across_a_resume(tmp_path, algorithm):
    """Every method: states read back from their files (memory budget 0, interrupted after round 2 and resumed)
    give the curve and final states of a run that keeps every state in memory and is never interrupted."""
    from fedbench.spec import RunSpec

    setting = stateful_setting(algorithm)
    spec = RunSpec(algorithm=algorithm, **setting)
    _, whole_sink, whole = train(spec, tmp_path, "whole.pt", client_state_memory=1 << 40)
    sink = Sink()
    interrupt(spec, tmp_path, 2, "split.pt", sink=sink, client_state_memory=0)
    result, _, split = train(spec, tmp_path, "split.pt", sink=sink, client_state_memory=0)
    assert result.status == "done" and result.info["resumed_from"] == 2
    assert [(r.round, r.train_loss, r.test_acc, r.personal_mean) for r in sink.records] == [
        (r.round, r.train_loss, r.test_acc, r.personal_mean) for r in whole_sink.records
    ]
    assert_same_tree(whole["server"], split["server"], "server")
    assert_same_tree(whole["client_states"], split["client_states"], "client_states")


def test_with_a_zero_budget_no_filed_state_stays_in_memory(tmp_path, monkeypatch):
    """SCAFFOLD with budget 0: after every checkpoint the store holds no state in memory (each c_i is on disk);
    with the default budget the states trained so far stay resident."""
    spec = make_spec("scaffold", rounds=3, num_clients=6, clients_per_round=2)
    stores: list[ClientStates] = []
    original = ClientStates.commit

    def recording(self):
        original(self)
        stores.append((self, list(self.resident_clients())))

    monkeypatch.setattr(ClientStates, "commit", recording)
    run(spec, Sink(), EngineOptions(checkpoint_path=tmp_path / "zero.pt", client_state_memory=0))
    assert [resident for _, resident in stores] == [[], [], []]
    stores.clear()
    run(spec, Sink(), EngineOptions(checkpoint_path=tmp_path / "default.pt"))
    trained = sorted({c for clients in client_schedule(spec) for c in clients})
    assert sorted(stores[-1][1]) == trained


def interrupted(tmp_path, spec, name="run.pt"):
    sink = Sink()
    interrupt(spec, tmp_path, 2, name, sink=sink, client_state_memory=0)
    return sink, tmp_path / name


@pytest.mark.parametrize("damage", ["missing", "changed", "renamed"])
def test_a_damaged_client_state_file_restarts_the_run_from_round_zero(tmp_path, damage):
    spec = make_spec("scaffold", rounds=4, num_clients=5, clients_per_round=2)
    straight = Sink()
    run(spec, straight, EngineOptions(checkpoint_path=tmp_path / "straight.pt"))
    sink, path = interrupted(tmp_path, spec)
    victim = sorted(client_state_folder(path).iterdir())[0]
    if damage == "missing":
        victim.unlink()
    elif damage == "changed":
        data = bytearray(victim.read_bytes())
        data[-1] ^= 1
        victim.write_bytes(bytes(data))
    else:
        victim.rename(victim.with_name("99-r1.state"))
    warnings: list[str] = []
    result = run(spec, sink, EngineOptions(checkpoint_path=path, on_warning=warnings.append))
    assert result.info["resumed_from"] == 0 and result.status == "done"
    assert len(warnings) == 1 and "client state file" in warnings[0] and str(victim) in warnings[0]
    assert [(r.round, r.train_loss, r.test_acc) for r in sink.records] == [
        (r.round, r.train_loss, r.test_acc) for r in straight.records
    ]


def test_a_checkpoint_from_before_the_store_resumes_and_files_its_states(tmp_path):
    """A checkpoint with every client state inline and no manifest (as fedbench wrote them before the per-client store) resumes to
    the uninterrupted curve, and its states move to files at the next checkpoint."""
    spec = make_spec("scaffold", rounds=4, num_clients=5, clients_per_round=2)
    straight = Sink()
    run(spec, straight, EngineOptions(checkpoint_path=tmp_path / "straight.pt"))
    sink, path = interrupted(tmp_path, spec)
    payload = read_checkpoint(path, spec.spec_hash)
    folder = client_state_folder(path)
    for client, (name, sha256) in payload.pop("client_files").items():
        payload["client_states"][client] = read_checkpoint(folder / name, spec.spec_hash, "cpu", sha256, bound=True)[
            "state"
        ]
        (folder / name).unlink()
    assert payload["client_states"] and set(payload) == {
        "spec_hash",
        "round",
        "server",
        "client_states",
        "finetune_start",
    }
    save_checkpoint(path, payload)
    seen = []
    result = run(
        spec, sink, EngineOptions(checkpoint_path=path, on_round=lambda r: seen.append(sorted(files_of(path))))
    )
    assert result.info["resumed_from"] == 2
    assert seen[0] == sorted(set(payload["client_states"]) | set(client_schedule(spec)[2]))
    assert [(r.round, r.train_loss, r.test_acc) for r in sink.records] == [
        (r.round, r.train_loss, r.test_acc) for r in straight.records
    ]


def test_files_no_manifest_names_are_removed_on_resume(tmp_path):
    spec = make_spec("scaffold", rounds=3, num_clients=5, clients_per_round=2)
    sink, path = interrupted(tmp_path, spec)
    folder = client_state_folder(path)
    stray = [folder / "3-r7.state", folder / "1-r2.state.tmp123.tmp"]
    for item in stray:
        item.write_bytes(b"left by a crash")
    keep = folder / "notes.txt"  # not the store's: never touched
    keep.write_text("mine")
    assert run(spec, sink, EngineOptions(checkpoint_path=path)).info["resumed_from"] == 2
    assert not any(item.exists() for item in stray) and keep.exists()


def test_peek_never_marks_a_state_changed_nor_keeps_a_spilled_one(tmp_path):
    store = ClientStates(folder=tmp_path / "c", spec_hash="h", memory_budget=0)
    store[3] = {"c": torch.arange(4.0)}
    store[5] = {}
    inline, files = store.write_changed(1)
    assert inline == {5: {}} and list(files) == [3]
    store.commit()
    assert store.resident_clients() == [5]  # the filed state left memory; the empty one costs nothing
    copy = store.peek(3)
    copy["c"].add_(1)
    assert store.resident_clients() == [5] and store.write_changed(2)[1] == files  # nothing written again
    assert torch.equal(store[3]["c"], torch.arange(4.0))  # read back from its file, unchanged by the copy
    assert store.write_changed(3)[1][3][0] == "3-r3.state"  # read through the mapping: may have changed
    store.commit()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["3-r3.state"]
    del store[3]
    assert 3 not in store and store.peek(3) == {} and store.write_changed(4) == ({5: {}}, {})
    store.commit()
    assert list((tmp_path / "c").iterdir()) == []


def test_a_file_that_changes_under_a_running_store_is_an_error_not_a_wrong_state(tmp_path):
    store = ClientStates(folder=tmp_path / "c", spec_hash="h", memory_budget=0)
    store[0] = {"c": torch.zeros(3)}
    store.write_changed(1)
    store.commit()
    (tmp_path / "c" / "0-r1.state").write_bytes(b"x" * 64)
    with pytest.raises(ClientStateError, match="0-r1.state"):
        store[0]
