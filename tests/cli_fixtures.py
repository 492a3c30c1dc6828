"""Helpers for the CLI tests."""

from __future__ import annotations

from typer.testing import CliRunner

runner = CliRunner()


def assert_user_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.stderr
