"""fedbench.registry.transfer without training: registries filled through the Registry API with hand-made rounds,
runs files written by hand. Export then import into a fresh registry gives the same runs and curves; only finished
runs travel; passwords in URLs are masked; a damaged or edited file is refused with a one-line RunsFileError naming
its line and key, before anything is written; merging follows the docstring's rules (added, completed, unchanged,
conflict) with the reason a person reads."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from fedbench.engine.loop import RoundRecord
from fedbench.errors import RunsFileError
from fedbench.recipes.resolve import resolve_spec
from fedbench.registry import Registry
from fedbench.registry.tables import rounds, runs
from fedbench.registry.transfer import Conflict, export_lines, import_runs, read_runs_file, redact
from fedbench.spec import RunSpec

ROUND_KEYS = [c.name for c in rounds.columns if c.name != "run_id"]
RUN_KEYS = [
    "spec_hash",
    "spec",
    "labels",
    "paper",
    "recipe",
    "targets",
    "status",
    "error",
    "rounds_done",
    "diverged_round",
    "summary",
    "provenance",
    "wall_seconds",
    "created_at",
    "started_at",
    "finished_at",
]


def spec(seed: int, **fields) -> RunSpec:
    """Resolved, as a recipe compiles it (a registry holds resolved specs)."""
    return resolve_spec(dict(algorithm="fedavg", dataset="digits", model="digits_mlp", seed=seed, **fields))


def record(round_: int, acc: float, wall: float = 1.5) -> RoundRecord:
    """A round with every column set (per-client lists and per-metric dicts included)."""
    return RoundRecord(
        round=round_,
        train_loss=2.0 - acc,
        wall_seconds=wall,
        bytes_up=1000 * round_,
        bytes_down=2000 * round_,
        test_acc=acc,
        test_loss=1.0 + acc,
        personal_mean=acc / 2,
        personal_weighted_mean=acc / 4,
        personal_std=0.125,
        personal_per_client=[acc, acc / 2],
        personal_val_mean=0.375,
        personal_val_per_client=[0.25, 0.5],
        personal_metrics={"auc": [0.5, None]},
        finetune_mean=0.625,
        finetune_weighted_mean=0.75,
        finetune_std=0.0625,
        finetune_per_client=[0.5, 0.75],
    )


def add_run(
    registry: Registry,
    run_spec: RunSpec,
    status: str = "done",
    rounds: tuple[RoundRecord, ...] = (),
    *,
    paper: str = "p",
    recipe: str = "r",
    summary: dict | None = None,
    error: str | None = None,
    provenance: dict | None = None,
    diverged_round: int | None = None,
    worker: str = "host:1",
) -> int:
    """A run registered, claimed, its rounds logged and finished with ``status`` as `fedbench run` would."""
    registry.ensure_runs(
        [
            {
                "spec_hash": run_spec.spec_hash,
                "spec": run_spec.model_dump(mode="json"),
                "labels": {"algorithm": run_spec.algorithm, "seed": str(run_spec.seed)},
                "paper": paper,
                "recipe": recipe,
                "algorithm": run_spec.algorithm,
                "dataset": run_spec.dataset,
                "seed": run_spec.seed,
                "scale": run_spec.scale,
                "synthetic": run_spec.synthetic,
                "targets": [50.0, 80.0],
            }
        ]
    )
    run_id = registry.get_run(run_spec.spec_hash).id
    if status == "pending":
        return run_id
    assert registry.claim(run_spec.spec_hash, worker=worker) == run_id
    for row in rounds:
        registry.log_round(run_id, row)
    if provenance is not None:
        registry.set_provenance(run_id, provenance)
    if status != "running":
        registry.finish(
            run_id,
            status,
            summary=summary if summary is not None else {"best_acc": max((r.test_acc for r in rounds), default=0)},
            error=error,
            diverged_round=diverged_round,
            wall_seconds=12.5,
        )
    return run_id


def state(registry: Registry) -> dict[str, dict]:
    """Every run of the registry by spec_hash: the fields a runs file carries, and its curve (every column)."""
    out = {}
    curves = registry.curves([r.id for r in registry.runs()])
    for run in registry.runs():
        fields = {key: getattr(run, key) for key in RUN_KEYS}
        fields.update(algorithm=run.algorithm, dataset=run.dataset, seed=run.seed, scale=run.scale)
        fields.update(synthetic=run.synthetic, worker=run.worker, heartbeat_at=run.heartbeat_at)
        fields["curve"] = [{key: getattr(row, key) for key in ROUND_KEYS} for row in curves[run.id]]
        out[run.spec_hash] = fields
    return out


def write(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def export_file(registry: Registry, path: Path, **selection) -> Path:
    return write(path, list(export_lines(registry, **selection)))


HEADER = {"format": "fedbench-runs", "version": 1}


def line(run_spec: RunSpec, *, status: str = "done", accs: tuple[float, ...] = (0.5, 0.75), **fields) -> dict:
    """A runs-file line written by hand, as the module docstring describes one."""
    rounds = [{"round": n, "test_acc": acc, "wall_seconds": 2.0} for n, acc in enumerate(accs, start=1)]
    return {
        "spec_hash": run_spec.spec_hash,
        "spec": run_spec.model_dump(mode="json"),
        "labels": {"seed": str(run_spec.seed)},
        "status": status,
        "rounds_done": len(accs),
        "summary": {"best_acc": max(accs, default=0)},
        "provenance": {"host": "elsewhere"},
        "rounds": rounds,
        **fields,
    }


@pytest.fixture
def source(tmp_path) -> Registry:
    """Two finished runs (one done, one diverged with an error), and three that no runs file may carry."""
    registry = Registry(f"sqlite:///{tmp_path / 'source' / 'fedbench.db'}")
    secret = "postgresql+psycopg://alice:hunter2@dbhost:5432/fedbench"
    add_run(registry, spec(0), "done", (record(1, 0.5), record(2, 0.75)), provenance={"registry": secret, "n": 3})
    add_run(
        registry,
        spec(1),
        "diverged",
        (record(1, 0.25),),
        summary={"best_acc": 0.25, "final_loss": None},
        error=f"loss is nan in round 2 (registry {secret})",
        diverged_round=2,
    )
    add_run(registry, spec(2), "failed", (record(1, 0.5),), error="out of memory")
    add_run(registry, spec(3), "running", (record(1, 0.5),))
    add_run(registry, spec(4), "pending")
    return registry


# ---------------------------------------------------------------------------------------------------- round trip
def test_export_then_import_into_a_fresh_registry_gives_the_same_finished_runs_and_curves(source, tmp_path):
    runs_file = export_file(source, tmp_path / "runs.jsonl")
    target = Registry(f"sqlite:///{tmp_path / 'target' / 'fedbench.db'}")
    outcome = import_runs(target, read_runs_file(runs_file, resolve_spec))
    assert outcome.added == [spec(0).spec_hash, spec(1).spec_hash]
    assert outcome.completed == outcome.unchanged == outcome.conflicts == []

    theirs, ours = state(source), state(target)
    assert sorted(ours) == sorted([spec(0).spec_hash, spec(1).spec_hash])  # failed, running and pending runs stay home
    for spec_hash, imported in ours.items():
        original = theirs[spec_hash]
        assert imported["curve"] == original["curve"]  # every column of every round, wall time included
        for key in RUN_KEYS:
            if key not in ("provenance", "error"):
                assert imported[key] == original[key], key
        for key in ("algorithm", "dataset", "seed", "scale", "synthetic"):  # taken from the spec
            assert imported[key] == original[key], key
        assert imported["worker"] is None and imported["heartbeat_at"] is None  # nobody holds an imported run
    # what the hand-made runs hold, read back from the target
    done, diverged = ours[spec(0).spec_hash], ours[spec(1).spec_hash]
    assert [r["test_acc"] for r in done["curve"]] == [0.5, 0.75]
    assert done["curve"][1]["personal_metrics"] == {"auc": [0.5, None]}
    assert done["curve"][1]["bytes_up"] == 2000 and done["curve"][0]["personal_per_client"] == [0.5, 0.25]
    assert done["status"] == "done" and done["rounds_done"] == 2 and done["summary"] == {"best_acc": 0.75}
    assert done["targets"] == [50.0, 80.0] and done["labels"] == {"algorithm": "fedavg", "seed": "0"}
    assert (done["paper"], done["recipe"], done["seed"], done["wall_seconds"]) == ("p", "r", 0, 12.5)
    assert all(isinstance(done[key], datetime) for key in ("created_at", "started_at", "finished_at"))
    assert diverged["status"] == "diverged" and diverged["diverged_round"] == 2 and diverged["seed"] == 1
    assert diverged["summary"] == {"best_acc": 0.25, "final_loss": None}
    # passwords are masked on the way out, everything else of provenance and error kept
    assert done["provenance"] == {"registry": "postgresql+psycopg://alice:***@dbhost:5432/fedbench", "n": 3}
    assert diverged["error"] == "loss is nan in round 2 (registry postgresql+psycopg://alice:***@dbhost:5432/fedbench)"
    assert "hunter2" not in runs_file.read_text()

    # importing the same file again changes nothing
    again = import_runs(target, read_runs_file(runs_file, resolve_spec))
    assert again.added == [] and again.unchanged == [spec(0).spec_hash, spec(1).spec_hash]
    assert state(target) == ours


def test_the_runs_file_is_a_header_then_one_sorted_json_object_per_finished_run(source, tmp_path):
    from fedbench import __version__
    from fedbench.registry.schema import head_revision

    header, *lines = export_lines(source)
    assert json.loads(header) == {
        "format": "fedbench-runs",
        "version": 2,
        "fedbench": __version__,
        "schema": head_revision(),
    }
    records = [json.loads(text) for text in lines]
    assert [r["spec_hash"] for r in records] == [spec(0).spec_hash, spec(1).spec_hash]
    for text, data in zip(lines, records):
        assert text == json.dumps(data, sort_keys=True)  # keys in order: two exports of one registry diff cleanly
        assert sorted(data) == sorted([*RUN_KEYS, "rounds"])  # no worker, heartbeat or checkpoint of this machine
        assert all(sorted(row) == sorted(ROUND_KEYS) for row in data["rounds"])
        datetime.fromisoformat(data["finished_at"])
    assert records[0]["rounds"][0]["bytes_down"] == 2000 and records[1]["rounds"][0]["test_acc"] == 0.25


def test_export_selects_by_paper_and_recipe(tmp_path):
    registry = Registry(f"sqlite:///{tmp_path / 'fedbench.db'}")
    add_run(registry, spec(0), paper="a", recipe="one")
    add_run(registry, spec(1), paper="a", recipe="two")
    add_run(registry, spec(2), paper="b", recipe="one")

    def selected(**selection) -> list[int]:
        return [json.loads(text)["spec"]["seed"] for text in list(export_lines(registry, **selection))[1:]]

    assert selected() == [0, 1, 2]
    assert selected(paper="a") == [0, 1]
    assert selected(recipe="one") == [0, 2]
    assert selected(paper="a", recipe="one") == [0]
    assert selected(paper="c") == [] and selected(recipe="three") == []


def test_a_run_without_times_or_provenance_travels_with_null_times_and_empty_provenance(tmp_path):
    registry = Registry(f"sqlite:///{tmp_path / 'source.db'}")
    run_spec = spec(5)
    with registry.engine.begin() as connection:  # a run imported by an older fedbench: no times, provenance NULL
        connection.execute(insert(runs).values(
            spec_hash=run_spec.spec_hash, spec=run_spec.model_dump(mode="json"), labels={}, algorithm="fedavg",
            dataset="digits", seed=5, scale="full", status="done", summary={}, provenance=None
        ))  # fmt: skip
    runs_file = export_file(registry, tmp_path / "runs.jsonl")
    data = json.loads(runs_file.read_text().splitlines()[1])
    assert data["provenance"] == {} and data["created_at"] is None and data["finished_at"] is None
    assert data["rounds"] == [] and data["error"] is None
    target = Registry(f"sqlite:///{tmp_path / 'target.db'}")
    assert import_runs(target, read_runs_file(runs_file, resolve_spec)).added == [run_spec.spec_hash]
    imported = target.get_run(run_spec.spec_hash)
    assert imported.provenance == {} and imported.created_at is None and imported.status == "done"


def test_more_runs_than_one_query_chunk_are_each_exported_once_with_their_own_curve(tmp_path):
    registry = Registry(f"sqlite:///{tmp_path / 'fedbench.db'}")
    count = 401  # two full chunks of 200 and one more run
    with registry.engine.begin() as connection:
        connection.execute(insert(runs), [
            dict(spec_hash=f"{index:016x}", spec={}, labels={}, algorithm="fedavg", dataset="digits", seed=index,
                 scale="full", status="diverged" if index % 7 == 0 else "done", summary={}, provenance={})
            for index in range(count)
        ])  # fmt: skip
        ids = dict(connection.execute(select(runs.c.spec_hash, runs.c.id)).all())
        connection.execute(insert(rounds), [
            dict(run_id=ids[f"{index:016x}"], round=round_, test_acc=float(index) + (round_ - 1) / 2)
            for index in range(count) for round_ in (1, 2)
        ])  # fmt: skip
        connection.execute(insert(runs).values(spec_hash="f" * 16, spec={}, labels={}, algorithm="fedavg",
                                               dataset="digits", seed=0, scale="full", status="pending"))  # fmt: skip
    records = [json.loads(text) for text in list(export_lines(registry))[1:]]
    assert [r["spec_hash"] for r in records] == [f"{index:016x}" for index in range(count)]
    assert [[row["test_acc"] for row in r["rounds"]] for r in records] == [[i, i + 0.5] for i in range(count)]


# ---------------------------------------------------------------------------------------------------- redaction
def test_redact_masks_every_password_of_every_url_in_nested_values_and_nothing_else():
    value = {
        "registry": "postgresql+psycopg://alice:hunter2@dbhost:5432/fedbench",
        "notes": ["from s3.x-y://u:p%40ss@h/x and http://bob:pw@other/ too", ["ftp://:secret@h"]],
        "plain": "user:word@host is not a URL",
        "no password": "https://u@host/p",
        "key://a:b@c": 1,
        "numbers": [1, 2.5, None, True],
    }
    assert redact(value) == {
        "registry": "postgresql+psycopg://alice:***@dbhost:5432/fedbench",
        "notes": ["from s3.x-y://u:***@h/x and http://bob:***@other/ too", ["ftp://:***@h"]],
        "plain": "user:word@host is not a URL",
        "no password": "https://u@host/p",
        "key://a:b@c": 1,  # keys are names, not values
        "numbers": [1, 2.5, None, True],
    }
    assert (
        redact("x9://a:b@c") == "x9://a:***@c" and redact("9://a:b@c") == "9://a:b@c"
    )  # a scheme starts with a letter
    # a stray character before the scheme hides no password: masked from the scheme's first letter on, as ``scrub``
    # masks error texts (one masker, fedbench.urls.mask_passwords)
    assert redact("9x://a:b@c") == "9x://a:***@c" and redact("_pg://a:b@c") == "_pg://a:***@c"
    assert redact("http://a:p/w@h") == "http://a:***@h"  # a "/" typed unquoted in a password is masked with it
    assert redact("postgresql://a:b c@h") == "postgresql://a:b c@h"  # a space ends a URL before any @
    assert redact("http://a/b:c@d") == "http://a/b:c@d"  # "b:c" is in the path, not a user and password
    assert redact("db=http://a:b@c") == "db=http://a:***@c"


def test_redact_leaves_urls_without_passwords_alone():
    assert redact({"a": ["s3://bucket/x", "https://u@host/p", "http://u:p@h/x y"]}) == {
        "a": ["s3://bucket/x", "https://u@host/p", "http://u:***@h/x y"]
    }


# ---------------------------------------------------------------------------------------------------- reading
def refused(path: Path, message: str) -> str:
    with pytest.raises(RunsFileError) as raised:
        read_runs_file(path, resolve_spec)
    text = str(raised.value)
    assert text.startswith(f"{path}") and message in text and "\n" not in text, text
    return text


def test_a_hand_written_runs_file_is_read_with_each_lines_number_and_its_full_spec(tmp_path):
    path = write(
        tmp_path / "runs.jsonl", ["", {**HEADER, "written by": "hand"}, "", line(spec(0)), "   ", line(spec(1))]
    )
    runs = read_runs_file(path, resolve_spec)
    assert [number for number, _ in runs] == [4, 6]  # the file's line numbers, blank lines counted
    first = runs[0][1]
    assert first.spec_hash == spec(0).spec_hash and first.spec == spec(0).model_dump(mode="json")
    assert (first.paper, first.recipe, first.targets, first.error) == (None, None, [], None)
    assert (first.diverged_round, first.wall_seconds, first.created_at) == (None, None, None)
    assert [r.round for r in first.rounds] == [1, 2] and first.rounds[1].test_acc == 0.75
    assert first.rounds[0].bytes_up is None and first.rounds[0].personal_metrics is None


def test_a_spec_written_with_its_defaults_left_out_is_stored_in_full(tmp_path):
    run_spec = spec(2)
    short = line(run_spec, spec={"algorithm": "fedavg", "dataset": "digits", "model": "digits_mlp", "seed": 2})
    (_, run), = read_runs_file(write(tmp_path / "runs.jsonl", [HEADER, short]), resolve_spec)  # fmt: skip
    assert run.spec == run_spec.model_dump(mode="json") and run.spec["rounds"] == 10


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty; a runs file starts with a header line"),
        (["", "  "], "empty; a runs file starts with a header line"),
        ([{"format": "fedbench-runs"}], "line 1: key version: Field required"),
        ([{"format": "other", "version": 1}], "line 1: key format:"),
        (
            [{"format": "fedbench-runs", "version": 3}],
            "line 1: key version: runs file version 3, this fedbench reads versions 1, 2",
        ),
        (["", {"format": "fedbench-runs", "version": 0}], "line 2: key version: runs file version 0"),
        ([HEADER, "", "[1, 2]"], "line 3: key (the line): Input should be a valid dictionary"),
        ([HEADER, '{"a": 1,}'], "line 2: not JSON (Expecting property name enclosed in double quotes at column 9)"),
        ([HEADER, "{} x"], "line 2: not JSON (Extra data at column 4)"),
        ([HEADER, {**line(spec(0)), "worker": "me"}], "line 2: key worker: Extra inputs are not permitted"),
        ([HEADER, {**line(spec(0)), "rounds_done": -1}], "line 2: key rounds_done: Input should be greater than or equal to 0"),
        ([HEADER, {**line(spec(0)), "status": "failed"}], "line 2: key status:"),
        ([HEADER, {**line(spec(0)), "spec_hash": spec(0).spec_hash.upper()}], "line 2: key spec_hash: String should match"),
        ([HEADER, {**line(spec(0)), "spec_hash": "abcdef1"}], "line 2: key spec_hash: String should match"),
        ([HEADER, {**line(spec(0)), "spec_hash": "a" * 33}], "line 2: key spec_hash: String should match"),
        ([HEADER, {**line(spec(0)), "spec_hash": "abcdef12"}], "line 2: key spec_hash: abcdef12 is not the hash of"),
        ([HEADER, {**line(spec(0)), "spec_hash": "a" * 32}], f"key spec_hash: {'a' * 32} is not the hash of the line's spec ({spec(0).spec_hash})"),
        ([HEADER, {**line(spec(0)), "rounds": [{"test_acc": 0.5}]}], "line 2: key rounds.0.round: Field required"),
        ([HEADER, {**line(spec(0)), "rounds": [{"round": 1, "bytes_up": 1.5}]}], "line 2: key rounds.0.bytes_up: Input should be a valid integer"),
        ([HEADER, {**line(spec(0)), "rounds": [{"round": 1, "test_acc": "high"}]}], "line 2: key rounds.0.test_acc: Input should be a valid number"),
        ([HEADER, {**line(spec(0)), "spec": {"algorithm": "fedavg"}}], "line 2: key spec.dataset: Field required"),
        ([HEADER, line(spec(0)), line(spec(1)), "", line(spec(0))], f"line 5: key spec_hash: run {spec(0).spec_hash} already on line 2"),
    ],
)  # fmt: skip
def test_a_damaged_or_edited_runs_file_is_refused_naming_line_and_key(tmp_path, lines, message):
    refused(write(tmp_path / "runs.jsonl", lines), message)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["", " "], ": empty; a runs file starts with a header line written by `fedbench export`"),
        ([HEADER, '{"a": 1,}'], " line 2: not JSON (Expecting property name enclosed in double quotes at column 9)"),
        ([HEADER, line(spec(0)), line(spec(0))], f" line 3: key spec_hash: run {spec(0).spec_hash} already on line 2"),
        ([HEADER, {**line(spec(0)), "worker": "me"}], " line 2: key worker: Extra inputs are not permitted"),
        ([HEADER, "7"], " line 2: key (the line): Input should be a valid dictionary or instance of RunLine"),
        ([HEADER, {**line(spec(0)), "rounds": [5]}], " line 2: key rounds.0: Input should be a valid dictionary or instance of RoundLine"),
    ],
)  # fmt: skip
def test_the_whole_refusal_is_the_file_then_what_is_wrong(tmp_path, lines, message):
    path = write(tmp_path / "runs.jsonl", lines)
    assert refused(path, message) == f"{path}{message}"


def test_round_columns_holding_lists_and_dicts_are_taken_as_they_are(tmp_path):
    rounds = [{"round": 1, "personal_per_client": [0.5, None], "personal_metrics": {"dice": [0.25]}, "bytes_up": 7}]
    (_, run), = read_runs_file(write(tmp_path / "runs.jsonl", [HEADER, line(spec(0), rounds=rounds)]), resolve_spec)  # fmt: skip
    assert run.rounds[0].personal_per_client == [0.5, None] and run.rounds[0].personal_metrics == {"dice": [0.25]}
    assert run.rounds[0].bytes_up == 7 and run.rounds[0].test_acc is None


def test_a_runs_file_that_cannot_be_read_is_a_runs_file_error(tmp_path):
    missing = tmp_path / "missing.jsonl"
    assert (
        refused(missing, "")
        == f"{missing}: cannot read the runs file ([Errno 2] No such file or directory: '{missing}')"
    )
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x80\x04\x95 a pickle, not text")
    refused(binary, "binary.jsonl: cannot read the runs file")


# ---------------------------------------------------------------------------------------------------- merging
@pytest.fixture
def target(tmp_path) -> Registry:
    return Registry(f"sqlite:///{tmp_path / 'target' / 'fedbench.db'}")


def merge(registry: Registry, tmp_path: Path, *lines: dict):
    return import_runs(registry, read_runs_file(write(tmp_path / "runs.jsonl", [HEADER, *lines]), resolve_spec))


def test_a_run_held_unfinished_is_completed_with_exactly_the_files_result(target, tmp_path):
    pending = add_run(target, spec(0), "pending")
    failed = add_run(target, spec(1), "failed", (record(1, 0.1), record(2, 0.2), record(3, 0.3)), error="oom")
    interrupted = add_run(target, spec(2), "interrupted", (record(1, 0.1),))
    add_run(target, spec(3), "done", (record(1, 0.125),))
    kept = state(target)[spec(3).spec_hash]
    outcome = merge(target, tmp_path, line(spec(0)), line(spec(1), accs=(0.5,)), line(spec(2), status="diverged"))
    assert outcome.completed == [spec(0).spec_hash, spec(1).spec_hash, spec(2).spec_hash] and outcome.added == []
    runs = state(target)
    assert [r["test_acc"] for r in runs[spec(1).spec_hash]["curve"]] == [0.5]  # the three partial rounds are gone
    assert [r["test_acc"] for r in runs[spec(0).spec_hash]["curve"]] == [0.5, 0.75]
    for spec_hash, run_id in (
        (spec(0).spec_hash, pending),
        (spec(1).spec_hash, failed),
        (spec(2).spec_hash, interrupted),
    ):
        run = runs[spec_hash]
        assert target.get_run(spec_hash).id == run_id  # the same row, now finished
        assert run["worker"] is None and run["heartbeat_at"] is None and run["error"] is None
        assert run["provenance"] == {"host": "elsewhere"} and run["labels"]["seed"] == str(run["seed"])
        assert run["paper"] is None and run["targets"] == []  # the file's values, not the registry's
    assert runs[spec(2).spec_hash]["status"] == "diverged" and runs[spec(1).spec_hash]["rounds_done"] == 1
    assert runs[spec(3).spec_hash] == kept  # another run's curve is not touched by replacing these


def test_a_run_running_here_is_a_conflict_and_is_left_to_its_worker(target, tmp_path):
    add_run(target, spec(0), "running", (record(1, 0.1),), worker="gpu7:42")
    before = state(target)
    outcome = merge(target, tmp_path, line(spec(0)), line(spec(1)))
    assert outcome.conflicts == [Conflict(2, spec(0).spec_hash, "running here (worker gpu7:42): not replaced")]
    assert outcome.added == [spec(1).spec_hash] and outcome.completed == outcome.unchanged == []  # the next line
    after = state(target)
    del after[spec(1).spec_hash]
    assert after == before


@pytest.mark.parametrize(
    ("theirs", "reason"),
    [
        (dict(status="diverged"), "status done here, diverged in the file"),
        (dict(accs=(0.5, 0.75, 0.875)), "2 rounds here, 3 in the file"),
        (dict(accs=(0.5,)), "2 rounds here, 1 in the file"),
        (dict(accs=(0.5, 0.625)), "round 2 test_acc: 0.75 here, 0.625 in the file"),
        (dict(accs=(0.25, 0.625)), "round 1 test_acc: 0.5 here, 0.25 in the file"),
        (dict(summary={"best_acc": 0.75, "extra": 1}), "summary differs"),
    ],
)
def test_a_finished_run_with_another_result_is_a_conflict_naming_the_first_difference(target, tmp_path, theirs, reason):
    merge(target, tmp_path, line(spec(0), accs=(0.5, 0.75)))  # the registry's result: done, two rounds
    before = state(target)
    theirs = dict(theirs)
    accs = theirs.pop("accs", (0.5, 0.75))
    other = line(spec(0), accs=accs, **theirs)
    for row in other["rounds"]:
        row["wall_seconds"] = 99.0  # another machine's times never count
    outcome = merge(target, tmp_path, other, line(spec(1)))  # a conflict does not stop the lines after it
    assert outcome.conflicts == [Conflict(2, spec(0).spec_hash, reason)] and outcome.added == [spec(1).spec_hash]
    after = state(target)
    del after[spec(1).spec_hash]
    assert after == before


def test_a_finished_run_with_the_same_result_is_unchanged_whatever_its_times_and_hosts(target, tmp_path):
    first = line(spec(0))
    merge(target, tmp_path, first)
    before = state(target)
    elsewhere = {**first, "provenance": {"host": "faster"}, "wall_seconds": 1.0, "finished_at": "2031-01-01T00:00:00"}
    elsewhere["rounds"] = [{**row, "wall_seconds": 0.25} for row in first["rounds"]]
    outcome = merge(target, tmp_path, elsewhere, line(spec(1)))
    assert outcome.unchanged == [spec(0).spec_hash] and outcome.conflicts == [] and outcome.added == [spec(1).spec_hash]
    after = state(target)
    assert after.pop(spec(1).spec_hash)["curve"][1]["test_acc"] == 0.75  # the line after it was imported
    assert after == before  # nothing of the file's copy replaced the registry's


def test_a_conflict_is_an_immutable_record_and_the_public_names_import():
    conflict = Conflict(3, "ab" * 8, "summary differs")
    with pytest.raises(dataclasses.FrozenInstanceError):
        conflict.reason = "edited"  # type: ignore[misc]
    assert len({conflict, Conflict(3, "ab" * 8, "summary differs")}) == 1
    names: dict = {}
    exec("from fedbench.registry.transfer import *", names)
    public = [
        "export_lines",
        "read_runs_file",
        "import_runs",
        "ImportOutcome",
        "Conflict",
        "redact",
        "FORMAT",
        "VERSION",
    ]
    assert all(name in names for name in public)
    assert names["FORMAT"] == "fedbench-runs" and names["VERSION"] == 2


def test_a_run_of_an_unloaded_plugin_says_where_its_plugin_came_from():
    """The line of a run whose method is not registered names the plug-in it was trained with (an installed
    distribution by name, else the file it was loaded from), for ``fedbench import --plugin``."""
    from fedbench.registry.transfer import RunLine, _plugin_hint

    def hint(plugins) -> str:
        return _plugin_hint(RunLine.model_construct(provenance={"plugins": plugins} if plugins is not None else {}))

    assert hint([{"source": "/work/my_methods.py", "distribution": None}]) == (
        "; the run was trained with the plug-in /work/my_methods.py: load it with --plugin"
    )
    assert hint([{"source": "/site/pkg/__init__.py", "distribution": "fed-extras"}]).startswith(
        "; the run was trained with the plug-in fed-extras:"
    )
    assert hint(None) == hint([]) == "; load the plug-in that defines it with --plugin"
