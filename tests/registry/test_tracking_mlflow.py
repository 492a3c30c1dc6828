"""``fedbench export --to mlflow:URI`` (fedbench.registry.tracking_mlflow) on a registry trained for real (the tiny
recipe's two smoke runs), read back with MLflow's own client from a SQLite tracking store: one MLflow run per
fedbench run, named by recipe, labels and seed; every value equal to the registry's (params = the flattened spec,
every recorded metric's curve at step = round, the summary); a second export adds nothing; a changed result
replaces its copy; a password in the tracking URI is never shown."""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from cli_fixtures import assert_user_error
from fedbench.cli import app
from fedbench.registry import Registry
from fedbench.registry.tables import runs
from fedbench.vocab.metrics import METRICS
from registry_fixtures import trained_registry

mlflow = pytest.importorskip("mlflow")
pytestmark = pytest.mark.slow  # trains two runs, creates an MLflow store

runner = CliRunner()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[str, str, str]:
    """(registry URL, tracking URI, the export's stderr): the tiny recipe's runs trained, exported to MLflow."""
    folder = tmp_path_factory.mktemp("mlflow")
    url = trained_registry(folder)
    tracking = f"sqlite:///{folder / 'mlflow.db'}"
    result = runner.invoke(app, ["export", "--recipe", "tiny", "--to", f"mlflow:{tracking}", "--registry", url])
    assert result.exit_code == 0, result.output
    return url, tracking, result.stderr


def mlflow_runs(tracking: str):
    """The active MLflow runs of the tiny recipe's experiment, as MLflow's client lists them."""
    client = mlflow.MlflowClient(tracking_uri=tracking)
    experiment = client.get_experiment_by_name("fedbench/tiny")
    return client, client.search_runs([experiment.experiment_id])


def show(url: str, run_id: int) -> dict:
    result = runner.invoke(app, ["show", str(run_id), "--json", "--registry", url])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def leaves(value, prefix=""):
    """The spec's leaves by dotted path, written out here independently of the exporter's flattening."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{prefix}{key}.").items()}
    return {prefix[:-1]: value}


def test_each_finished_run_is_one_mlflow_run_named_by_recipe_labels_and_seed(exported, monkeypatch):
    url, tracking, stderr = exported
    assert "exported 2 finished run(s) to mlflow" in stderr and "2 new, 0 updated, 0 unchanged" in stderr
    _, found = mlflow_runs(tracking)
    names = sorted(r.info.run_name for r in found)
    assert names == ["tiny algorithm=fedavg seed=0 scale=smoke", "tiny algorithm=fedprox seed=0 scale=smoke"]
    assert sorted(r.data.tags["fedbench.spec_hash"] for r in found) == sorted(r.spec_hash for r in Registry(url).runs())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking)  # mlflow.search_runs reads the process's tracking URI
    frame = mlflow.search_runs(experiment_names=["fedbench/tiny"])  # the pandas view too
    assert len(frame) == 2 and set(frame["status"]) == {"FINISHED"}


def test_every_value_equals_the_registry(exported):
    url, tracking, _ = exported
    client, found = mlflow_runs(tracking)
    by_hash = {r.data.tags["fedbench.spec_hash"]: r for r in found}
    for row in Registry(url).runs():
        stored = show(url, row.id)
        copy = by_hash[row.spec_hash]
        # params: the resolved spec's every leaf, as text
        spec = leaves(stored["spec"])
        assert set(copy.data.params) == set(spec)
        for key, value in spec.items():
            assert copy.data.params[key] == (value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        # tags
        tags = copy.data.tags
        assert (tags["fedbench.paper"], tags["fedbench.recipe"], tags["fedbench.status"]) == (
            "testpaper",
            "tiny",
            "done",
        )
        assert tags["fedbench.version"] == stored["provenance"]["fedbench_version"]
        assert tags["fedbench.plugins"] == "none" and tags["fedbench.label.algorithm"] == stored["labels"]["algorithm"]
        # every catalogue metric the registry recorded, round by round, exactly (MLflow keeps a float64)
        recorded = 0
        for name in METRICS:
            curve = [(r["round"], r[name]) for r in stored["curve"] if r.get(name) is not None]
            history = [(m.step, m.value) for m in client.get_metric_history(copy.info.run_id, name)]
            assert sorted(history) == curve, name
            recorded += bool(curve)
        assert recorded >= 3  # test_acc, test_loss, train_loss at least: the comparison compared something
        for name in ("wall_seconds", "bytes_up", "bytes_down"):
            history = sorted((m.step, m.value) for m in client.get_metric_history(copy.info.run_id, name))
            assert history == [(r["round"], r[name]) for r in stored["curve"]]
        # the summary as final metrics
        summary = stored["summary"]
        for key in ("best", "best_round", "final", "last5_mean", "last10_mean", "evaluated_rounds"):
            assert copy.data.metrics[f"summary.{key}"] == summary[key]
        for target, reached in summary["rounds_to_target"].items():
            assert copy.data.metrics.get(f"summary.rounds_to_target.{target}") == reached  # None: not reached
        assert not any(math.isnan(v) for v in copy.data.metrics.values())


def test_a_second_export_adds_nothing_and_a_changed_result_replaces_its_copy(exported):
    url, tracking, _ = exported
    args = ["export", "--to", f"mlflow:{tracking}", "--registry", url]
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "0 new, 0 updated, 2 unchanged" in again.stderr
    _, found = mlflow_runs(tracking)
    assert len(found) == 2
    first = Registry(url).runs()[0]
    registry = Registry(url)
    with registry.engine.begin() as connection:  # the run's result as a retraining would have changed it
        connection.execute(update(runs).where(runs.c.id == first.id).values(summary={**first.summary, "best": 0.875}))
    changed = runner.invoke(app, args)
    assert changed.exit_code == 0, changed.output
    assert "0 new, 1 updated, 1 unchanged" in changed.stderr
    client, found = mlflow_runs(tracking)
    assert len(found) == 2  # replaced, not added
    copy = next(r for r in found if r.data.tags["fedbench.spec_hash"] == first.spec_hash)
    assert copy.data.metrics["summary.best"] == 0.875
    assert len(client.get_metric_history(copy.info.run_id, "test_acc")) == first.rounds_done  # one value per round


def test_a_password_in_the_tracking_uri_is_never_shown(exported, monkeypatch):
    url, _, _ = exported
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # the closed port answers at once; no retries
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    result = runner.invoke(app, ["export", "--to", "mlflow:http://me:s3cret@127.0.0.1:9/", "--registry", url])
    assert_user_error(result, "--to mlflow:http://me:***@127.0.0.1:9/", "MLflow refused the export")
    assert "s3cret" not in result.output
