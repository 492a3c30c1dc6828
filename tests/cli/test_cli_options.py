"""The options ``fedbench run`` and ``fedbench plan`` share are declared once (``fedbench/cli/options.py``), and
``fedbench run`` builds its ``ExecutionOptions`` (its ``Settings`` and ``Launch`` within) from its flags explicitly;
each setting's flag defaults to the setting's default; a choice Typer does not know is refused before anything
runs, in a dry run too; both commands turn the options that compile recipes into the compiler's keyword arguments
in one place (``compile_options``)."""

from __future__ import annotations

import inspect
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import typer

from fedbench.cli import app, main
from fedbench.cli import run as run_command
from fedbench.cli.options import DEFAULT_CLIENT_STATE_MIB, DEFAULTS, additions, compile_options
from fedbench.errors import FedbenchError
from fedbench.execution.options import ExecutionOptions, Launch, Launcher, RayOptions, SlurmCluster, SlurmOptions
from fedbench.execution.planning import plan_recipes
from fedbench.execution.selection import select_runs
from fedbench.settings import DEFAULT_MEMORY_BUDGET, Packing, Settings

SHARED = ("recipes", "scale", "seeds", "only", "set_", "synthetic", "device", "jobs", "threads", "data_dir")
QUICKSTART = Path(__file__).resolve().parents[2] / "recipes" / "quickstart.toml"


def parameters(command: str) -> dict:
    group = typer.main.get_command(app)
    return {p.name: p for p in group.commands[command].params}


def run_main(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit code, stderr) of ``fedbench ARGV`` run through ``main``, as the installed command runs it."""
    monkeypatch.setattr(sys, "argv", ["fedbench", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err  # type: ignore[return-value]


def options_of(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """The ``ExecutionOptions`` ``fedbench run ARGV`` builds (its plug-ins named, not loaded); the command stops
    there."""
    built: list[ExecutionOptions] = []
    real = run_command.execution_options

    def capture(*args, **kwargs):
        built.append(real(*args, **kwargs))
        raise typer.Exit(0)

    monkeypatch.setattr(run_command, "execution_options", capture)
    monkeypatch.setattr(run_command, "load_plugins", lambda sources: None)
    code, err = run_main(["run", *argv], monkeypatch, capsys)
    assert code == 0, err
    return built[0]


def test_run_and_plan_read_each_shared_option_alike():
    run, plan = parameters("run"), parameters("plan")
    for name in SHARED:
        a, b = run[name], plan[name]
        read = ("opts", "secondary_opts", "default", "multiple", "required", "min", "max", "nargs", "is_flag")
        assert [getattr(a, key, None) for key in read] == [getattr(b, key, None) for key in read], name
        assert a.type_descriptor.annotation == b.type_descriptor.annotation, name


def test_every_execution_option_is_set_from_the_run_command_line(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FEDBENCH_CHECKPOINTS", raising=False)
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
        "--eval-batch-size",
        "64",
        "--plugin",
        "my_methods.py",
        "--plugin",
        "team.methods",
        "--jobs",
        "4",
        "--executor",
        "ray",
        "--address",
        "auto",
        "--gpus-per-run",
        "0.25",
    ]
    (tmp_path / "my_methods.py").write_text("")
    monkeypatch.chdir(tmp_path)
    options = options_of(argv, monkeypatch, capsys)
    settings = Settings(
        data_root=str(tmp_path / "data"),
        verify=False,
        threads=3,
        packing=Packing.PACKED,
        fast=False,
        compile=True,
        client_state_memory=5 << 20,  # MiB on the command line
        eval_batch_size=64,
    )
    assert options == ExecutionOptions(
        registry_url="sqlite:///r.db",
        device="cuda",
        gpus=(2, 0),
        checkpoints=str(tmp_path / "ckpt"),
        plugins=(str((tmp_path / "my_methods.py").resolve()), "team.methods"),  # a path resolved for the workers
        settings=settings,
        launch=Launch(Launcher.RAY, jobs=4, ray=RayOptions(address="auto", gpus_per_run=0.25)),
    )
    # every setting has its flag: each differs from its default
    assert {f.name for f in fields(Settings) if getattr(options.settings, f.name) == f.default} == set()
    assert {f.name for f in fields(ExecutionOptions) if getattr(options, f.name) == f.default} == set()


def test_the_slurm_flags_become_the_launch_options(tmp_path, monkeypatch, capsys):
    argv = ["recipe.toml", "--executor", "slurm", "--slurm-time", "04:00:00", "--slurm-partition", "gpu"]
    argv += ["--slurm-gpus", "1", "--slurm-folder", str(tmp_path), "--slurm-cluster", "local"]
    launch = options_of(argv, monkeypatch, capsys).launch
    slurm = SlurmOptions(partition="gpu", time="04:00:00", folder=tmp_path, cluster=SlurmCluster.LOCAL, gpus_per_job=1)
    assert launch == Launch(Launcher.SLURM, slurm=slurm) and launch.cluster == slurm


def test_each_flag_defaults_to_its_setting_and_no_flag_gives_the_default_options(monkeypatch, capsys):
    monkeypatch.delenv("FEDBENCH_CHECKPOINTS", raising=False)
    assert options_of(["recipe.toml"], monkeypatch, capsys) == ExecutionOptions()
    run = parameters("run")
    assert run["threads"].default == DEFAULTS.threads == Settings().threads
    assert run["packing"].default == DEFAULTS.packing == Packing.AUTO
    assert (run["fast"].default, run["compile"].default) == (Settings().fast, Settings().compile)
    assert run["no_verify"].default is (not Settings().verify)
    assert run["client_state_memory"].default == DEFAULT_CLIENT_STATE_MIB == DEFAULT_MEMORY_BUDGET >> 20
    assert run["eval_batch_size"].default == Settings().eval_batch_size
    assert parameters("plan")["threads"].default == Settings().threads


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--packing", "bogus"], ["--packing", "bogus", "auto", "packed", "sequential"]),
        (["--executor", "bogus"], ["--executor", "bogus", "local", "ray", "slurm"]),
        (["--slurm-cluster", "bogus"], ["--slurm-cluster", "bogus"]),
    ],
)
def test_a_bad_choice_is_refused_in_one_line_even_in_a_dry_run(argv, words, tmp_path, monkeypatch, capsys):
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    code, err = run_main(["run", str(QUICKSTART), "--dry-run", "--registry", registry, *argv], monkeypatch, capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--slurm-time", "01:00:00"], "--slurm-* options need --executor slurm"),
        (["--executor", "slurm", "--address", "auto"], "--address and --gpus-per-run need --executor ray"),
        (["--executor", "slurm"], "--executor slurm needs --slurm-time"),
        (["--executor", "slurm", "--slurm-time", "1h"], "--slurm-time '1h'"),
    ],
)
def test_launch_options_without_their_launcher_are_refused_in_a_dry_run(argv, message, tmp_path, monkeypatch, capsys):
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    code, err = run_main(["run", str(QUICKSTART), "--dry-run", "--registry", registry, *argv], monkeypatch, capsys)
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_compile_options_parses_what_run_and_plan_pass_to_the_compiler():
    kwargs = compile_options("smoke", "0,2", ["algorithm=fedavg"], ["rounds=3"], True, ["algorithm=fedprox"], [])
    assert kwargs["scale"] == "smoke" and kwargs["seeds"] == [0, 2] and kwargs["synthetic"] is True
    assert kwargs["only"] == {"algorithm": {"fedavg"}} and kwargs["overrides"] == {"rounds": 3}
    assert kwargs["additions"] == additions(["algorithm=fedprox"], [])
    for keyword in ("scale", "seeds", "only", "overrides", "synthetic", "additions"):  # select_runs and plan_recipes
        assert keyword in inspect.signature(select_runs).parameters
        assert keyword in inspect.signature(plan_recipes).parameters
    with pytest.raises(FedbenchError, match="--seeds"):  # checked in the order the options are listed
        compile_options("full", "x", ["bad"], [], False, [], [])
