"""`fedbench datasets` (fedbench/cli/datasets.py): list, check and a missing data set through the command line."""

from __future__ import annotations

import json

import pytest

from cli_fixtures import assert_user_error, runner
from fedbench.cli import app
from fedbench.data import DATASETS


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
        # what the command passes the loader itself: was a traceback ("got multiple values for argument 'root'")
        (["-p", "root=/elsewhere"], ("--param root", "--data-dir sets it")),
        (["-p", "verify=false"], ("--param verify", "--no-verify sets it")),
        (["-p", "name=mnist"], ("--param name", "NAME sets it")),
        (["-p", "use_prepared=false"], ("--param use_prepared",)),
    ],
)
def test_datasets_bad_params_are_one_line_errors(args, words, tmp_path):
    for command in ("check", "prepare"):
        assert_user_error(
            runner.invoke(app, ["datasets", command, "digits", "--data-dir", str(tmp_path), *args]), *words
        )
    assert not any(tmp_path.iterdir())  # nothing prepared


def cli():
    import typer

    from fedbench.cli.datasets import register_cli

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fedbench"""

    register_cli(app)
    return app


def test_cli_list_check_and_missing_data(mnist_root):
    from typer.testing import CliRunner

    runner = CliRunner()
    listed = runner.invoke(cli(), ["datasets", "list", "--data-dir", str(mnist_root), "--json"])
    assert listed.exit_code == 0
    assert {row["name"] for row in json.loads(listed.output)} == set(DATASETS.names())
    checked = runner.invoke(cli(), ["datasets", "check", "mnist", "--data-dir", str(mnist_root)])
    assert checked.exit_code == 0 and "30 train / 12 test" in checked.output
    missing = runner.invoke(cli(), ["datasets", "check", "cifar10", "--data-dir", str(mnist_root)])
    assert missing.exit_code == 2
    assert "data_batch_1" in missing.output and "Traceback" not in missing.output
    bad = runner.invoke(cli(), ["datasets", "check", "mnist", "--data-dir", str(mnist_root), "-p", "bogus=1"])
    assert bad.exit_code == 2 and "bogus" in bad.output
    info = runner.invoke(cli(), ["datasets", "info", "svhn", "--json"])
    assert info.exit_code == 0 and json.loads(info.output)["name"] == "svhn"
    prepared = runner.invoke(cli(), ["datasets", "prepare", "mnist", "--data-dir", str(mnist_root), "--no-verify"])
    assert prepared.exit_code == 0 and ".fedbench-cache" in prepared.output.replace("\n", "")
