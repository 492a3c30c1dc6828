"""The catalogue commands (fedbench/cli/catalog.py): `algorithms --json` lists the methods, and every command's help
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
