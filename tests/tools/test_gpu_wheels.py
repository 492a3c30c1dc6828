"""The carried wheel folder (``make gpu-wheels``, tools/gpu-requirements.txt) installs offline into a bare
Python 3.12 — a GPU machine's Python, without fedbench's dependencies — the way tools/gpu_check.py installs it
there, after which fedbench's command line imports from the working tree. Torch is not installed (the GPU machine
has it; no wheel of it is carried)."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_check_for_wheels", ROOT / "tools" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
sys.modules["gpu_check_for_wheels"] = gpu_check
spec.loader.exec_module(gpu_check)


def python312() -> str | None:
    """A working Python 3.12: $PYTHON312, python3.12 on PATH, or pyenv's (whose shim may not be active)."""
    candidates = [os.environ.get("PYTHON312"), shutil.which("python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for candidate in filter(None, candidates):
        probe = [candidate, "-c", "import sys, venv; assert sys.version_info[:2] == (3, 12)"]
        if subprocess.run(probe, capture_output=True).returncode == 0:
            return candidate
    return None


def pinned() -> dict[str, str]:
    """{normalised name: version} of tools/gpu-requirements.txt."""
    pins = {}
    for line in gpu_check.REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "_", name).lower()] = version
    return pins


@pytest.mark.slow
def test_the_carried_wheels_install_offline_into_a_bare_python_312(tmp_path):
    interpreter = python312()
    if interpreter is None:
        pytest.skip("no Python 3.12 interpreter (python3.12 on PATH, or $PYTHON312): the GPU machine's version")
    if not any(gpu_check.WHEELS.glob("*.whl")):
        pytest.skip(f"no wheels in {gpu_check.WHEELS}: run `make gpu-wheels` first")
    venv = tmp_path / "venv"
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = tmp_path / "site"

    record = gpu_check.install(python, gpu_check.WHEELS, site)

    assert record["status"] == "installed", record
    installed = {}
    for path in site.glob("*.dist-info"):
        name, version = path.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[re.sub(r"[-_.]+", "_", name).lower()] = version
    assert installed == pinned()  # every pinned package at its pinned version, and nothing else (no torch)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    probe = "import fedbench, fedbench.cli, pydantic, sqlalchemy, alembic; print(fedbench.__file__)"
    done = subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "fedbench" / "__init__.py")  # fedbench from the working tree
    assert gpu_check.install(python, gpu_check.WHEELS, site)["status"] == "not needed"  # a rerun installs nothing
