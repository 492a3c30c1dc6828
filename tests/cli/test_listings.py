"""The catalogue commands (fedbench/cli/listings.py): `algorithms --json` lists the methods, and every command's help
shows an example."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fedbench.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_catalogues(registry_url):
    algorithms = json.loads(invoke("algorithms", "--json").stdout)
    assert {"fedavg", "fedprox"} <= {a["name"] for a in algorithms}
    datasets = invoke("datasets", "list")
    assert datasets.exit_code == 0 and "digits" in datasets.output
    for command in ("run", "report", "runs", "show", "algorithms", "models"):
        help_text = invoke(command, "--help").output
        assert "Example" in help_text, command


def test_algorithms_fits_80_columns_and_filters(registry_url):
    result = invoke("algorithms", "--kind", "global")  # CliRunner's output is not a terminal: 80 columns
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "fedadam" in result.stdout and "server_lr=0.01" in result.stdout and "ditto" not in result.stdout
    assert any(line.startswith("┃ name") for line in lines[:4])  # a table, not one block per entry
    bad = invoke("algorithms", "--kind", "both")
    assert bad.exit_code == 2 and "--kind 'both': expected one of global, personal" in bad.output
