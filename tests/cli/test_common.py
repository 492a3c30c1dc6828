"""The CLI's shared parts (``fedbench/cli/common.py``): one error handler (a user error is one line on stderr and
exit code 2 in every command; only fedbench/cli prints or exits), and terminal lists that never cut a name:
`datasets list`, `algorithms` and `models`, piped (80 columns), narrow (40) or wide, show every registered name
whole on one line and no "…"; `--json` stays the library's data."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_fixtures import assert_user_error, runner
from fedbench.cli import app, common
from fedbench.data.provision import list_datasets
from fedbench.report.plugin_listing import algorithm_entries, model_entries

PACKAGE = Path(__file__).resolve().parents[2] / "fedbench"


@pytest.mark.parametrize(
    "args, words",
    [
        (["run", "recipes/quickstart.toml", "--set", "rounds"], ("--set 'rounds'", "expected KEY=VALUE")),
        (["run", "recipes/quickstart.toml", "--only", "algorithm"], ("--only 'algorithm'", "expected KEY=VALUE")),
        (["run", "recipes/quickstart.toml", "--set", "rounds=3", "--set", "rounds.x=1"], ("already set",)),
        (["run", "recipes/quickstart.toml", "--seeds", "0,x"], ("--seeds",)),
        # past the registry's 64-bit seed column (was an OverflowError from SQLite once the runs were registered)
        (["run", "recipes/quickstart.toml", "--seeds", "0,9223372036854775808"], ("--seeds", "64-bit")),
        (["models", "lenet5", "--set", "num_classes"], ("--set 'num_classes'",)),
        (["models", "--set", "num_classes=10"], ("needs a model NAME",)),
        (["models", "lenet5", "--set", "bogus=1"], ("bogus",)),
        (["datasets", "info", "mnsit"], ("did you mean mnist",)),
        (["report", "--format", "pdf"], ("--format 'pdf'",)),
    ],
)
def test_every_command_reports_user_errors_the_same_way(args, words, registry_url, monkeypatch):
    monkeypatch.chdir(PACKAGE.parent)
    assert_user_error(
        runner.invoke(app, [*args, "--registry", registry_url] if args[0] in ("run", "report") else args), *words
    )


def test_show_of_a_missing_registry_is_a_user_error(tmp_path):
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert_user_error(runner.invoke(app, ["show", "1", "--registry", url]), "no registry at", "run a recipe first")
    assert not (tmp_path / "none.db").exists()


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                names.add(f"{func.value.id}.{func.attr}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names.update(f"import {a.name}" for a in node.names)
            if module:
                names.add(f"import {module}")
    return names


def test_only_the_cli_package_prints_or_exits():
    """DESIGN: library code never prints or exits; fedbench/cli/ is the only place that does."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(PACKAGE / "cli"):
            continue
        used = _calls(ast.parse(path.read_text(), str(path)))
        bad = used & {"print", "sys.exit", "exit", "os._exit", "import typer", "import click"}
        if bad:
            offenders.append(f"{path.relative_to(PACKAGE.parent)}: {', '.join(sorted(bad))}")
    assert not offenders, offenders


COMMANDS = {
    ("datasets", "list"): lambda: [row["name"] for row in list_datasets(None)],
    ("algorithms",): lambda: [entry["name"] for entry in algorithm_entries()],
    ("models",): lambda: [card["name"] for card in model_entries(None, {})],
}


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_name_is_whole_on_a_line(command, width, monkeypatch):
    monkeypatch.setattr(common.console, "_width", width)
    result = runner.invoke(app, list(command))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "…" not in result.output
    assert max(len(line) for line in lines) <= width
    names = COMMANDS[command]()
    assert len(names) > 5
    for name in names:
        # a name on a line of its own (blocks) or between a table's borders
        assert any(line.strip() == name or line.startswith(f"│ {name} ") for line in lines), (name, width)


def test_a_long_name_is_not_cut_in_a_narrow_terminal(monkeypatch):
    monkeypatch.setattr(common.console, "_width", 40)
    output = runner.invoke(app, ["datasets", "list"]).output
    assert "office_caltech10" in output.splitlines()  # the name that used to read "office_caltech…"
    assert "  used by: lgmix" in output


@pytest.mark.parametrize("command", list(COMMANDS))
def test_json_is_the_library_data(command, monkeypatch):
    monkeypatch.setattr(common.console, "_width", 40)
    data = json.loads(runner.invoke(app, [*command, "--json"]).stdout)
    assert [entry["name"] for entry in data] == COMMANDS[command]()


@pytest.mark.slow
def test_piped_with_columns_40():
    env = {**os.environ, "COLUMNS": "40"}
    out = subprocess.run(
        [sys.executable, "-m", "fedbench.cli", "datasets", "list"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "…" not in out and "office_caltech10" in out.splitlines()


@pytest.mark.parametrize("width", [60, 78, 79, 80, 120])
def test_whole_columns_keep_each_line_and_the_table_never_crosses_the_width(width, monkeypatch, capsys):
    """A table that just fits: rich's own narrowing cut a label column below its longest line and cropped the
    last column at the terminal's edge; print_listing fixes the widths itself, or falls back to blocks."""
    monkeypatch.setattr(common.console, "_width", width)
    labels = "algorithm=fedavg\ncase=AlexNet CIFAR-50%"
    rows = [["fedtrip_table4", labels, "3", "1030.59", "437.77", "0.05"]] * 2
    common.print_listing(
        "plan", ("recipe", "cell", "runs", "train TFLOP", "eval TFLOP", "hours (1 worker)"), rows, (1,)
    )
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= width and "…" not in "".join(lines)
    for name in ("fedtrip_table4", "algorithm=fedavg", "case=AlexNet CIFAR-50%", "437.77", "0.05"):
        assert any(name in line for line in lines), (name, width)
    assert any(line.startswith("┏") for line in lines) == (width >= 79)  # 79: every column's room and borders


def test_one_line_entries_wrap_instead_of_blocks(monkeypatch, capsys):
    monkeypatch.setattr(common.console, "_width", 30)
    common.print_listing(None, ("id", "labels", "status"), [["7", "algorithm=fedprox\nseed=1", "done"]], (1,), True)
    assert " ".join(capsys.readouterr().out.split()) == "7 · labels: algorithm=fedprox, seed=1 · status: done"


@pytest.mark.parametrize(
    ("argv", "noted"),
    [
        (["runs", "--paper", "fedtirp"], ["paper 'fedtirp'", "its papers: fedtrip, lgmix"]),
        (["runs", "--paper", "fedtirp", "--json"], ["paper 'fedtirp'", "its papers: fedtrip, lgmix"]),
        (
            ["status", "--recipe", "fedtrip_tabel1"],
            ["recipe 'fedtrip_tabel1'", "its recipes: fedtrip_table1, lgmix_t2"],
        ),
        (["status", "--paper", "nope", "--recipe", "lgmix_t2"], ["paper 'nope'"]),  # only the name that matched nothing
        (["export", "--paper", "lgmx"], ["paper 'lgmx'", "its papers: fedtrip, lgmix"]),
        (["runs", "--paper", "fedtrip"], []),  # it has runs
        (["runs", "--paper", "fedtrip", "--status", "done"], []),  # it has runs, none done: a filter, not a typo
        (["export", "--paper", "fedtrip"], []),  # it has runs, none finished: nothing to export, no typo
    ],
)
def test_a_paper_or_recipe_of_no_run_is_noted_with_the_names_the_registry_has(argv, noted, registry_url):
    """A misspelt ``--paper`` or ``--recipe`` must not read as "no runs yet": the listing comes with a note on stderr
    naming the registry's papers (or recipes); the output itself, and the exit code, are those of an empty result."""
    from fedbench.registry import Registry
    from registry_fixtures import entry

    Registry(registry_url).ensure_runs(
        [
            entry(1, paper="fedtrip", recipe="fedtrip_table1"),
            entry(2, paper="lgmix", recipe="lgmix_t2"),
        ]
    )
    result = runner.invoke(app, [*argv, "--registry", registry_url])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == (1 if noted else 0)
    for words in noted:
        assert words in notes[0]
    if "--json" in argv:
        assert json.loads(result.stdout) == []  # the note is on stderr, the JSON stays clean
