"""The worked example of docs/extending.md, ``examples/my-fl-method/``: a package whose entry point (group
``fedbench.plugins``) registers a method (``adaprox``), a model (``tiny_cnn``) and a data set (``sitedigits``).

Installed as a user installs it (``pip install``, here into a folder of its own that only these tests' ``fedbench``
processes have on their path, so no other test sees its names) and used through the command line with no
``--plugin``: the method trains as one more row of recipes/quickstart.toml (``run --add``, ``report --add``) while
the recipe's own runs keep their specs, it passes ``check-method``, and the example's recipe trains its model on its
data set, read by its own loader and by fedbench's ``imagefolder``. Not installed, its package folder loads with
``--plugin``."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.execution.contract import PROPERTIES
from fedbench.recipes.expand import compile_recipes

pytestmark = pytest.mark.slow
REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLE = REPOSITORY / "examples" / "my-fl-method"
QUICKSTART = REPOSITORY / "recipes" / "quickstart.toml"


def build_isolation() -> list[str]:
    """Build with the setuptools at hand when it is recent enough (offline, and seconds faster); else pip fetches the
    one the example's pyproject.toml asks for."""
    try:
        recent = int(importlib.metadata.version("setuptools").split(".")[0]) >= 68
    except importlib.metadata.PackageNotFoundError:
        recent = False
    return ["--no-build-isolation"] if recent else []


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The example installed by pip (a regular, non-editable install) into a folder of its own, built from a copy so
    that the build leaves nothing in the repository."""
    source, target = tmp_path_factory.mktemp("example") / "my-fl-method", tmp_path_factory.mktemp("site")
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--quiet", *build_isolation()]
        + ["--target", str(target), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def fedbench(*args: object, cwd: Path, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``fedbench ARGS`` in a fresh process, as a user runs it; with ``site`` on its path, the example is installed
    there and its entry point loads."""
    path = [str(site)] if site is not None else []
    done = subprocess.run(
        [sys.executable, "-m", "fedbench.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,  # a default registry or data folder, were a command to reach for one, lands here
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def runs_of(registry_url: str, cwd: Path) -> list[dict]:
    return json.loads(fedbench("runs", "--registry", registry_url, "--json", cwd=cwd).stdout)


def report_cells(cwd: Path, site: Path, *args: object) -> dict[tuple[str, str], dict]:
    shown = json.loads(fedbench("report", *args, "--format", "json", cwd=cwd, site=site).stdout)
    return {(cell["row"], cell["column"]): cell for cell in shown["tables"][0]["cells"]}


def test_the_installed_method_is_one_more_row_of_a_papers_table(site, tmp_path, registry_url):
    smoke = ["--scale", "smoke", "--registry", registry_url, "--add", "algorithm=adaprox"]
    fedbench("run", QUICKSTART, *smoke, cwd=tmp_path, site=site)
    runs = {run["labels"]["algorithm"]: run for run in runs_of(registry_url, tmp_path)}
    assert {name: run["status"] for name, run in runs.items()} == {
        "fedavg": "done",
        "fedprox": "done",
        "adaprox": "done",
    }
    # the recipe's own runs are the specs it compiles to without --add (the same hashes: not other runs)
    own = {planned.spec.algorithm: planned.spec_hash for planned in compile_recipes([QUICKSTART], scale="smoke")}
    assert {name: runs[name]["spec_hash"] for name in own} == own
    added = runs["adaprox"]
    assert added["labels"] == {"algorithm": "adaprox", "added": "algorithm"}
    [record] = added["provenance"]["plugins"]
    assert (record["module"], record["distribution"], record["source"]) == (
        "my_fl_method",
        "my-fl-method",
        "entry point my_fl_method = my_fl_method",
    )
    assert added["spec"]["plugin_code"] == {"algorithm": f"sha256:{record['sha256']}"}
    assert set(record["files"]) >= {"my_fl_method/__init__.py", "my_fl_method/method.py"}

    cells = report_cells(tmp_path, site, "--recipe", QUICKSTART, *smoke)
    assert cells["adaprox", ""]["added"] and cells["adaprox", ""]["published"] is None
    assert cells["adaprox", ""]["run_ids"] == [added["id"]]
    assert cells["adaprox", ""]["baseline"]["baseline"] == "fedavg"
    assert not cells["fedavg", ""]["added"] and not cells["fedprox", ""]["added"]


def test_the_installed_method_keeps_the_engine_contract(site, tmp_path):
    checked = fedbench("check-method", "adaprox", cwd=tmp_path, site=site)
    verdicts = [line.split()[:2] for line in checked.stdout.splitlines() if line.split()[:1] in (["PASS"], ["FAIL"])]
    # AdaProx declares packed_step and a FedAvg setting (mu = 0): no property is skipped
    assert verdicts == [["PASS", f"{name}:"] for name in PROPERTIES]


def test_the_example_recipe_trains_the_packages_model_on_its_data_set(site, tmp_path, registry_url):
    data = tmp_path / "data"
    written = subprocess.run(
        [sys.executable, "-m", "my_fl_method.make_sites", data / "sitedigits", "--per-site", "6"],
        capture_output=True,
        text=True,
        cwd=site,  # `python -m` imports the installed package from the working directory
        timeout=300,
    )
    assert written.returncode == 0 and "180 images" in written.stdout, written.stdout + written.stderr
    recipe = EXAMPLE / "recipe.toml"
    smoke = ["--scale", "smoke", "--registry", registry_url]
    fedbench("run", recipe, *smoke, "--data-dir", data, cwd=tmp_path, site=site)
    runs = {(run["labels"]["algorithm"], run["labels"]["loader"]): run for run in runs_of(registry_url, tmp_path)}
    assert {key: run["status"] for key, run in runs.items()} == {
        (algorithm, loader): "done" for algorithm in ("fedavg", "adaprox") for loader in ("sitedigits", "imagefolder")
    }
    # every run names the package's code for each of its parts that the package provides
    for (algorithm, loader), run in runs.items():
        parts = (
            {"model"}
            | ({"algorithm"} if algorithm == "adaprox" else set())
            | ({"dataset"} if loader == "sitedigits" else set())
        )
        assert set(run["spec"]["plugin_code"]) == parts
        assert run["spec"]["model"] == "tiny_cnn" and run["spec"]["num_clients"] == 3
    # what each loader read is in the provenance: the package's loader lists the files it hashed, imagefolder its manifest
    own = runs["fedavg", "sitedigits"]["provenance"]["data"]
    assert len(own["digests"]) == 180 and own["group_names"] == ["a_plain", "b_faint", "c_shifted"]
    assert runs["fedavg", "imagefolder"]["provenance"]["data"]["manifest"]["files"] == 180

    cells = report_cells(tmp_path, site, "--recipe", recipe, *smoke)
    assert set(cells) == {(a, loader) for a in ("fedavg", "adaprox") for loader in ("sitedigits", "imagefolder")}
    assert all(cell["n"] == 1 and 0 < cell["mean"] <= 100 for cell in cells.values())


def installed_here() -> bool:
    try:
        importlib.metadata.distribution("my-fl-method")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(installed_here(), reason="the example is installed: its folder cannot also be loaded with --plugin")
def test_the_package_folder_loads_with_plugin(tmp_path):
    folder = EXAMPLE / "src" / "my_fl_method"
    listed = fedbench("algorithms", "--plugin", folder, "--json", cwd=tmp_path)
    assert "adaprox" in {method["name"] for method in json.loads(listed.stdout)}
    checked = fedbench("check-method", "adaprox", "--plugin", folder, "--property", "resume", cwd=tmp_path)
    assert checked.stdout.startswith("PASS resume:")
