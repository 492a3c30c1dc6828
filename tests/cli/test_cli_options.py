"""The options ``fedbench run`` and ``fedbench plan`` share are declared once (``fedbench/cli/options.py``), and
``fedbench run`` builds its ``ExecutionOptions`` from its parameters of the same names (``run.execution_options``);
both turn the options that compile recipes into the compiler's keyword arguments in one place (``compile_options``)."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest
import typer

from fedbench.cli import app
from fedbench.cli.options import additions, compile_options
from fedbench.cli.run import execution_options
from fedbench.errors import FedbenchError
from fedbench.execution.options import ExecutionOptions
from fedbench.execution.planning import plan_recipes
from fedbench.execution.selection import plan_runs

SHARED = ("recipes", "scale", "seeds", "only", "set_", "synthetic", "device", "jobs", "threads", "data_dir")


def parameters(command: str) -> dict:
    group = typer.main.get_command(app)
    return {p.name: p for p in group.commands[command].params}


def test_run_and_plan_read_each_shared_option_alike():
    run, plan = parameters("run"), parameters("plan")
    for name in SHARED:
        a, b = run[name], plan[name]
        read = ("opts", "secondary_opts", "default", "multiple", "required", "min", "max", "nargs", "is_flag")
        assert [getattr(a, key, None) for key in read] == [getattr(b, key, None) for key in read], name
        assert a.type_descriptor.annotation == b.type_descriptor.annotation, name


def test_every_execution_option_is_set_from_the_run_command_line(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDBENCH_CHECKPOINTS", raising=False)
    group = typer.main.get_command(app)
    argv = [
        "recipe.toml",
        "--registry",
        "sqlite:///r.db",
        "--device",
        "cuda",
        "--data-dir",
        str(tmp_path / "data"),
        "--no-verify",
        "--threads",
        "3",
        "--packing",
        "packed",
        "--gpus",
        "2,0",
        "--no-fast",
        "--compile",
        "--checkpoints",
        str(tmp_path / "ckpt"),
        "--client-state-memory",
        "5",
        "--plugin",
        "my_methods.py",
        "--plugin",
        "team.methods",
    ]
    (tmp_path / "my_methods.py").touch()
    monkeypatch.chdir(tmp_path)
    context = group.commands["run"].make_context("run", argv)
    options = execution_options(context.params)
    assert options == ExecutionOptions(
        registry_url="sqlite:///r.db",
        device="cuda",
        data_root=str(tmp_path / "data"),
        verify=False,
        threads=3,
        packing="packed",
        gpus=(2, 0),
        fast=False,
        compile=True,
        checkpoints=str(tmp_path / "ckpt"),
        client_state_memory=5 << 20,  # MiB on the command line
        plugins=(str((tmp_path / "my_methods.py").resolve()), "team.methods"),  # a path resolved for the workers
    )
    # every field but the evaluation batch size (not a command-line option) differs from its default
    changed = {f.name for f in fields(ExecutionOptions) if getattr(options, f.name) != f.default}
    assert changed == {f.name for f in fields(ExecutionOptions)} - {"eval_batch_size"}
    defaults = execution_options(group.commands["run"].make_context("run", ["recipe.toml"]).params)
    assert defaults == ExecutionOptions()


def test_compile_options_parses_what_run_and_plan_pass_to_the_compiler():
    kwargs = compile_options("smoke", "0,2", ["algorithm=fedavg"], ["rounds=3"], True, ["algorithm=fedprox"], [])
    assert kwargs["scale"] == "smoke" and kwargs["seeds"] == [0, 2] and kwargs["synthetic"] is True
    assert kwargs["only"] == {"algorithm": {"fedavg"}} and kwargs["overrides"] == {"rounds": 3}
    assert kwargs["additions"] == additions(["algorithm=fedprox"], [])
    for keyword in ("scale", "seeds", "only", "overrides", "synthetic", "additions"):  # plan_runs and plan_recipes
        assert keyword in inspect.signature(plan_runs).parameters
        assert keyword in inspect.signature(plan_recipes).parameters
    with pytest.raises(FedbenchError, match="--seeds"):  # checked in the order the options are listed
        compile_options("full", "x", ["bad"], [], False, [], [])
