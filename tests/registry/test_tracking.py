"""fedbench.registry.tracking without a tracker: what a finished run becomes in MLflow or TensorBoard, from runs and
rounds rows made by hand. The flattened spec, the name and folder, the tags (passwords masked), every catalogue
metric the run recorded as a step series (a per-client metric as its mean over clients), the summary's numbers as
final metrics, the registry's times, a digest that follows every value; ``--to`` values refused with one line.
MLflow and TensorBoard themselves: tests/registry/test_tracking_mlflow.py, test_tracking_tensorboard.py."""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime
from types import SimpleNamespace

import pytest

from fedbench.errors import FedbenchError
from fedbench.registry.tracking import (
    DIGEST_TAG,
    SPEC_HASH_TAG,
    TrackerExport,
    open_tracker,
    tracked_run,
)
from fedbench.vocab.metrics import ROUND_FIELDS

STARTED = datetime(2026, 1, 2, 3, 4, 5)  # naive UTC, as the registry stores times
STARTED_MS = 1767323045000  # 2026-01-02T03:04:05Z in ms since the epoch


def run_row(**fields):
    values = dict(
        spec_hash="0123456789abcdef",
        spec={"algorithm": "fedavg", "optimizer": {"name": "sgd", "lr": 0.1}, "plugin_code": {}, "rounds": 2},
        labels={"algorithm": "fedavg", "mu": "0.1"},
        paper="testpaper",
        recipe="tiny",
        seed=3,
        scale="full",
        synthetic=False,
        status="done",
        summary={"best": 0.5, "best_round": 2, "rounds_to_target": {"50": 2, "90": None}, "evaluated_rounds": 2},
        provenance={"fedbench_version": "0.0.9", "git_commit": "abc"},
        created_at=STARTED,
        started_at=STARTED,
        finished_at=datetime(2026, 1, 2, 3, 4, 15),
    )
    return SimpleNamespace(**(values | fields))


def round_row(number: int, **fields):
    return SimpleNamespace(**({name: None for name in ROUND_FIELDS} | {"round": number} | fields))


CURVE = [
    round_row(1, test_acc=0.25, train_loss=2.0, wall_seconds=1.5, bytes_up=10, bytes_down=20),
    round_row(2, test_acc=0.5, train_loss=1.0, wall_seconds=2.25, bytes_up=10, bytes_down=20),
]


def test_params_are_the_flattened_spec_each_value_as_text():
    tracked = tracked_run(run_row(), CURVE)
    assert tracked.params == {
        "algorithm": "fedavg",
        "optimizer.name": "sgd",
        "optimizer.lr": "0.1",
        "plugin_code": "{}",  # an empty mapping is a value, not nothing
        "rounds": "2",
    }


def test_the_name_and_folder_say_recipe_labels_seed_and_what_is_not_the_full_scale():
    assert tracked_run(run_row(), CURVE).name == "tiny algorithm=fedavg mu=0.1 seed=3"
    assert tracked_run(run_row(), CURVE).folder == "tiny/algorithm=fedavg,mu=0.1,seed=3,01234567"
    smoke = tracked_run(run_row(scale="smoke", synthetic=True, recipe=None, labels={"model": "a/b"}), CURVE)
    assert smoke.name == "testpaper model=a/b seed=3 scale=smoke synthetic"
    assert smoke.folder == "testpaper/model=a_b,seed=3,scale=smoke,synthetic,01234567"  # no path separator inside
    assert smoke.experiment == "fedbench/testpaper"
    assert tracked_run(run_row(), CURVE).experiment == "fedbench/tiny"


def test_tags_name_the_run_what_trained_it_and_never_a_password():
    plugin = {
        "module": "my_methods",
        "source": "postgresql://alice:s3cret@db/plugins.py",
        "distribution": None,
        "version": None,
        "sha256": "feed",
        "revision": None,
    }
    provenance = {"fedbench_version": "0.0.9", "git_commit": "abc", "plugins": [plugin]}
    tags = tracked_run(run_row(provenance=provenance), CURVE).tags
    assert tags["fedbench.spec_hash"] == "0123456789abcdef"
    assert (tags["fedbench.paper"], tags["fedbench.recipe"], tags["fedbench.status"]) == ("testpaper", "tiny", "done")
    assert tags["fedbench.version"] == "0.0.9" and tags["fedbench.git_commit"] == "abc"
    assert tags["fedbench.label.algorithm"] == "fedavg" and tags["fedbench.label.mu"] == "0.1"
    assert tags["fedbench.plugins"] == "my_methods (postgresql://alice:***@db/plugins.py, sha256:feed)"
    assert not any("s3cret" in value for value in tags.values())
    assert tracked_run(run_row(), CURVE).tags["fedbench.plugins"] == "none"
    released = {**plugin, "distribution": "fl-extras", "version": "1.2", "revision": 4}
    assert tracked_run(run_row(provenance={"plugins": [released]}), CURVE).tags["fedbench.plugins"] == (
        "my_methods (fl-extras 1.2, revision 4)"
    )


def test_the_tags_are_exactly_these_with_their_fallbacks():
    from fedbench import __version__

    bare = run_row(paper=None, recipe=None, provenance=None, synthetic=True, scale="quick", labels={"seed": "3"})
    assert tracked_run(bare, CURVE).tags == {
        "fedbench.spec_hash": "0123456789abcdef",
        "fedbench.paper": "",
        "fedbench.recipe": "",
        "fedbench.status": "done",
        "fedbench.scale": "quick",
        "fedbench.synthetic": "true",
        "fedbench.version": "unknown",
        "fedbench.git_commit": "unknown",
        "fedbench.plugins": "none",
        "fedbench.exported_by": __version__,
        "fedbench.label.seed": "3",
    }


def test_the_tag_names_a_tracker_finds_its_copies_by_are_fixed():
    # persisted in users' MLflow stores: another name would leave every earlier copy unfound and export it twice
    assert (SPEC_HASH_TAG, DIGEST_TAG) == ("fedbench.spec_hash", "fedbench.export_digest")


def test_the_plugins_tag_says_where_each_came_from_with_a_version_only_beside_a_distribution():
    unversioned = {"module": "a", "distribution": "fl-extras", "version": None, "sha256": "01", "revision": None}
    versioned_source = {"module": "b", "distribution": None, "source": "/p/b.py", "version": "9", "sha256": "02"}
    nowhere = {"module": "c", "sha256": "03"}
    tags = tracked_run(run_row(provenance={"plugins": [unversioned, versioned_source, nowhere]}), CURVE).tags
    assert tags["fedbench.plugins"] == "a (fl-extras, sha256:01); b (/p/b.py, sha256:02); c (?, sha256:03)"


def test_a_run_without_its_own_start_and_finish_takes_the_registration_time_and_the_rounds_wall_time():
    curve = [round_row(1, test_acc=0.25, wall_seconds=1.5), round_row(2, test_acc=0.5, wall_seconds=None)]
    tracked = tracked_run(run_row(started_at=None, finished_at=None), curve)
    assert (tracked.start_ms, tracked.end_ms) == (STARTED_MS, STARTED_MS + 1500)  # a round without a time adds 0
    assert [p.timestamp_ms for p in tracked.series["test_acc"]] == [STARTED_MS + 1500, STARTED_MS + 1500]
    never = tracked_run(run_row(started_at=None, created_at=None, finished_at=None), curve)
    assert (never.start_ms, never.end_ms) == (0, 1500)  # no registry time at all: the epoch


def test_a_run_of_neither_recipe_nor_paper_is_grouped_under_runs():
    tracked = tracked_run(run_row(recipe=None, paper=None, labels={"seed": "3"}), CURVE)  # seed said once
    assert (tracked.experiment, tracked.name, tracked.folder) == (
        "fedbench/runs",
        "runs seed=3",
        "runs/seed=3,01234567",
    )


def test_a_list_value_of_the_spec_is_one_text_with_its_keys_in_order():
    spec = {"algorithm_params": {"regularizers": [{"weight": 0.1, "name": "prox"}]}}
    assert tracked_run(run_row(spec=spec), CURVE).params == {
        "algorithm_params.regularizers": '[{"name": "prox", "weight": 0.1}]'
    }


def test_the_spreads_over_clients_are_step_series_too():
    curve = [round_row(1, personal_mean=0.5, personal_std=0.125, personal_per_client=[0.375, 0.625])]
    assert [p.value for p in tracked_run(run_row(), curve).series["personal_std"]] == [0.125]


def test_a_tracked_run_cannot_change_after_its_digest_was_taken():
    tracked = tracked_run(run_row(), CURVE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tracked.status = "failed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tracked.series["test_acc"][0].value = 1.0  # type: ignore[misc]


def test_the_count_is_every_run_written_or_left():
    assert TrackerExport("memory", new=["a"], updated=["b", "c"], unchanged=["d", "e", "f"]).count == 6


def test_a_password_in_the_spec_is_masked_in_the_params():
    spec = {"dataset_params": {"url": "https://bob:hunter2@example.org/data"}}
    assert tracked_run(run_row(spec=spec), CURVE).params == {"dataset_params.url": "https://bob:***@example.org/data"}


def test_every_recorded_metric_is_a_step_series_stamped_with_the_registry_times():
    personal = [
        round_row(1, personal_per_client=[0.5, 1.0], personal_mean=0.75, personal_metrics={"auc": [0.25, None]}),
        round_row(2, personal_per_client=[0.0, 1.0], personal_mean=0.5, personal_metrics={"auc": [0.5, 1.0]}),
    ]
    series = tracked_run(run_row(), CURVE).series
    assert set(series) == {"test_acc", "train_loss", "wall_seconds", "bytes_up", "bytes_down"}  # the others: None
    assert [(p.step, p.value, p.timestamp_ms) for p in series["test_acc"]] == [
        (1, 0.25, STARTED_MS + 1500),
        (2, 0.5, STARTED_MS + 3750),  # the start plus the wall time of rounds 1 and 2
    ]
    assert [p.value for p in series["bytes_up"]] == [10.0, 10.0]
    personal_series = tracked_run(run_row(), personal).series
    assert [p.value for p in personal_series["personal_mean"]] == [0.75, 0.5]
    assert [p.value for p in personal_series["personal_auc"]] == [0.25, 0.75]  # the mean of the known clients
    assert "test_acc" not in personal_series


def test_the_summary_numbers_are_final_metrics_and_a_missing_value_is_left_out():
    final = tracked_run(run_row(), CURVE).final
    assert final == {
        "summary.best": 0.5,
        "summary.best_round": 2.0,
        "summary.rounds_to_target.50": 2.0,
        "summary.evaluated_rounds": 2.0,
    }


def test_times_are_the_registry_start_and_finish():
    tracked = tracked_run(run_row(), CURVE)
    assert (tracked.start_ms, tracked.end_ms) == (STARTED_MS, STARTED_MS + 10_000)


def test_the_digest_follows_every_value_and_nothing_else():
    base = tracked_run(run_row(), CURVE)
    assert tracked_run(run_row(), CURVE).digest == base.digest
    changed_curve = [CURVE[0], round_row(2, test_acc=0.5000001, train_loss=1.0, wall_seconds=2.25)]
    variants = [
        tracked_run(run_row(summary={"best": 0.6}), CURVE),
        tracked_run(run_row(), changed_curve),
        tracked_run(run_row(labels={"algorithm": "fedprox"}), CURVE),
        tracked_run(run_row(spec={"rounds": 3}), CURVE),
        tracked_run(run_row(provenance={"fedbench_version": "0.2.0"}), CURVE),
        tracked_run(run_row(finished_at=datetime(2026, 1, 2, 3, 5)), CURVE),
    ]
    assert len({v.digest for v in variants} | {base.digest}) == len(variants) + 1
    assert len(base.digest) == 16 and int(base.digest, 16) >= 0
    reordered = run_row(
        spec={"rounds": 2, "plugin_code": {}, "optimizer": {"lr": 0.1, "name": "sgd"}, "algorithm": "fedavg"}
    )
    assert tracked_run(reordered, CURVE).digest == base.digest  # the same values in another order


NEEDS_FOLDER = "--to tensorboard needs the folder to write to: --to tensorboard:DIR"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("wandb", "--to wandb: not a tracker fedbench exports to; use mlflow[:TRACKING_URI] or tensorboard:DIR"),
        (
            "neptune://me:s3cret@host",
            "--to neptune://me:***@host: not a tracker fedbench exports to; use mlflow[:TRACKING_URI] or tensorboard:DIR",
        ),
        ("tensorboard", NEEDS_FOLDER),
        ("tensorboard:", NEEDS_FOLDER),
    ],
)
def test_a_target_fedbench_does_not_export_to_is_one_line(target, message):
    with pytest.raises(FedbenchError) as raised:
        open_tracker(target)
    assert str(raised.value) == message


@pytest.mark.parametrize(("target", "extra"), [("mlflow", "mlflow"), ("tensorboard:tb", "tensorboard")])
def test_a_tracker_without_its_extra_says_what_to_install(target, extra, monkeypatch):
    # `import mlflow` fails as where it is not installed, and so does a submodule an earlier test already imported
    for name in [extra, *(loaded for loaded in sys.modules if loaded.startswith(f"{extra}."))]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, f"fedbench.registry.tracking_{extra}", raising=False)
    with pytest.raises(FedbenchError) as raised:
        open_tracker(target)
    name = {"mlflow": "MLflow", "tensorboard": "TensorBoard"}[extra]
    assert str(raised.value) == f"--to {extra} needs {name}, an optional extra: pip install 'fedbench-repro[{extra}]'"


@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")  # MLflow's own store
def test_mlflow_with_a_tracking_uri_writes_there(tmp_path):
    pytest.importorskip("mlflow")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert open_tracker(f"mlflow:{store}").shown == store


@pytest.mark.parametrize(
    ("target", "extra", "part"),
    [("mlflow", "mlflow", "mlflow.entities"), ("tensorboard:tb", "tensorboard", "tensorboard.compat")],
)
def test_a_missing_part_of_an_extra_is_the_extra_missing(target, extra, part, monkeypatch):
    """A broken or partial install of the extra (one of its submodules missing) still says what to install."""
    pytest.importorskip(extra)  # the extra is installed: hide one of its parts, and what an earlier test imported of it
    for name in [part, *(loaded for loaded in sys.modules if loaded.startswith(f"{part}."))]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, f"fedbench.registry.tracking_{extra}", raising=False)
    with pytest.raises(FedbenchError, match=rf"pip install 'fedbench-repro\[{extra}\]'"):
        open_tracker(target)


class Collecting:
    """A tracker that keeps what it is given."""

    shown = "memory"

    def __init__(self):
        self.written = []

    def write(self, run):
        self.written.append(run)
        return "new"


def test_export_run_writes_a_finished_run_as_the_registry_holds_it_and_nothing_else(registry_url):
    from fedbench.engine.loop import RoundRecord
    from fedbench.registry import Registry
    from fedbench.registry.tracking import export_run, export_to_tracker
    from registry_fixtures import entry

    registry = Registry(registry_url)
    registry.ensure_runs([entry(1), entry(2)])
    run_id = registry.claim(f"{1:016x}", "host:1")
    record = RoundRecord(round=1, train_loss=1.0, wall_seconds=1.0, bytes_up=0, bytes_down=0, test_acc=0.625)
    registry.log_round(run_id, record)
    registry.finish(run_id, "done", summary={"best": 0.625})
    tracker = Collecting()
    assert export_run(tracker, registry, f"{2:016x}") is None  # pending: not copied
    assert export_run(tracker, registry, "ffffffffffffffff") is None  # not in the registry
    assert export_run(tracker, registry, f"{1:016x}") == "new"
    [written] = tracker.written
    assert written.spec_hash == f"{1:016x}" and written.final == {"summary.best": 0.625}
    assert [(p.step, p.value) for p in written.series["test_acc"]] == [(1, 0.625)]
    outcome = export_to_tracker(Collecting(), registry)
    assert (outcome.shown, outcome.new, outcome.updated, outcome.unchanged) == ("memory", [f"{1:016x}"], [], [])
    assert outcome.count == 1
