"""Client states (``fedbench/engine/client_states.py``) spill to one file per client and are checkpointed
incrementally, so runs of thousands of stateful clients fit in memory and checkpoint only what a round changed.

- The store on its own, through its public interface: the mapping, the files a checkpoint writes and deletes, the
  memory budget, and the checks of files read back.
- Only the clients a round changed are written, to new files named after the round; the checkpoint's manifest names
  every client's file; superseded files go once the new checkpoint is in place.
- With a memory budget of 0, every filed state leaves memory after each checkpoint and is read back when needed:
  every method's curve and final states equal those of a run that keeps everything in memory, also across a resume.
- A resume refuses a manifest whose files are missing or changed (warning, round 0, the same curve in the end), reads
  a checkpoint written before the store (all states inline), and removes files no manifest names.
- Stateful methods (server and client state) and personal models resume exactly after an interruption."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from algorithm_fixtures import (
    SETTINGS,
    Sink,
    interrupt,
    make_spec,
    run_until,
    train,
)
from conftest import ListSink
from fedbench.algorithms import ALGORITHMS
from fedbench.checkpoint.format import read_checkpoint, save_checkpoint
from fedbench.checkpoint.location import client_state_folder
from fedbench.engine import EngineOptions, run
from fedbench.engine.client_states import DEFAULT_MEMORY_BUDGET, ClientStateError, ClientStates, state_bytes
from fedbench.engine.loop import client_schedule
from fedbench.execution.contract import contract_spec
from fedbench.spec import RunSpec
from personal_run_fixtures import BASE as PERSONAL_BASE
from tests.engine.test_engine_contract import assert_same_tree

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


def stateful_spec(algorithm: str):
    """The engine contract's setting (with the model a method needs), 4 rounds evaluated every second."""
    return contract_spec(algorithm, **{**SETTINGS.get(algorithm, {}), "rounds": 4, "eval_every": 2})


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_spilled_states_give_the_in_memory_run_also_across_a_resume(tmp_path, algorithm):
    """Every method: states read back from their files (memory budget 0, interrupted after round 2 and resumed)
    give the curve and final states of a run that keeps every state in memory and is never interrupted."""
    spec = stateful_spec(algorithm)
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
    run(spec, Sink(), EngineOptions(checkpoint_path=tmp_path / "zero.pt").with_settings(client_state_memory=0))
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


ROOT = Path(__file__).resolve().parents[2]


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def vector(n: int, value: float = 1.0) -> dict[str, torch.Tensor]:
    """A state of ``n`` float32 numbers: 4n bytes."""
    return {"c": torch.full((n,), float(value))}


def test_state_bytes_counts_every_tensor_of_a_nested_state():
    state = {
        "a": torch.zeros(3),  # 3 × 4 bytes
        "b": [torch.zeros(2, dtype=torch.float64), (torch.zeros(5, dtype=torch.int8),)],  # 16 + 5
        "n": 7,
        "s": "text",
    }
    assert state_bytes(state) == 12 + 16 + 5
    assert state_bytes({}) == 0 and state_bytes(3.5) == 0 and state_bytes(torch.zeros(2, 3)) == 24


def test_the_default_budget_is_the_documented_gib():
    """README and `fedbench run --help` promise 1024 MiB when --client-state-memory is not given."""
    readme = (ROOT / "README.md").read_text()
    documented = re.search(r"--client-state-memory` MiB \(default (\d+)\)", readme)
    assert documented is not None
    assert DEFAULT_MEMORY_BUDGET == int(documented.group(1)) * 1024 * 1024
    assert ClientStates(folder=None).memory_budget == DEFAULT_MEMORY_BUDGET


def test_the_mapping_lists_resident_and_filed_clients_but_not_deleted_ones(tmp_path):
    store = ClientStates({4: vector(2)}, folder=tmp_path / "c", spec_hash="h", memory_budget=0)
    store[1] = vector(3)
    store[9] = {}
    assert store.write_changed(1)[1].keys() == {1, 4}  # the initial state is filed like any other
    store.commit()  # 1 and 4 now live in files only
    assert list(store) == [1, 4, 9] and len(store) == 3
    assert 1 in store and 4 in store and 9 in store and 2 not in store
    assert store.peek(2) == {}  # no state: an empty one, nothing read
    del store[4]  # a filed state
    del store[9]  # a resident one
    assert list(store) == [1] and len(store) == 1 and 4 not in store and 9 not in store
    with pytest.raises(KeyError):
        store[4]
    with pytest.raises(KeyError):
        del store[2]  # never had a state
    store[7] = vector(1)  # never filed
    del store[7]
    assert 7 not in store and list(store) == [1]
    _, files = store.write_changed(2)
    assert list(files) == [1]
    store.commit()
    assert names(tmp_path / "c") == ["1-r1.state"]


def test_a_store_without_a_folder_keeps_every_state_in_its_checkpoint():
    store = ClientStates({0: vector(2), 1: {}}, folder=None, memory_budget=0)
    inline, files = store.write_changed(3)
    assert files == {} and set(inline) == {0, 1} and torch.equal(inline[0]["c"], torch.ones(2))
    assert store.commit() == [] and store.resident_clients() == [0, 1]  # nothing to spill to
    store.restore({5: vector(1)}, {})  # no folder to clean: not an error
    assert list(store) == [5]


def test_states_beyond_the_budget_leave_memory_least_recently_used_first(tmp_path):
    """Three filed states of 40 bytes each and an empty one: a budget of 80 bytes keeps the two used last; a budget
    of exactly the filed states' total keeps them all (the empty one costs nothing)."""
    store = ClientStates(folder=tmp_path / "c", spec_hash="h", memory_budget=80)
    for client in (0, 1, 2):
        store[client] = vector(10, client)
    store[3] = {}
    store.write_changed(1)
    store[0]  # used after 1 and 2
    store.peek(1)  # a peek is no use
    store.write_changed(2)
    store.commit()
    assert sorted(store.resident_clients()) == [0, 2, 3]
    assert [store.peek(c)["c"][0].item() for c in (0, 1, 2)] == [0.0, 1.0, 2.0]  # 1 is read from its file

    whole = ClientStates(folder=tmp_path / "w", spec_hash="h", memory_budget=120)
    for client in (0, 1, 2):
        whole[client] = vector(10)
    whole[3] = {}
    whole.write_changed(1)
    whole.commit()
    assert sorted(whole.resident_clients()) == [0, 1, 2, 3]
    whole.memory_budget = 119
    whole.commit()
    assert sorted(whole.resident_clients()) == [1, 2, 3]


def test_a_peek_of_a_resident_state_is_a_deep_copy(tmp_path):
    store = ClientStates({0: {"c": torch.zeros(3), "nested": [torch.zeros(2)]}}, folder=tmp_path / "c")
    seen = store.peek(0)
    seen["c"].add_(1)
    seen["nested"][0].add_(1)
    assert store[0]["c"].tolist() == [0.0, 0.0, 0.0] and store[0]["nested"][0].tolist() == [0.0, 0.0]


def test_evicting_stops_as_soon_as_the_rest_fits(tmp_path):
    """Three filed states of 40 bytes: a budget of 50 bytes keeps only the one used last (120 → 80 → 40)."""
    store = ClientStates(folder=tmp_path / "c", spec_hash="h", memory_budget=50)
    for client in (0, 1, 2):
        store[client] = vector(10)
    store.write_changed(1)
    store.commit()
    assert store.resident_clients() == [2]


def test_a_store_without_a_spec_hash_reads_files_of_the_empty_hash(tmp_path):
    folder = tmp_path / "c"
    sha = write_state(folder, "0-r1.state", 0, vector(2, 4.0), spec_hash="")
    store = ClientStates(folder=folder)
    store.restore({}, {0: ("0-r1.state", sha)})
    assert store.peek(0)["c"].tolist() == [4.0, 4.0]


def test_a_superseded_file_already_gone_does_not_fail_the_commit(tmp_path):
    folder = tmp_path / "c"
    store = ClientStates(folder=folder, spec_hash="h")
    store[0], store[1] = vector(2), vector(2)
    store.write_changed(1)
    store.commit()
    store[0], store[1] = vector(2, 2.0), vector(2, 2.0)
    store.write_changed(2)
    (folder / "0-r1.state").unlink()  # removed by hand before the commit
    assert store.commit() == ["0-r1.state", "1-r1.state"]
    assert names(folder) == ["0-r2.state", "1-r2.state"]


def test_a_changed_state_stays_in_memory_until_it_is_filed(tmp_path):
    store = ClientStates(folder=tmp_path / "c", spec_hash="h", memory_budget=0)
    store[0] = vector(4)
    store.write_changed(1)
    store.commit()
    store[0]["c"].add_(1)  # a hook changes it in place
    store.commit()  # no checkpoint wrote it yet: it must not be dropped
    assert torch.equal(store.peek(0)["c"], torch.full((4,), 2.0))
    _, files = store.write_changed(2)
    assert files[0][0] == "0-r2.state"
    assert store.commit() == ["0-r1.state"] and names(tmp_path / "c") == ["0-r2.state"]
    assert torch.equal(store[0]["c"], torch.full((4,), 2.0))


def test_restore_files_inline_states_at_the_next_checkpoint_and_reads_the_manifest(tmp_path):
    folder = tmp_path / "c"
    first = ClientStates(folder=folder, spec_hash="h")
    first[2] = vector(3, 5.0)
    _, manifest = first.write_changed(1)
    store = ClientStates(folder=folder, spec_hash="h", memory_budget=0)
    store.restore({0: vector(2, 7.0), 1: {}}, {c: tuple(entry) for c, entry in manifest.items()})
    store.verify_files()
    assert list(store) == [0, 1, 2] and store.peek(2)["c"].tolist() == [5.0, 5.0, 5.0]
    inline, files = store.write_changed(4)
    assert inline == {1: {}}
    assert {c: name for c, (name, _) in files.items()} == {0: "0-r4.state", 2: "2-r1.state"}
    assert names(folder) == ["0-r4.state", "2-r1.state"]


def test_restore_removes_files_its_manifest_does_not_name_even_without_a_folder_yet(tmp_path):
    store = ClientStates(folder=tmp_path / "absent", spec_hash="h")
    store.restore({}, {})  # the folder does not exist: nothing to remove, no error
    assert not (tmp_path / "absent").exists()
    folder = tmp_path / "c"
    sha = write_state(folder, "2-r3.state", 2, vector(1))
    for stray in ("2-r2.state", "5-r3.state", "2-r4.state.abc.tmp"):
        (folder / stray).write_bytes(b"left by a crash")
    (folder / "notes.txt").write_text("not the store's")
    store = ClientStates(folder=folder, spec_hash="h")
    store.restore({}, {2: ("2-r3.state", sha)})
    assert names(folder) == ["2-r3.state", "notes.txt"]


def write_state(folder: Path, name: str, client: int, state, spec_hash: str = "h") -> str:
    return save_checkpoint(folder / name, {"spec_hash": spec_hash, "round": 1, "client": client, "state": state})


def test_a_file_of_another_client_or_without_a_state_dict_is_refused(tmp_path):
    folder = tmp_path / "c"
    sha = write_state(folder, "1-r1.state", 1, vector(2))
    store = ClientStates(folder=folder, spec_hash="h")
    store.restore({}, {2: ("1-r1.state", sha)})
    path = re.escape(str(folder / "1-r1.state"))
    with pytest.raises(ClientStateError, match=f"^client state file {path} does not hold client 2's state$"):
        store.peek(2)
    sha = write_state(folder, "3-r1.state", 3, [torch.zeros(2)])
    store.restore({}, {3: ("3-r1.state", sha)})
    with pytest.raises(ClientStateError, match="does not hold client 3's state"):
        store[3]


def test_a_valid_file_swapped_for_another_is_refused_by_its_hash(tmp_path):
    """A client-state file replaced by another well-formed one (same client, same spec, other numbers) is refused:
    the manifest's sha256 is checked, not only the format."""
    folder = tmp_path / "c"
    store = ClientStates(folder=folder, spec_hash="h", memory_budget=0)
    store[0] = vector(3, 1.0)
    store.write_changed(1)
    store.commit()
    write_state(folder, "0-r1.state", 0, vector(3, 9.0))
    path = re.escape(str(folder / "0-r1.state"))
    with pytest.raises(ClientStateError, match=f"^client state file {path} cannot be used: its content .*differs from"):
        store.peek(0)
    with pytest.raises(ClientStateError, match=f"^client state file {path} changed since the checkpoint recorded it$"):
        store.verify_files()
    (folder / "0-r1.state").unlink()
    with pytest.raises(ClientStateError, match=f"^client state file {path} cannot be used: No such file or directory$"):
        store[0]
    with pytest.raises(
        ClientStateError, match=f"^client state file {path} cannot be read \\(No such file or directory\\)$"
    ):
        store.verify_files()


def test_a_file_of_another_spec_is_refused(tmp_path):
    folder = tmp_path / "c"
    sha = write_state(folder, "0-r1.state", 0, vector(2), spec_hash="other")
    store = ClientStates(folder=folder, spec_hash="h")
    store.restore({}, {0: ("0-r1.state", sha)})
    with pytest.raises(ClientStateError, match="another spec"):
        store.peek(0)


@pytest.mark.parametrize("name", ["5-r1.state", "junk", "3-r1.state.tmp"])
def test_verify_files_refuses_a_manifest_naming_a_file_not_of_its_client(tmp_path, name):
    folder = tmp_path / "c"
    sha = write_state(folder, name, 3, vector(2))
    store = ClientStates(folder=folder, spec_hash="h")
    store.restore({}, {3: (name, sha)})
    with pytest.raises(
        ClientStateError, match=f"^its client-state manifest names {re.escape(repr(name))} for client 3$"
    ):
        store.verify_files()


def test_verify_files_accepts_intact_files_whatever_their_round(tmp_path):
    folder = tmp_path / "c"
    shas = {3: write_state(folder, "3-r1.state", 3, vector(2)), 12: write_state(folder, "12-r40.state", 12, {})}
    store = ClientStates(folder=folder, spec_hash="h")
    store.restore({}, {3: ("3-r1.state", shas[3]), 12: ("12-r40.state", shas[12])})
    store.verify_files()  # no error
    assert names(folder) == ["12-r40.state", "3-r1.state"]


def test_a_failed_checkpoint_deletes_only_the_files_it_wrote(tmp_path):
    folder = tmp_path / "c"
    store = ClientStates(folder=folder, spec_hash="h")
    assert store.last_written == []  # a fresh store wrote nothing (what the checkpoint mirror publishes)
    store.abandon_written()  # a failure before any write: nothing to delete, no error
    store[0], store[1] = vector(2), vector(2)
    store.write_changed(1)
    store.commit()
    store[1] = vector(2, 3.0)
    store.write_changed(2)
    assert sorted(p.name for p in store.last_written) == ["1-r2.state"]
    store.abandon_written()
    assert names(folder) == ["0-r1.state", "1-r1.state"]
    store.abandon_written()  # nothing more to delete: harmless
    assert names(folder) == ["0-r1.state", "1-r1.state"]


def test_a_stray_file_deleted_by_someone_else_meanwhile_is_no_error(tmp_path, monkeypatch):
    """Another process (a worker that lost its claim, abandoning the files it wrote) may delete a stray file between
    the listing of the folder and its removal: removing the strays still succeeds."""
    folder = tmp_path / "c"
    sha = write_state(folder, "2-r3.state", 2, vector(1))
    (folder / "2-r4.state").write_bytes(b"written by a worker that lost its claim")
    real_iterdir = Path.iterdir

    def listing_then_other_deletes(self):
        listed = list(real_iterdir(self))
        (folder / "2-r4.state").unlink(missing_ok=True)  # the other process, just after the listing
        return iter(listed)

    monkeypatch.setattr(Path, "iterdir", listing_then_other_deletes)
    store = ClientStates(folder=folder, spec_hash="h")
    store.restore({}, {2: ("2-r3.state", sha)})
    monkeypatch.undo()
    assert names(folder) == ["2-r3.state"]


# ------------------------------------------------------------------------------------------- resume
@pytest.mark.usefixtures("linear_model")
@pytest.mark.parametrize(
    "algorithm,params", [("scaffold", {}), ("feddyn", {"alpha": 0.1}), ("moon", {"mu": 1.0}), ("slowmo", {"beta": 0.9})]
)
def test_stateful_methods_resume_after_interrupt_exactly(tmp_path, algorithm, params):
    spec = make_spec(algorithm, params, rounds=4, num_clients=5, clients_per_round=3)
    _, straight, whole = train(spec, tmp_path, "whole.pt")
    sink = Sink()
    interrupt(spec, tmp_path, 2, "split.pt", sink=sink)
    result, _, split = train(spec, tmp_path, "split.pt", sink=sink)
    assert result.status == "done" and result.info["resumed_from"] == 2
    assert torch.equal(split["server"]["params"], whole["server"]["params"])
    for key, value in whole["server"]["state"].items():
        other = split["server"]["state"][key]
        assert torch.equal(other, value) if isinstance(value, torch.Tensor) else other.keys() == value.keys()
    assert whole["client_states"].keys() == split["client_states"].keys()
    for client, state in whole["client_states"].items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(split["client_states"][client][key], value), (client, key)
    assert [(r.round, r.test_acc, r.train_loss) for r in sink.records] == [
        (r.round, r.test_acc, r.train_loss) for r in straight.records
    ]


def test_personal_state_survives_resume(tmp_path):
    spec = RunSpec(**{**PERSONAL_BASE, "algorithm": "ditto", "rounds": 3})
    straight = ListSink()
    run(spec, straight, EngineOptions(checkpoint_path=tmp_path / "a.pt"))
    resumed = ListSink()
    path = tmp_path / "b.pt"
    run_until(spec, resumed, 2, EngineOptions(checkpoint_path=path))
    run(spec, resumed, EngineOptions(checkpoint_path=path))
    assert [r.personal_per_client for r in resumed.records] == [r.personal_per_client for r in straight.records]
