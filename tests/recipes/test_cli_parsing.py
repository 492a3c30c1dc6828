"""The CLI's shared parts: one KEY=VALUE parser (TOML values) for --set, --only and --param; one error handler
(a user error is one line on stderr and exit code 2 in every command); only fedbench/cli prints or exits."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.errors import ConfigError
from fedbench.recipes.assignments import label_filters, nested_assignments, parse_assignment, parse_assignments

runner = CliRunner()
PACKAGE = Path(__file__).resolve().parents[2] / "fedbench"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("rounds=5", ("rounds", 5)),
        ("mu=0.1", ("mu", 0.1)),
        ("flag=true", ("flag", True)),
        ("shape=[3, 32, 32]", ("shape", [3, 32, 32])),
        ('name="CNN MNIST-90%"', ("name", "CNN MNIST-90%")),
        ("name=CNN MNIST-90%", ("name", "CNN MNIST-90%")),  # not TOML: the plain string
        ("opt={ lr = 0.1 }", ("opt", {"lr": 0.1})),
        (" key =a=b", ("key", "a=b")),  # the first '=' splits
        ("empty=", ("empty", "")),
    ],
)
def test_values_are_toml_else_strings(text, expected):
    assert parse_assignment(text, "--set") == expected


@pytest.mark.parametrize("text", ["rounds", "=5", " =5"])
def test_an_assignment_needs_a_key_and_an_equals_sign(text):
    with pytest.raises(ConfigError, match="--param .*expected KEY=VALUE"):
        parse_assignment(text, "--param")


def test_flat_nested_and_label_forms():
    assert parse_assignments(["a=1", "b=x", "a=2"], "--param") == {"a": 2, "b": "x"}
    assert nested_assignments(["algorithm_params.mu=0.5", "algorithm_params.tau=1", "rounds=3"], "--set") == {
        "algorithm_params": {"mu": 0.5, "tau": 1},
        "rounds": 3,
    }
    with pytest.raises(ConfigError, match="unknown setup key 'roundz'; valid keys: rounds"):
        nested_assignments(["roundz=3"], "--set", allowed=["rounds"], what="setup key")
    with pytest.raises(ConfigError, match="already set to a value"):
        nested_assignments(["a=1", "a.b=2"], "--set")
    assert label_filters(["algorithm=fedavg", "algorithm=fedprox", "mu=0.10", "seed=1"]) == {
        "algorithm": {"fedavg", "fedprox"},
        "mu": {"0.1"},
        "seed": {"1"},
    }


def assert_user_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.stderr


def test_datasets_params_take_toml_values(tmp_path):
    ok = runner.invoke(
        app, ["datasets", "check", "digits", "--data-dir", str(tmp_path), "-p", "test_fraction=0.5", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    assert '"train": 898' in ok.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["-p", "test_fraction=abc"], ("test_fraction", "'abc'", "valid number")),  # was a traceback
        (["-p", 'test_fraction="0.5"'], ("test_fraction", "valid number")),  # a TOML string, not a number
        (["--param", "split_seed=1.5"], ("split_seed", "valid integer")),
        (["-p", "test_fraction"], ("--param 'test_fraction'", "expected KEY=VALUE")),  # was a usage box
        (["-p", "=0.5"], ("expected KEY=VALUE",)),
        (["-p", "bogus=1"], ("bogus", "accepted: split_seed, test_fraction")),
    ],
)
def test_datasets_bad_params_are_one_line_errors(args, words, tmp_path):
    for command in ("check", "prepare"):
        assert_user_error(
            runner.invoke(app, ["datasets", command, "digits", "--data-dir", str(tmp_path), *args]), *words
        )
    assert not any(tmp_path.iterdir())  # nothing prepared


@pytest.mark.parametrize(
    "args, words",
    [
        (["run", "recipes/quickstart.toml", "--set", "rounds"], ("--set 'rounds'", "expected KEY=VALUE")),
        (["run", "recipes/quickstart.toml", "--only", "algorithm"], ("--only 'algorithm'", "expected KEY=VALUE")),
        (["run", "recipes/quickstart.toml", "--set", "rounds=3", "--set", "rounds.x=1"], ("already set",)),
        (["run", "recipes/quickstart.toml", "--seeds", "0,x"], ("--seeds",)),
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
