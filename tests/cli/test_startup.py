"""Commands that train nothing and build no model start without importing torch: ``--help``, ``runs``, ``show``,
``export``, ``import``, ``report`` (of tables that need no model statistics), ``algorithms`` and ``run --dry-run``
run in a fresh process (on a registry holding one finished run of recipes/quickstart.toml) that then says which of
the heavy libraries it imported. None imports torch; none imports scipy (the report's statistics import it, and one
seed gives none), matplotlib (plots), Pillow (only reading image files needs it), MLflow or TensorBoard (only ``export --to``) or Alembic (migrations: only
``import``, which creates its registry, needs it); the commands that read no recipe nor spec import no numpy, and
``export`` does not build the spec's schema. ``benchmarks/startup.py`` times them; this test checks no timing. The
imports deferred into functions for that (or for an optional dependency) each say why, in a ``# local:`` comment."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import compile_recipes
from fedbench.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "quickstart.toml"

# The modules the probe reports on: the heavy libraries, and the spec (its pydantic schema is built on import).
WATCHED = ("torch", "scipy", "matplotlib", "alembic", "PIL", "numpy", "fedbench.spec", "mlflow", "tensorboard")
# Runs one fedbench command line (sys.argv[1:]) in this process, then prints on a last line of its own its exit code
# and which of the WATCHED modules were imported.
PROBE = f"""
import json, sys
from fedbench.cli import main
sys.argv = ["fedbench", *sys.argv[1:]]
try:
    main()
    code = 0
except SystemExit as exit:
    code = exit.code or 0
print("\\n" + json.dumps({{"exit": code, "imported": [m for m in {WATCHED!r} if m in sys.modules]}}))
"""
# PIL: only reading image files needs it; MLflow and TensorBoard only `export --to` them
HEAVY = {"torch", "scipy", "matplotlib", "alembic", "PIL", "mlflow", "tensorboard"}
# What each command must not import beyond HEAVY (show, import and report resolve specs: the data sets' loaders,
# hence numpy, and the spec; import creates its registry, so it migrates it with Alembic)
NOT_IMPORTED = {
    "--help": HEAVY | {"numpy", "fedbench.spec"},
    "runs": HEAVY | {"numpy", "fedbench.spec"},
    "show": HEAVY,
    "status": HEAVY | {"numpy", "fedbench.spec"},
    "export": HEAVY | {"numpy", "fedbench.spec"},
    "import": HEAVY - {"alembic"},
    "report": HEAVY,
    "algorithms": HEAVY | {"numpy"},
    "run --dry-run": HEAVY,  # compiles the recipe (numpy, the spec) and reads statuses: trains nothing
    "recipes list": HEAVY | {"numpy", "fedbench.spec"},  # reads the shipped recipes' TOML, compiles none
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[str, str]:
    """(registry URL, spec_hash): one finished quickstart run (smoke scale) with one round, as `fedbench run`
    records it through the Registry API."""
    url = f"sqlite:///{tmp_path_factory.mktemp('startup') / 'fedbench.db'}"
    planned = compile_recipes([RECIPE], scale="smoke")[0]
    registry = Registry(url)
    registry.ensure_runs([planned.registry_entry()])
    run_id = registry.claim(planned.spec_hash, worker="test:1")
    assert run_id is not None
    record = RoundRecord(
        round=1, train_loss=1.0, wall_seconds=0.5, bytes_up=1, bytes_down=2, test_acc=0.5, test_loss=1.2
    )
    registry.log_round(run_id, record, worker="test:1")
    registry.finish(run_id, "done", summary={"best": 0.5, "final": 0.5}, worker="test:1")
    return url, planned.spec_hash


def probe(tmp_path: Path, *args: str) -> tuple[dict, str]:
    """The probe's verdict on ``fedbench ARGS`` and what the command printed before it."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # the default registry, were a command to reach for it, lands here, not in the repository
        env={**os.environ, "COLUMNS": "200"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    output, _, verdict = done.stdout.rstrip("\n").rpartition("\n")
    return json.loads(verdict), output + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    ["--help", "runs", "show", "status", "export", "import", "report", "algorithms", "run --dry-run", "recipes list"],
)
def test_commands_that_train_nothing_do_not_import_torch(finished_run, tmp_path, command):
    url, spec_hash = finished_run
    out = tmp_path / "runs.jsonl"
    if command == "import":  # the finished run, exported, into an empty registry: its spec is resolved again
        assert probe(tmp_path, "export", "--registry", url, "--out", str(out))[0]["exit"] == 0
    args = {
        "--help": ["--help"],
        "runs": ["runs", "--registry", url],
        "show": ["show", spec_hash[:8], "--registry", url],
        "export": ["export", "--registry", url, "--out", str(out)],
        "import": ["import", str(out), "--registry", f"sqlite:///{tmp_path / 'imported.db'}"],
        # the quickstart's tables (best, last-5 mean, rounds to a target) need no model statistics
        "report": ["report", "--recipe", str(RECIPE), "--scale", "smoke", "--registry", url, "--format", "csv"],
        "algorithms": ["algorithms", "--json"],
        "status": ["status", "--registry", url],
        "run --dry-run": ["run", str(RECIPE), "--scale", "smoke", "--dry-run", "--registry", url],
        "recipes list": ["recipes", "list", "--json"],
    }[command]
    verdict, printed = probe(tmp_path, *args)
    assert verdict["exit"] == 0, printed
    # the command did its work (an early error would import nothing and prove nothing)
    if command == "--help":
        assert "runs" in printed and "export" in printed
    elif command == "export":
        assert len(out.read_text().splitlines()) == 2  # the header and the run
    elif command == "import":
        assert "imported 1 new run(s)" in printed
    elif command == "report":
        assert "quickstart,quickstart,accuracy,fedavg,,1,1,50.0," in printed  # the finished run's best, 50 %
    elif command == "algorithms":
        assert {"fedavg", "fedprox", "lgmix"} <= {entry["name"] for entry in json.loads(printed)}
    elif command == "status":
        assert "quickstart" in printed and "done" in printed
    elif command == "run --dry-run":
        assert spec_hash in printed and "done" in printed  # the finished run, as the registry has it
    elif command == "recipes list":
        assert "quickstart" in {entry["name"] for entry in json.loads(printed)}
    else:
        assert spec_hash in printed
    unwanted = sorted(NOT_IMPORTED[command] & set(verdict["imported"]))
    assert not unwanted, f"fedbench {command} imported {', '.join(unwanted)}"


@pytest.mark.slow
def test_the_probe_sees_torch_where_a_command_needs_it(tmp_path):
    verdict, printed = probe(tmp_path, "models", "digits_cnn", "--json")  # a model card builds the model
    assert verdict["exit"] == 0, printed
    assert json.loads(printed)["params"] > 0
    assert "torch" in verdict["imported"]


def unexplained_imports(source: str) -> list[int]:
    """The lines of the function-level imports of ``source`` that do not say why they are not at the top: a
    ``# local: <reason>`` comment on a line of the block of imports it belongs to (blank lines may group them) or
    in the comment above that block (CONTRIBUTING.md, "The layer rule")."""
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        imports = [node for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)]
        block = {line for node in imports for line in range(node.lineno, node.end_lineno + 1)}
        for node in imports:
            said = [lines[node.lineno - 1]]
            above = node.lineno - 1  # 1-based number of the line above the import
            # up over the block's other imports, the blank lines that group them and the comment above them
            while above >= 1 and (
                above in block or not lines[above - 1].strip() or lines[above - 1].lstrip()[0] == "#"
            ):
                said.append(lines[above - 1])
                above -= 1
            if not any("# local:" in line for line in said):
                found.append(node.lineno)
    return found


def test_every_function_level_import_says_why():
    # cli/: its package docstring gives the one reason for all of them (a command imports the library it calls)
    modules = [path for path in (ROOT / "fedbench").rglob("*.py") if path.parent.name != "cli"]
    unexplained = [
        f"{path.relative_to(ROOT)}:{line}" for path in modules for line in unexplained_imports(path.read_text())
    ]
    assert not unexplained, "function-level imports without a '# local: <reason>' comment: " + ", ".join(unexplained)


def test_an_import_without_its_reason_is_found():
    source = """
def explained():
    # local: keeps torch out of the report's start-up
    import torch

    from fedbench.models import build_model
    return torch, build_model

def unexplained():
    x = 1
    import numpy
    return numpy, x
"""
    assert unexplained_imports(source) == [11]
