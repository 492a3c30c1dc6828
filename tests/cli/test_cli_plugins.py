"""``--plugin`` and a recipe's ``plugins`` through the command line (``fedbench/cli``): a method in a file of the
user's own trains beside FedAvg and shows in the report; a broken plug-in is one line, exit 2, with no registry
written; an edited plug-in's runs are trained again and the old result is no longer reported; a plug-in that
declares a revision keeps its runs and warns when its source changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from plugin_fixtures import (  # noqa: F401 (fresh_plugins: a fixture)
    fresh_plugins,
    method_source,
    remember_plugins,
    write_method,
    write_plugged_recipe,
)
from typer.testing import CliRunner

from fedbench.cli import app

pytestmark = pytest.mark.usefixtures("fresh_plugins")  # every plug-in a test loads is forgotten after it
runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def runs_of(registry_url: str) -> dict[str, dict]:
    """{algorithm: its run} of the registry (one run each in these tests)."""
    listed = invoke("runs", "--registry", registry_url, "--json")
    assert listed.exit_code == 0, listed.output
    return {run["labels"]["algorithm"]: run for run in json.loads(listed.stdout)}


def report_cells(recipe: Path, registry_url: str, *plugin_args: object) -> dict[str, dict]:
    shown = invoke("report", "--recipe", recipe, "--registry", registry_url, "--format", "json", *plugin_args)
    assert shown.exit_code == 0, shown.output
    return {cell["row"]: cell for cell in json.loads(shown.stdout)["tables"][0]["cells"]}


def test_a_plugin_file_trains_beside_fedavg_and_its_provenance_names_its_code(tmp_path, registry_url):
    method = write_method(tmp_path)
    recipe = write_plugged_recipe(tmp_path)
    done = invoke("run", recipe, "--plugin", method, "--registry", registry_url)
    assert done.exit_code == 0, done.output
    assert "2 done" in done.output
    runs = runs_of(registry_url)
    digest = hashlib.sha256(method.read_bytes()).hexdigest()
    plugged, fedavg = runs["growingprox"], runs["fedavg"]
    assert plugged["spec"]["plugin_code"] == {"algorithm": f"sha256:{digest}"}
    assert plugged["spec"]["algorithm_params"] == {"mu": 0.05, "regularizers": []}
    assert fedavg["spec"]["plugin_code"] == {} and "plugins" not in fedavg["provenance"]
    [record] = plugged["provenance"]["plugins"]
    assert record == {
        "module": "my_methods",
        "source": str(method.resolve()),
        "distribution": None,
        "version": None,
        "sha256": digest,
        "files": {"my_methods.py": digest},
        "revision": None,
        "names": [["algorithm", "growingprox"]],
        "used_as": ["algorithm"],
    }
    cells = report_cells(recipe, registry_url, "--plugin", method)
    assert cells["growingprox"]["n"] == 1 and cells["growingprox"]["run_ids"] == [plugged["id"]]


def test_a_recipe_names_its_plugins_relative_to_itself(tmp_path, registry_url):
    (tmp_path / "mine").mkdir()
    write_method(tmp_path / "mine")
    recipe = write_plugged_recipe(tmp_path, plugins='plugins = ["mine/my_methods.py"]')
    done = invoke("run", recipe, "--registry", registry_url)
    assert done.exit_code == 0, done.output
    assert set(runs_of(registry_url)) == {"fedavg", "growingprox"}
    assert report_cells(recipe, registry_url)["growingprox"]["n"] == 1  # report loads the recipe's plug-ins too


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("def broken(:\n", "syntax error in"),
        ("import fedbench_no_such_dependency\n", "cannot import it: No module named 'fedbench_no_such_dependency'"),
        (method_source(name="fedprox"), "algorithm 'fedprox' registered twice: 'fedprox' is a built-in algorithm"),
    ],
    ids=["syntax", "missing import", "duplicate"],
)
@pytest.mark.parametrize("command", ["run", "plan", "report", "algorithms"])
def test_a_broken_plugin_is_one_line_exit_2_and_writes_no_registry(tmp_path, registry_url, command, source, cause):
    bad = tmp_path / "bad_plugin.py"
    bad.write_text(source)
    recipe = write_plugged_recipe(tmp_path, name="fedprox")
    args = {
        "run": ["run", recipe, "--registry", registry_url],
        "plan": ["plan", recipe, "--throughput", "1"],
        "report": ["report", "--recipe", recipe, "--registry", registry_url],
        "algorithms": ["algorithms"],
    }[command]
    failed = invoke(*args, "--plugin", bad)
    assert failed.exit_code == 2, failed.output
    [line] = failed.output.strip().splitlines()
    assert line.startswith(f"error: plug-in {bad.resolve()}: ") and cause in line, line
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()
    listed = invoke("algorithms", "--json")
    assert "fedprox" in listed.stdout and "growingprox" not in listed.stdout


def test_listings_show_a_plugins_names(tmp_path):
    method = write_method(tmp_path)
    listed = invoke("algorithms", "--json", "--plugin", method)
    assert listed.exit_code == 0, listed.output
    [entry] = [e for e in json.loads(listed.stdout) if e["name"] == "growingprox"]
    assert entry["params"] == {"mu": 0.05, "regularizers": []}


def test_an_edited_plugin_is_trained_again_and_the_old_result_no_longer_reported(tmp_path, registry_url):
    method = write_method(tmp_path)
    recipe = write_plugged_recipe(tmp_path)
    assert invoke("run", recipe, "--plugin", method, "--registry", registry_url).exit_code == 0
    old = runs_of(registry_url)["growingprox"]
    method.write_text(method_source(comment="edited: a docstring is code too"))
    again = invoke("run", recipe, "--plugin", method, "--registry", registry_url)
    assert again.exit_code == 0, again.output
    assert "1 of 2 runs already done" in again.output  # FedAvg's run is kept, the plug-in's trained again
    listed = json.loads(invoke("runs", "--registry", registry_url, "--json").stdout)
    plugged = [run for run in listed if run["labels"]["algorithm"] == "growingprox"]
    assert len(plugged) == 2 and plugged[0]["spec_hash"] == old["spec_hash"]
    new = plugged[1]
    assert new["spec_hash"] != old["spec_hash"] and new["status"] == "done"
    assert new["provenance"]["plugins"][0]["sha256"] == hashlib.sha256(method.read_bytes()).hexdigest()
    cells = report_cells(recipe, registry_url, "--plugin", method)
    assert cells["growingprox"]["run_ids"] == [new["id"]]  # only the current code's result


def test_a_declared_revision_keeps_the_runs_and_warns_when_the_source_changed(tmp_path, registry_url):
    method = write_method(tmp_path, header="FEDBENCH_REVISION = 1")
    recipe = write_plugged_recipe(tmp_path)
    assert invoke("run", recipe, "--plugin", method, "--registry", registry_url).exit_code == 0
    trained = runs_of(registry_url)["growingprox"]
    assert trained["spec"]["plugin_code"] == {"algorithm": "my_methods revision 1"}
    assert trained["provenance"]["plugins"][0]["revision"] == 1
    quiet = invoke("report", "--recipe", recipe, "--registry", registry_url, "--plugin", method)
    assert "warning" not in quiet.output
    method.write_text(method_source(comment="edited", header="FEDBENCH_REVISION = 1"))
    again = invoke("run", recipe, "--plugin", method, "--registry", registry_url)
    assert again.exit_code == 0, again.output
    assert "2 of 2 runs already done" in again.output
    warning = "warning: 1 run(s) of plug-in my_methods (FEDBENCH_REVISION 1) were trained by other source code"
    assert warning in again.output
    reported = invoke("report", "--recipe", recipe, "--registry", registry_url, "--plugin", method)
    assert reported.exit_code == 0 and warning in reported.output
    assert report_cells(recipe, registry_url, "--plugin", method)["growingprox"]["run_ids"] == [trained["id"]]


def test_runs_of_a_plugin_import_with_it_and_without_it_are_one_line(tmp_path, registry_url):
    method = write_method(tmp_path)
    recipe = write_plugged_recipe(tmp_path)
    forget = remember_plugins()
    assert invoke("run", recipe, "--plugin", method, "--registry", registry_url).exit_code == 0
    runs_file = tmp_path / "runs.jsonl"
    assert invoke("export", "--registry", registry_url, "--out", runs_file).exit_code == 0
    forget()  # as a new process would start: without the plug-in
    other = f"sqlite:///{tmp_path / 'other.db'}"
    refused = invoke("import", runs_file, "--registry", other)
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1, refused.output
    assert "runs.jsonl line " in refused.output and "unknown algorithm 'growingprox'" in refused.output
    assert f"trained with the plug-in {method.resolve()}: load it with --plugin" in refused.output
    assert not (tmp_path / "other.db").exists()  # the file is checked before the registry is opened
    imported = invoke("import", runs_file, "--plugin", method, "--registry", other)
    assert imported.exit_code == 0, imported.output
    assert "imported 2 new run(s)" in imported.output
    assert runs_of(other)["growingprox"]["spec_hash"] == runs_of(registry_url)["growingprox"]["spec_hash"]


def test_a_plugins_method_without_its_plugin_names_the_file_that_trained_it(tmp_path, registry_url):
    """The registry knows which plug-in trained its runs (their provenance): a recipe or an ``--add`` naming that
    method without ``--plugin`` says so, as ``import`` does, instead of only the close built-in names."""
    method = write_method(tmp_path)
    recipe = write_plugged_recipe(tmp_path)
    forget = remember_plugins()
    assert invoke("run", recipe, "--plugin", method, "--registry", registry_url).exit_code == 0
    forget()  # a new process: the plug-in is not loaded
    hint = (
        f"; runs in this registry were trained with algorithm 'growingprox' from the plug-in {method.resolve()}: "
        f"load it with --plugin {method.resolve()} (or a recipe's plugins = [...])"
    )
    plain = write_plugged_recipe(tmp_path, name="fedprox", file="plain.toml")
    for args in ([recipe], [plain, "--add", "algorithm=growingprox"]):
        failed = invoke("run", *args, "--registry", registry_url)
        assert failed.exit_code == 2, failed.output
        [line] = failed.output.strip().splitlines()
        assert "unknown algorithm 'growingprox'" in line and line.endswith(hint), line
    elsewhere = invoke("run", recipe, "--registry", f"sqlite:///{tmp_path / 'other.db'}")
    assert elsewhere.exit_code == 2 and "--plugin" not in elsewhere.output  # nothing known: no hint
    assert not (tmp_path / "other.db").exists()


def test_a_recipes_missing_plugin_path_is_shown_resolved(tmp_path, registry_url, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recipes").mkdir()
    write_plugged_recipe(tmp_path / "recipes", plugins='plugins = ["mine/my_methods.py"]')
    failed = invoke("run", "recipes/plugged.toml", "--registry", registry_url)
    assert failed.exit_code == 2, failed.output
    [line] = failed.output.strip().splitlines()
    assert line == (
        f"error: recipes/plugged.toml: plug-in mine/my_methods.py: no such file or folder "
        f"{tmp_path / 'recipes' / 'mine' / 'my_methods.py'}; a relative path is resolved against the recipe's folder "
        f"{tmp_path / 'recipes'}"
    )


def test_a_name_taken_by_another_plugin_names_that_plugin(tmp_path):
    first = write_method(tmp_path)
    second = write_method(tmp_path, file="other_methods.py")
    assert invoke("algorithms", "--plugin", first).exit_code == 0
    failed = invoke("algorithms", "--plugin", second)
    assert failed.exit_code == 2
    assert "algorithm 'growingprox' registered twice: 'growingprox' is registered by my_methods;" in failed.output
