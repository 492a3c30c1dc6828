"""``fedbench export --to tensorboard:DIR`` (fedbench.registry.tracking_tensorboard) on a registry trained for real
(the tiny recipe's two smoke runs), read back with TensorBoard's own event reader (``EventAccumulator``): one run
folder per fedbench run, named by recipe, labels and seed; every scalar equal to the registry's value rounded to
float32 (TensorBoard's scalar type: one rounding, so compared exactly); the spec as hyperparameters and the tags as
text; a second export writes nothing; a changed result rewrites its folder, never a second event file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from cli_fixtures import assert_user_error
from fedbench.cli import app
from fedbench.registry import Registry
from fedbench.registry.tables import runs
from fedbench.vocab.metrics import METRICS
from registry_fixtures import trained_registry

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
plugin_data_pb2 = pytest.importorskip("tensorboard.plugins.hparams.plugin_data_pb2")
pytestmark = pytest.mark.slow  # trains two runs

runner = CliRunner()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[str, Path, str]:
    """(registry URL, TensorBoard folder, the export's stderr): the tiny recipe's runs trained and exported."""
    folder = tmp_path_factory.mktemp("tensorboard")
    url = trained_registry(folder)
    logdir = folder / "tb"
    result = runner.invoke(app, ["export", "--paper", "testpaper", "--to", f"tensorboard:{logdir}", "--registry", url])
    assert result.exit_code == 0, result.output
    return url, logdir, result.stderr


def read(folder: Path):
    """A run folder as TensorBoard's reader loads it, every event kept."""
    events = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def show(url: str, run_id: int) -> dict:
    result = runner.invoke(app, ["show", str(run_id), "--json", "--registry", url])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def run_folders(logdir: Path) -> list[Path]:
    return sorted(p.parent for p in logdir.rglob("events.out.tfevents.*"))


def test_each_finished_run_is_one_folder_named_by_recipe_labels_and_seed(exported):
    url, logdir, stderr = exported
    assert "exported 2 finished run(s) to tensorboard" in stderr and "2 new, 0 updated, 0 unchanged" in stderr
    hashes = {r.labels["algorithm"]: r.spec_hash[:8] for r in Registry(url).runs()}
    assert [p.relative_to(logdir).as_posix() for p in run_folders(logdir)] == [
        f"tiny/algorithm=fedavg,seed=0,scale=smoke,{hashes['fedavg']}",
        f"tiny/algorithm=fedprox,seed=0,scale=smoke,{hashes['fedprox']}",
    ]


def test_every_scalar_equals_the_registry_value_in_float32(exported):
    url, logdir, _ = exported
    folders = {json.loads((p / "fedbench-run.json").read_text())["spec_hash"]: p for p in run_folders(logdir)}
    for row in Registry(url).runs():
        stored = show(url, row.id)
        events = read(folders[row.spec_hash])
        scalars = set(events.Tags()["scalars"])
        recorded = 0
        for name in [*METRICS, "wall_seconds", "bytes_up", "bytes_down"]:
            curve = [(r["round"], np.float32(r[name])) for r in stored["curve"] if r.get(name) is not None]
            if not curve:
                assert name not in scalars
                continue
            assert [(e.step, np.float32(e.value)) for e in events.Scalars(name)] == curve, name
            recorded += 1
        assert recorded >= 6  # test_acc, both losses and the three costs: the comparison compared something
        summary = stored["summary"]
        for key in ("best", "best_round", "final", "last5_mean", "last10_mean", "evaluated_rounds"):
            assert [(e.step, np.float32(e.value)) for e in events.Scalars(f"summary.{key}")] == [
                (0, np.float32(summary[key]))
            ]
        # the spec as hyperparameters (the HParams dashboard's session start) and the tags as text
        content = events.PluginTagToContent("hparams")
        session = [plugin_data_pb2.HParamsPluginData.FromString(c) for c in content.values()][0].session_start_info
        spec = stored["spec"]
        assert session.hparams["optimizer.lr"].string_value == json.dumps(spec["optimizer"]["lr"])
        assert session.hparams["algorithm"].string_value == spec["algorithm"]
        assert session.group_name == row.spec_hash
        [text] = events.Tensors("fedbench/tags")
        table = text.tensor_proto.string_val[0].decode()
        assert f"| fedbench.spec_hash | {row.spec_hash} |" in table and "| fedbench.recipe | tiny |" in table


def test_a_second_export_writes_nothing_and_a_changed_result_rewrites_its_folder(exported):
    url, logdir, _ = exported
    args = ["export", "--to", f"tensorboard:{logdir}", "--registry", url]
    before = {p: p.stat().st_mtime_ns for p in logdir.rglob("*") if p.is_file()}
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "0 new, 0 updated, 2 unchanged" in again.stderr
    assert {p: p.stat().st_mtime_ns for p in logdir.rglob("*") if p.is_file()} == before
    first = Registry(url).runs()[0]
    registry = Registry(url)
    with registry.engine.begin() as connection:  # the run's result as a retraining would have changed it
        connection.execute(update(runs).where(runs.c.id == first.id).values(summary={**first.summary, "best": 0.875}))
    changed = runner.invoke(app, args)
    assert changed.exit_code == 0, changed.output
    assert "0 new, 1 updated, 1 unchanged" in changed.stderr
    event_files = sorted(logdir.rglob("events.out.tfevents.*"))
    assert len(event_files) == 2  # one per run: the old file removed, not read beside the new one
    [folder] = [p.parent for p in event_files if first.spec_hash[:8] in p.parent.name]
    assert [e.value for e in read(folder).Scalars("summary.best")] == [0.875]


def test_a_folder_that_cannot_be_written_is_one_line(exported, tmp_path):
    url, _, _ = exported
    blocked = tmp_path / "file"
    blocked.write_text("")
    result = runner.invoke(app, ["export", "--to", f"tensorboard:{blocked / 'tb'}", "--registry", url])
    assert_user_error(result, f"--to tensorboard:{blocked / 'tb'}", "cannot write there")
