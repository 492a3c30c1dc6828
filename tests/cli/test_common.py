"""Terminal lists never cut a name: `datasets list`, `algorithms` and `models`, piped (80 columns), narrow (40)
or wide, show every registered name whole on one line and no "…"; `--json` stays the library's data."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fedbench.cli import app, common
from fedbench.data.catalog import list_datasets
from fedbench.report.plugin_catalog import algorithm_entries, model_entries

runner = CliRunner()

COMMANDS = {
    ("datasets", "list"): lambda: [row["name"] for row in list_datasets(None)],
    ("algorithms",): lambda: [entry["name"] for entry in algorithm_entries()],
    ("models",): lambda: [card["name"] for card in model_entries(None, {})],
}


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_name_is_whole_on_a_line(command, width, monkeypatch):
    monkeypatch.setattr(common.console, "_width", width)
    result = runner.invoke(app, list(command))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "…" not in result.output
    assert max(len(line) for line in lines) <= width
    names = COMMANDS[command]()
    assert len(names) > 5
    for name in names:
        # a name on a line of its own (blocks) or between a table's borders
        assert any(line.strip() == name or line.startswith(f"│ {name} ") for line in lines), (name, width)


def test_a_long_name_is_not_cut_in_a_narrow_terminal(monkeypatch):
    monkeypatch.setattr(common.console, "_width", 40)
    output = runner.invoke(app, ["datasets", "list"]).output
    assert "office_caltech10" in output.splitlines()  # the name that used to read "office_caltech…"
    assert "  used by: lgmix" in output


@pytest.mark.parametrize("command", list(COMMANDS))
def test_json_is_the_library_data(command, monkeypatch):
    monkeypatch.setattr(common.console, "_width", 40)
    data = json.loads(runner.invoke(app, [*command, "--json"]).stdout)
    assert [entry["name"] for entry in data] == COMMANDS[command]()


@pytest.mark.slow
def test_piped_with_columns_40():
    env = {**os.environ, "COLUMNS": "40"}
    out = subprocess.run(
        [sys.executable, "-m", "fedbench.cli", "datasets", "list"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "…" not in out and "office_caltech10" in out.splitlines()


@pytest.mark.parametrize("width", [60, 78, 79, 80, 120])
def test_whole_columns_keep_each_line_and_the_table_never_crosses_the_width(width, monkeypatch, capsys):
    """A table that just fits: rich's own narrowing cut a label column below its longest line and cropped the
    last column at the terminal's edge; print_listing fixes the widths itself, or falls back to blocks."""
    monkeypatch.setattr(common.console, "_width", width)
    labels = "algorithm=fedavg\ncase=AlexNet CIFAR-50%"
    rows = [["fedtrip_table4", labels, "3", "1030.59", "437.77", "0.05"]] * 2
    common.print_listing(
        "plan", ("recipe", "cell", "runs", "train TFLOP", "eval TFLOP", "hours (1 worker)"), rows, (1,)
    )
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= width and "…" not in "".join(lines)
    for name in ("fedtrip_table4", "algorithm=fedavg", "case=AlexNet CIFAR-50%", "437.77", "0.05"):
        assert any(name in line for line in lines), (name, width)
    assert any(line.startswith("┏") for line in lines) == (width >= 79)  # 79: every column's room and borders


def test_one_line_entries_wrap_instead_of_blocks(monkeypatch, capsys):
    monkeypatch.setattr(common.console, "_width", 30)
    common.print_listing(None, ("id", "labels", "status"), [["7", "algorithm=fedprox\nseed=1", "done"]], (1,), True)
    assert " ".join(capsys.readouterr().out.split()) == "7 · labels: algorithm=fedprox, seed=1 · status: done"
