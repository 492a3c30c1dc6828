"""`fedbench plan` (fedbench/cli/plan.py) in a log or an 80-column terminal: the recipe and every label of a cell are
whole on a line ("fedtrip_tab…" and "algorithm=f…" read nothing), and no line crosses the width."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app, common

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "fedtrip_table4.toml"
# FedAvg's six cells of Table IV at the quick scale; a fixed throughput: no timing run
ARGS = ["plan", str(RECIPE), "--scale", "quick", "--only", "algorithm=fedavg", "--throughput", "8"]
CASES = ("MLP MNIST-87%", "MLP FMNIST-75%", "CNN MNIST-90%", "CNN FMNIST-75%", "CNN EMNIST-62%", "AlexNet CIFAR-50%")


def assert_whole(output: str, width: int) -> None:
    lines = output.splitlines()
    assert "…" not in output
    assert max(len(line) for line in lines[:-2]) <= width  # the totals below the table wrap softly
    rows = [line for line in lines if line.startswith("│ fedtrip_table4 ")]
    assert len(rows) == 6 and all("│ algorithm=fedavg " in line for line in rows)
    for case in CASES:
        assert any(f"│ case={case} " in line for line in lines), case


def test_the_plan_at_80_columns_keeps_recipe_and_labels_whole(monkeypatch):
    monkeypatch.setattr(common.console, "_width", 80)
    result = CliRunner().invoke(app, ARGS)
    assert result.exit_code == 0, result.output
    assert_whole(result.stdout, 80)


@pytest.mark.slow
def test_the_piped_plan_keeps_recipe_and_labels_whole():
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    out = subprocess.run(
        [sys.executable, "-m", "fedbench.cli", *ARGS],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert_whole(out, 80)
