"""`fedbench runs` (fedbench/cli/runs.py): a registry that does not exist is said, not shown as empty, and not
created."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fedbench.cli import app

runner = CliRunner()


def test_a_registry_that_does_not_exist_is_said_and_not_created(tmp_path):
    """A typo in --registry must not look like an empty registry, nor create a file."""
    url = f"sqlite:///{tmp_path / 'typo' / 'fedbench.db'}"
    result = runner.invoke(app, ["runs", "--registry", url])
    assert result.exit_code == 0
    assert f"no registry at {url} yet" in result.output and "0 runs" in result.output
    assert json.loads(runner.invoke(app, ["runs", "--registry", url, "--json"]).stdout) == []
    assert not (tmp_path / "typo").exists()
