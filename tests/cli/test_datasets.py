"""`fedbench datasets` (fedbench/cli/datasets.py): list, check and a missing data set through the command line."""

from __future__ import annotations

import json

from fedbench.data import DATASETS


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
