"""The published package as a user gets it: ``python -m build`` makes the sdist and the wheel (the wheel from the
sdist, as the build front end does), ``twine check`` passes both, and the wheel, installed into a clean virtual
environment, runs the quickstart by name from a folder that holds no recipes, then renders its table.

The clean environment sees no fedbench but the wheel's: it is created without any site-packages of another
environment, the wheel installed with ``--no-deps``, and the dependencies (torch is large) read from this
interpreter's site-packages through a ``.pth`` line added after its own. A ``.pth`` line adds a folder to the path
without running that folder's ``.pth`` files, so an editable fedbench installed there stays out of it; the test
checks that ``fedbench`` is imported from the wheel's files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("build", reason="build not installed (pip install -e '.[dev]')")
pytest.importorskip("twine", reason="twine not installed (pip install -e '.[dev]')")

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[2]
DISTRIBUTION = "fedbench_repro"  # the wheel's file-name form of pyproject.toml's project.name
# What a wheel is built from: the sources, the recipes the package links to, the README it describes itself with
SOURCES = ("pyproject.toml", "README.md", "fedbench", "recipes")


def clean_environment() -> dict[str, str]:
    """This process's environment without what would put another fedbench on the path."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}


def checked(argv: list[str | Path], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, f"{argv}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """sdist and wheel built from a copy of the sources (the build writes build/ and *.egg-info beside them)."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPOSITORY / name).is_dir():
            shutil.copytree(
                REPOSITORY / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(REPOSITORY / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    # no isolation: the build uses this environment's setuptools instead of fetching one (offline, seconds faster)
    checked([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source], env=clean_environment())
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """The ``bin`` folder of a fresh virtual environment with the wheel installed."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root, with_pip=False)  # pip comes from this interpreter: `python -m pip --python`
    site = Path(sysconfig.get_path("purelib", vars={"base": root, "platbase": root}))
    (site / "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    (wheel,) = dist.glob(f"{DISTRIBUTION}-*.whl")
    python = root / "bin" / "python"
    checked(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", wheel],
        env=clean_environment(),
    )
    return root / "bin"


def test_the_sdist_and_the_wheel_pass_twine_check(dist):
    files = sorted(dist.iterdir())
    assert [f.name.split("-")[0] for f in files] == [DISTRIBUTION, DISTRIBUTION]
    result = checked([sys.executable, "-m", "twine", "check", "--strict", *files])
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_the_wheel_carries_every_shipped_recipe(dist):
    (wheel,) = dist.glob("*.whl")
    shipped = {Path(name).name for name in zipfile.ZipFile(wheel).namelist() if "/recipe_files/" in name}
    assert shipped == {path.name for path in (REPOSITORY / "recipes").glob("*.toml")}


def test_the_installed_wheel_runs_the_quickstart_by_name(installed, tmp_path):
    env = clean_environment()
    here = tmp_path / "work"  # a folder without recipes/: the names resolve to the package's own recipes
    here.mkdir()
    registry = f"sqlite:///{tmp_path / 'runs.db'}"

    def fedbench(*args: str) -> str:
        return checked([installed / "fedbench", *args], cwd=here, env=env).stdout

    where = checked([installed / "python", "-c", "import fedbench; print(fedbench.__file__)"], cwd=here, env=env)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout
    assert "quickstart" in fedbench("recipes", "list")
    fedbench("run", "quickstart", "--scale", "smoke", "--registry", registry)
    table = fedbench("report", "--recipe", "quickstart", "--scale", "smoke", "--registry", registry, "--format", "csv")
    assert "fedavg" in table and "fedprox" in table
    assert fedbench("runs", "--registry", registry, "--json").count('"status": "done"') == 2
    fedbench("recipes", "copy", "quickstart", "--to", "mine")
    assert (here / "mine" / "quickstart.toml").read_bytes() == (REPOSITORY / "recipes" / "quickstart.toml").read_bytes()
