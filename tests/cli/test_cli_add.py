"""``--add`` and ``--set-for`` through the command line: ``run`` trains the added row only (the recipe's runs are
found done, same spec hashes), ``runs`` and ``export`` show the ``added`` label, ``report`` shows the row with no
published value, ``plan`` and ``run --dry-run`` list the same runs, bad input is one line and exit 2 with no registry
written, and the three commands declare the options alike (fedbench/cli/options.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fedbench.cli import app

runner = CliRunner()
SCAFFOLD = ("--add", "algorithm=scaffold", "--set-for", "algorithm=scaffold:rounds=3")


def invoke(*args: str | Path):
    return runner.invoke(app, [str(a) for a in args])


def test_run_trains_the_added_row_only_and_every_command_tells_it_apart(write_recipe, registry_url):
    recipe = write_recipe()
    first = invoke("run", recipe, "--scale", "smoke", "--registry", registry_url)
    assert first.exit_code == 0, first.output
    own = {r["spec_hash"]: r for r in json.loads(invoke("runs", "--registry", registry_url, "--json").stdout)}

    added = invoke("run", recipe, "--scale", "smoke", *SCAFFOLD, "--registry", registry_url)
    assert added.exit_code == 0, added.output
    assert "2 of 3 runs already done" in added.output and "3 done" in added.output
    runs = {r["spec_hash"]: r for r in json.loads(invoke("runs", "--registry", registry_url, "--json").stdout)}
    new = [r for key, r in runs.items() if key not in own]
    assert set(own) < set(runs) and len(new) == 1  # the recipe's runs: same hashes, not trained again
    assert new[0]["labels"] == {"algorithm": "scaffold", "added": "algorithm"}
    assert new[0]["spec"]["rounds"] == 3 and {r["spec"]["rounds"] for r in own.values()} == {2}  # --set-for
    assert all("added" not in r["labels"] for r in own.values())

    exported = [json.loads(line) for line in invoke("export", "--registry", registry_url).stdout.splitlines()[1:]]
    assert sorted(r["labels"].get("added", "") for r in exported) == ["", "", "algorithm"]

    report = invoke("report", "--recipe", recipe, "--scale", "smoke", *SCAFFOLD, "--registry", registry_url,
                    "--format", "json")  # fmt: skip
    assert report.exit_code == 0, report.output
    table = json.loads(report.stdout)["tables"][0]
    cells = {c["row"]: c for c in table["cells"]}
    assert list(cells) == ["fedavg", "fedprox", "scaffold"] and table["added_rows"] == ["scaffold"]
    assert cells["scaffold"]["n"] == 1 and cells["scaffold"]["published"] is None and cells["scaffold"]["added"]
    assert cells["fedavg"]["published"] == 50.0
    rich = invoke("report", "--recipe", recipe, "--scale", "smoke", *SCAFFOLD, "--registry", registry_url)
    assert "scaffold⁺" in rich.stdout and "added with --add" in rich.stdout

    plain = invoke("report", "--recipe", recipe, "--scale", "smoke", "--registry", registry_url, "--format", "json")
    assert [c["row"] for c in json.loads(plain.stdout)["tables"][0]["cells"]] == ["fedavg", "fedprox"]
    without_set_for = invoke("report", "--recipe", recipe, "--scale", "smoke", "--add", "algorithm=scaffold",
                             "--registry", registry_url, "--format", "json")  # fmt: skip
    scaffold = [c for c in json.loads(without_set_for.stdout)["tables"][0]["cells"] if c["row"] == "scaffold"]
    assert scaffold[0]["n"] == 0  # another run: the report needs the --set-for the runs were trained with


def test_plan_and_dry_run_list_the_same_runs(write_recipe, registry_url):
    recipe = write_recipe()
    options = (recipe, "--add", "algorithm=scaffold", "--add", "algorithm=fednova", "--set-for",
               "algorithm=fednova:rounds=5", "--registry", registry_url)  # fmt: skip
    dry = invoke("run", *options, "--dry-run")
    assert dry.exit_code == 0, dry.output
    listed = re.findall(r"│ [0-9a-f]{16} │ algorithm=(\w+),?\s*│ (\d) +│ (\d) ", dry.stdout)
    assert sorted(listed) == sorted(
        (algorithm, str(seed), "5" if algorithm == "fednova" else "3")
        for algorithm in ("fedavg", "fedprox", "scaffold", "fednova")
        for seed in (0, 1)
    )
    assert dry.stdout.count("added=algorithm") == 4
    plan = invoke("plan", *options[:-2], "--throughput", "1", "--json")
    assert plan.exit_code == 0, plan.output
    cells = {c["labels"]["algorithm"]: c for c in json.loads(plan.stdout)["cells"]}
    assert {name: c["runs"] for name, c in cells.items()} == {"fedavg": 2, "fedprox": 2, "scaffold": 2, "fednova": 2}
    assert {name for name, c in cells.items() if c["labels"].get("added") == "algorithm"} == {"scaffold", "fednova"}
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()


@pytest.mark.parametrize("command", ["run", "plan", "report"])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--add", "dataset=mnist"], "'dataset' is not an axis of"),
        (["--add", "algorithm=nosuch"], "unknown algorithm 'nosuch'"),
        (["--add", "algorithm=fedavg"], "'fedavg' is already a value of axis 'algorithm'"),
        (["--add", "algorithm=scaffold", "--set-for", "algorithm=scaffold:roundz=3"], "unknown setup key 'roundz'"),
        (["--set-for", "algorithm=scaffold:rounds=3"], "no value 'scaffold' on axis 'algorithm'"),
        (["--set-for", "algorithm=fedavg"], "expected AXIS=LABEL:KEY=VALUE"),
        (["--add", "algorithm=scaffold", "--set-for", "algorithm=scaffold:target=high"], "target must be a number"),
        (["--add", "algorithm=scaffold", "--set-for", "algorithm=scaffold:target=60"], "counts to a target by"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_with_no_registry_written(
    write_recipe, registry_url, command, options, message
):
    recipe = ["--recipe", write_recipe()] if command == "report" else [write_recipe()]
    extra = ["--throughput", "1"] if command == "plan" else ["--registry", registry_url]
    result = invoke(command, *recipe, *options, *extra)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0]
    assert len(result.stderr.strip().splitlines()) == 1 or command == "report"  # report: its "no registry" note
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()


def test_run_plan_and_report_declare_the_options_alike():
    group = typer.main.get_command(app)
    commands = [{p.name: p for p in group.commands[name].params} for name in ("run", "plan", "report")]
    read = ("opts", "secondary_opts", "default", "multiple", "required", "nargs", "metavar", "help")
    for name in ("add", "set_for"):
        declared = [[getattr(params[name], key, None) for key in read] for params in commands]
        assert declared[0] == declared[1] == declared[2], name
        assert declared[0][:2] == [[f"--{name.replace('_', '-')}"], []]


@pytest.mark.parametrize("command", ["run", "report"])
@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("0.8", "table 'speed' of {recipe} counts to a target in % (e.g. target=60 for 60 %); 0.8 is not one"),
        ("abc", 'target must be a number, in the unit the table shows (e.g. --set-for "case=CNN CIFAR:target=60")'),
    ],
)
def test_a_bad_target_is_one_line_naming_the_option_and_value(write_recipe, registry_url, command, target, message):
    from conftest import TINY_RECIPE

    speed = (
        '[[tables]]\nname = "speed"\nrows = ["algorithm"]\nfigure = "rounds_to_target"\ntarget_by = { fedavg = 50 }\n'
    )
    recipe = write_recipe(TINY_RECIPE + speed)
    where = ["--recipe", recipe] if command == "report" else [recipe, "--dry-run"]
    option = f"algorithm=scaffold:target={target}"
    result = invoke(command, *where, "--add", "algorithm=scaffold", "--set-for", option, "--registry", registry_url)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    shown = option if target == "0.8" else repr(option)
    assert errors == [f"error: --set-for {shown}: {message.format(recipe=recipe)}"]
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()
