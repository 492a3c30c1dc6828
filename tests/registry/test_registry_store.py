"""What the registry stores about runs and reads back (fedbench.registry.store): runs registered once and never changed
after, rounds, provenance and outcomes round-tripping on SQLite and PostgreSQL (``any_registry_url``), and the queries
a report reads: by id, by hash prefix, by paper and status, curves in round order with all or the chosen columns, and
lists of runs longer than one query chunk, each run once. No training."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select, text

from fedbench.engine.loop import RoundRecord
from fedbench.errors import RegistryError
from fedbench.registry import Registry
from fedbench.registry.tables import rounds, runs
from registry_fixtures import entry, register_recipe


# ------------------------------------------------------------------------------------------- registering
def test_ensure_runs_adds_only_the_new_entries_and_never_changes_a_registered_run(registry_url):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    registry.claim(entry(1)["spec_hash"], worker="w:1")
    registry.ensure_runs([entry(1, paper="other"), entry(2), entry(3)])  # the known one first
    runs = registry.runs()
    assert [(r.seed, r.status, r.paper) for r in runs] == [
        (1, "running", "p"),
        (2, "pending", "p"),
        (3, "pending", "p"),
    ]
    assert all(r.created_at is not None and r.rounds_done == 0 for r in runs)


def test_curves_outcomes_and_force_round_trip(any_registry_url, write_recipe):
    registry, planned = register_recipe(any_registry_url, write_recipe())
    run_id = registry.claim(planned[0].spec_hash)
    for n in (1, 2, 3):
        registry.log_round(
            run_id, RoundRecord(round=n, train_loss=1.0 / n, wall_seconds=0.5, bytes_up=10, bytes_down=20)
        )
    registry.log_round(run_id, RoundRecord(round=3, train_loss=0.25, wall_seconds=0.5, bytes_up=10, bytes_down=20))
    registry.truncate_rounds(run_id, 2)
    registry.set_provenance(run_id, {"host": "h", "nested": {"a": [1, 2]}})
    registry.finish(run_id, "done", summary={"best": 0.5, "rounds_to": {"50": 2}}, wall_seconds=1.5)
    run = registry.get_run(planned[0].spec_hash[:10])
    assert (run.status, run.summary, run.provenance["nested"]) == (
        "done",
        {"best": 0.5, "rounds_to": {"50": 2}},
        {"a": [1, 2]},
    )
    assert [(r.round, r.train_loss) for r in registry.curve(run_id)] == [(1, 1.0), (2, 0.5)]
    assert registry.claim(planned[0].spec_hash) is None  # finished
    registry.reset_for_rerun([planned[0].spec_hash])
    assert registry.curve(run_id) == [] and registry.statuses([planned[0].spec_hash])[planned[0].spec_hash] == "pending"


# ------------------------------------------------------------------------------------------- queries
@pytest.fixture
def filled(registry_url) -> Registry:
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1, paper="a"), entry(2, paper="b"), entry(0xABC, paper="a")])
    with registry.engine.begin() as connection:
        connection.execute(text("UPDATE runs SET status = 'done', summary = '{\"best\": 2.2}' WHERE seed = 2"))
        for run in connection.execute(select(runs.c.id, runs.c.seed)).all():
            for round_ in (2, 1):
                values = {"run_id": run.id, "round": round_, "test_acc": run.seed + round_ / 10, "train_loss": 1.0}
                connection.execute(insert(rounds).values(**values))
    return registry


def test_get_run_by_id_or_by_hash_prefix_and_a_missing_run_names_the_registry(filled):
    first = filled.get_run(entry(1)["spec_hash"])
    assert first.seed == 1 and first.spec == {"seed": 1}  # read after the session closed
    assert filled.get_run(first.id).spec_hash == entry(1)["spec_hash"]
    assert filled.get_run(str(first.id)).seed == 1
    assert filled.get_run("0000000000000ab").seed == 0xABC  # a prefix of its hash
    with pytest.raises(RegistryError) as raised:
        filled.get_run("ffff")
    assert str(raised.value) == f"no run 'ffff' in registry {filled.url}; list runs with `fedbench runs`"
    with pytest.raises(RegistryError, match="no run '999'"):
        filled.get_run(999)


def test_runs_by_paper_status_and_hashes_in_the_order_they_were_registered(filled):
    assert [r.seed for r in filled.runs()] == [1, 2, 0xABC]
    assert [r.seed for r in filled.runs(paper="a")] == [1, 0xABC]
    assert [r.seed for r in filled.runs(status="done")] == [2]
    assert [r.seed for r in filled.runs(status="pending", paper="a")] == [1, 0xABC]
    assert [r.seed for r in filled.runs(paper="c")] == []
    hashes = [entry(0xABC)["spec_hash"], entry(1)["spec_hash"], entry(1)["spec_hash"], "f" * 16]
    assert [r.seed for r in filled.runs(spec_hashes=hashes)] == [1, 0xABC]  # each once
    assert filled.runs(spec_hashes=[]) == []
    assert filled.statuses([entry(2)["spec_hash"], entry(1)["spec_hash"], "f" * 16]) == {
        entry(2)["spec_hash"]: "done",
        entry(1)["spec_hash"]: "pending",
    }
    states = {row.spec_hash: row for row in filled.run_states([entry(2)["spec_hash"], entry(1)["spec_hash"]])}
    assert sorted(states) == sorted([entry(2)["spec_hash"], entry(1)["spec_hash"]])
    assert states[entry(2)["spec_hash"]].status == "done" and states[entry(2)["spec_hash"]].seed == 2
    assert states[entry(2)["spec_hash"]].summary == {"best": 2.2} and not states[entry(1)["spec_hash"]].summary
    assert filled.run_states([]) == []


def test_curves_come_in_round_order_with_all_or_the_chosen_columns(filled):
    ids = {run.seed: run.id for run in filled.runs()}
    curves = filled.curves([ids[2], ids[1]])
    assert sorted(curves) == sorted([ids[1], ids[2]])
    assert [(row.round, row.test_acc, row.train_loss) for row in curves[ids[2]]] == [(1, 2.1, 1.0), (2, 2.2, 1.0)]
    assert [row.test_acc for row in filled.curve(ids[1])] == [1.1, 1.2]
    chosen = filled.curves([ids[1]], fields=["test_acc"])[ids[1]]
    assert [tuple(row._fields) for row in chosen] == [("run_id", "round", "test_acc")] * 2
    assert [row.test_acc for row in chosen] == [1.1, 1.2]
    assert [tuple(row._fields) for row in filled.curves([ids[1]], fields=[])[ids[1]]] == [("run_id", "round")] * 2
    assert filled.curves([]) == {} and filled.curves([999]) == {999: []}


# ------------------------------------------------------------------------------------------- chunked queries
def test_queries_over_more_runs_than_one_chunk_return_each_run_once(registry_url):
    """statuses, runs, curves and diagnostic values split long IN lists into chunks: every run comes back exactly
    once."""
    registry = Registry(registry_url)
    count = 1203  # two full chunks of 500 and a partial one
    with registry.engine.begin() as connection:
        connection.execute(insert(runs), [{"status": "done" if i % 2 else "pending", **entry(i)} for i in range(count)])
    hashes = [entry(i)["spec_hash"] for i in range(count)]
    statuses = registry.statuses(hashes + ["missing"])
    assert len(statuses) == count and statuses[hashes[7]] == "done" and statuses[hashes[8]] == "pending"
    rows = registry.runs(spec_hashes=hashes)
    assert sorted(r.spec_hash for r in rows) == sorted(hashes)  # no run missing, none twice
    ids = [r.id for r in rows]
    with registry.engine.begin() as connection:
        connection.execute(
            insert(rounds),
            [{"run_id": i, "round": 1, "train_loss": 0.5, "diagnostics": {"mixing_weights": [i]}} for i in ids],
        )
    curves = registry.curves(ids)
    assert sorted(curves) == sorted(ids) and all(len(c) == 1 and c[0].run_id == i for i, c in curves.items())
    assert registry.diagnostic_values(ids, "mixing_weights") == {i: {1: [i]} for i in ids}
    assert [r.spec_hash for r in registry.runs(status="done")] == hashes[1::2]


def test_run_states_over_more_hashes_than_one_chunk_return_each_run_once(registry_url):
    registry = Registry(registry_url)
    count = 501  # one full chunk of 500 and one more run
    with registry.engine.begin() as connection:
        connection.execute(insert(runs), [{"status": "done" if i % 3 else "pending", **entry(i)} for i in range(count)])
    hashes = [entry(i)["spec_hash"] for i in range(count)]
    rows = registry.run_states([*hashes, "f" * 16])
    assert sorted(row.spec_hash for row in rows) == hashes
    assert {row.spec_hash: (row.seed, row.status) for row in rows} == {
        h: (i, "done" if i % 3 else "pending") for i, h in enumerate(hashes)
    }
    assert len(registry.statuses(hashes)) == count and len(registry.runs(spec_hashes=hashes)) == count


def test_in_lists_are_cut_into_consecutive_chunks_of_at_most_the_bound():
    from fedbench.registry.store import IN_LIST_CHUNK, in_chunks

    keys = list(range(2 * IN_LIST_CHUNK + 1))
    chunks = list(in_chunks(keys))
    assert [len(c) for c in chunks] == [IN_LIST_CHUNK, IN_LIST_CHUNK, 1]
    assert [k for c in chunks for k in c] == keys
    assert list(in_chunks([])) == []
    assert IN_LIST_CHUNK <= 999  # the oldest SQLite's bound on parameters per statement
