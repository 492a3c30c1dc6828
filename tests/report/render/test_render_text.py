"""The terminal report of ``make quickstart`` reads at a glance: from a registry holding the quickstart recipe's six
runs with fixed curves (written through the Registry API, so every number is exact and independent of the CPU's
kernels), ``fedbench report`` prints the summary first, then the three tables one blank line apart, then the legend
once, left-aligned, in human names (no storage key), and fits one 120×50 screen. The golden texts below are the
whole report at 80 and 120 columns and piped (no terminal: rich's 80 columns); Markdown and LaTeX follow the
same order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app, common
from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry
from fedbench.report.collect import build_tables
from fedbench.report.render import render

QUICKSTART = Path(__file__).resolve().parents[3] / "recipes" / "quickstart.toml"
ROUNDS = 20


def curve(algorithm: str, seed: int) -> list[float]:
    """Test accuracy per round. FedAvg climbs to 90.5 % at round 10 and stays at a plateau; FedProx reaches 91 %
    two to four rounds later (rounds to 90 %: worse), peaks 2.1–2.7 points above FedAvg's plateau at round 15 (best:
    better) and ends within half a point of it in the last five rounds (final: no significant difference)."""
    plateau = 0.93 + 0.003 * seed
    if algorithm == "fedavg":
        return [0.305 + 0.06 * r if r <= 10 else plateau for r in range(1, ROUNDS + 1)]
    reach = 12 + seed
    peak = 0.955 + (0.0, 0.005, 0.002)[seed]
    end = plateau + (0.004, -0.005, 0.002)[seed]
    return [
        0.30 + 0.4 * r / reach if r < reach else 0.91 if r < 15 else peak if r == 15 else end
        for r in range(1, ROUNDS + 1)
    ]


@pytest.fixture
def quickstart_registry(registry_url) -> str:
    """The quickstart recipe's runs, finished with the curves above."""
    registry = Registry(registry_url)
    planned = expand(load_recipe(QUICKSTART))
    registry.ensure_runs([p.registry_entry() for p in planned])
    for p in planned:
        run_id = registry.claim(p.spec_hash)
        for index, accuracy in enumerate(curve(p.spec.algorithm, p.spec.seed)):
            record = RoundRecord(
                round=index + 1, train_loss=0.1, wall_seconds=1.0, bytes_up=0, bytes_down=0, test_acc=accuracy
            )
            registry.log_round(run_id, record)
        registry.finish(run_id, "done")
    return registry_url


def report(registry_url: str, width: int, monkeypatch) -> str:
    monkeypatch.setattr(common.console, "_width", width)
    result = CliRunner().invoke(app, ["report", "--recipe", str(QUICKSTART), "--registry", registry_url])
    assert result.exit_code == 0, result.output
    return result.stdout


# The quickstart report at 120 columns (`make quickstart` in a 120-column terminal).
GOLDEN_120 = """\
Summary
  Best test accuracy (%) of the global model
    fedprox: · no significant difference from fedavg in 1 of 1 cell
    3 seeds: p ≥ 0.25, no cell can be marked
  Final test accuracy (%), mean of the last 5 rounds
    fedprox: · no significant difference from fedavg in 1 of 1 cell
    3 seeds: p ≥ 0.25, no cell can be marked
  Rounds to 90% test accuracy
    fedprox: · no significant difference from fedavg in 1 of 1 cell
    3 seeds: p ≥ 0.25, no cell can be marked
  Reproduction
    quickstart: no cell has a published number to compare with

Best test accuracy (%) of the global model
┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ algorithm ┃ best test accuracy (%) ┃
┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━┩
│ fedavg    │     93.30 ± 0.24 (n=3) │
│ fedprox   │   95.73 ± 0.21 (n=3) · │
└───────────┴────────────────────────┘
cell: best test accuracy (%), mean ± std over seeds.
3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

Final test accuracy (%), mean of the last 5 rounds
┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ algorithm ┃ mean of the last 5 evaluations of test accuracy (%) ┃
┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ fedavg    │                                  93.30 ± 0.24 (n=3) │
│ fedprox   │                                93.33 ± 0.41 (n=3) · │
└───────────┴─────────────────────────────────────────────────────┘
cell: mean of the last 5 evaluations of test accuracy (%), mean ± std over seeds.
3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

Rounds to 90% test accuracy
┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ algorithm ┃ rounds to 90% test accuracy ┃
┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ fedavg    │                10 ± 0 (n=3) │
│ fedprox   │            13 ± 0.8 (n=3) · │
└───────────┴─────────────────────────────┘
cell: rounds to 90% test accuracy, mean ± std over seeds.
3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

Legend
  ▲/▼ better/worse than fedavg (exact sign-flip permutation test of the mean paired difference over seeds,
  Holm-corrected across the table, p < 0.05); · no significant difference; no mark: fewer than two seed pairs.
"""

# At 80 columns, and piped (rich's width without a terminal): the same but for the notes' and legend's wrapping.
GOLDEN_80 = """\
Summary
  Best test accuracy (%) of the global model
    fedprox: · no significant difference from fedavg in 1 of 1 cell
    3 seeds: p ≥ 0.25, no cell can be marked
  Final test accuracy (%), mean of the last 5 rounds
    fedprox: · no significant difference from fedavg in 1 of 1 cell
    3 seeds: p ≥ 0.25, no cell can be marked
  Rounds to 90% test accuracy
    fedprox: · no significant difference from fedavg in 1 of 1 cell
    3 seeds: p ≥ 0.25, no cell can be marked
  Reproduction
    quickstart: no cell has a published number to compare with

Best test accuracy (%) of the global model
┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ algorithm ┃ best test accuracy (%) ┃
┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━┩
│ fedavg    │     93.30 ± 0.24 (n=3) │
│ fedprox   │   95.73 ± 0.21 (n=3) · │
└───────────┴────────────────────────┘
cell: best test accuracy (%), mean ± std over seeds.
3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

Final test accuracy (%), mean of the last 5 rounds
┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ algorithm ┃ mean of the last 5 evaluations of test accuracy (%) ┃
┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ fedavg    │                                  93.30 ± 0.24 (n=3) │
│ fedprox   │                                93.33 ± 0.41 (n=3) · │
└───────────┴─────────────────────────────────────────────────────┘
cell: mean of the last 5 evaluations of test accuracy (%), mean ± std over
seeds.
3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

Rounds to 90% test accuracy
┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ algorithm ┃ rounds to 90% test accuracy ┃
┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ fedavg    │                10 ± 0 (n=3) │
│ fedprox   │            13 ± 0.8 (n=3) · │
└───────────┴─────────────────────────────┘
cell: rounds to 90% test accuracy, mean ± std over seeds.
3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

Legend
  ▲/▼ better/worse than fedavg (exact sign-flip permutation test of the mean
  paired difference over seeds, Holm-corrected across the table, p < 0.05); · no
  significant difference; no mark: fewer than two seed pairs.
"""

GOLDEN_MARKDOWN = """\
### Summary

- Best test accuracy (%) of the global model
  - fedprox: · no significant difference from fedavg in 1 of 1 cell
  - 3 seeds: p ≥ 0.25, no cell can be marked
- Final test accuracy (%), mean of the last 5 rounds
  - fedprox: · no significant difference from fedavg in 1 of 1 cell
  - 3 seeds: p ≥ 0.25, no cell can be marked
- Rounds to 90% test accuracy
  - fedprox: · no significant difference from fedavg in 1 of 1 cell
  - 3 seeds: p ≥ 0.25, no cell can be marked
- Reproduction
  - quickstart: no cell has a published number to compare with

### Best test accuracy (%) of the global model

| algorithm | best test accuracy (%) |
|---|---|
| fedavg | 93.30 ± 0.24 (n=3) |
| fedprox | 95.73 ± 0.21 (n=3) · |

- cell: best test accuracy (%), mean ± std over seeds.
- 3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

### Final test accuracy (%), mean of the last 5 rounds

| algorithm | mean of the last 5 evaluations of test accuracy (%) |
|---|---|
| fedavg | 93.30 ± 0.24 (n=3) |
| fedprox | 93.33 ± 0.41 (n=3) · |

- cell: mean of the last 5 evaluations of test accuracy (%), mean ± std over seeds.
- 3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

### Rounds to 90% test accuracy

| algorithm | rounds to 90% test accuracy |
|---|---|
| fedavg | 10 ± 0 (n=3) |
| fedprox | 13 ± 0.8 (n=3) · |

- cell: rounds to 90% test accuracy, mean ± std over seeds.
- 3 seeds: the smallest possible p is 0.25; no cell can be marked (6 seeds could).

### Legend

- ▲/▼ better/worse than fedavg (exact sign-flip permutation test of the mean paired difference over seeds, Holm-corrected across the table, p < 0.05); · no significant difference; no mark: fewer than two seed pairs.
"""


@pytest.mark.parametrize("width, golden", [(80, GOLDEN_80), (120, GOLDEN_120)])
def test_the_quickstart_report_at_80_and_120_columns(quickstart_registry, monkeypatch, width, golden):
    assert report(quickstart_registry, width, monkeypatch) == golden


@pytest.mark.parametrize("golden", [GOLDEN_80, GOLDEN_120])
def test_the_report_reads_summary_tables_legend_on_one_screen(golden):
    lines = golden.splitlines()
    assert len(lines) <= 50 and max(len(line) for line in lines) <= 120  # one 120×50 screen
    assert lines[0] == "Summary" and lines.index("Legend") > max(i for i, x in enumerate(lines) if x.startswith("└"))
    assert golden.count("▲/▼") == 1, "the legend once"
    assert golden.count("\n\n") == 4, "a blank line before each table and before the legend"
    assert all(line == line.rstrip() for line in lines), "left-aligned, no padding to the table's width"
    for key in ("test_acc", "last_k_mean", "rounds_to_target", "reproduction:"):
        assert key not in golden, f"a storage key or the old wording in what a person reads: {key}"
    summary = lines[: lines.index("")]
    # 3 seeds: no exact test can reach p < 0.05, so FedProx's higher peak and later 90 % are no significant difference
    assert summary.count("    fedprox: · no significant difference from fedavg in 1 of 1 cell") == 3
    assert summary.count("    3 seeds: p ≥ 0.25, no cell can be marked") == 3
    assert "    quickstart: no cell has a published number to compare with" in summary


@pytest.mark.slow
def test_the_piped_report_is_the_80_column_one(quickstart_registry):
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    piped = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbench.cli",
            "report",
            "--recipe",
            str(QUICKSTART),
            "--registry",
            quickstart_registry,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    assert piped.stdout == GOLDEN_80


def test_markdown_reads_summary_tables_then_the_legend_once(quickstart_registry):
    tables = build_tables([load_recipe(QUICKSTART)], Registry(quickstart_registry))
    assert render(tables, "markdown") == GOLDEN_MARKDOWN


def test_latex_reads_summary_tables_then_the_legend_once_as_a_note(quickstart_registry):
    latex = render(build_tables([load_recipe(QUICKSTART)], Registry(quickstart_registry)), "latex")
    summary, legend = latex.index(r"\paragraph{Summary.}"), latex.index(r"\paragraph{Legend.}")
    tables = [i for i in range(len(latex)) if latex.startswith(r"\begin{table}", i)]
    assert summary == 0 and len(tables) == 3 and tables[-1] < legend
    assert latex.count("better/worse than fedavg") == 1 and "test_acc" not in latex
    assert r"\item fedprox: $\cdot$ no significant difference from fedavg in 1 of 1 cell" in latex
    assert r"p $<$ 0.05" in latex  # text-mode "<" is another glyph in LaTeX's default font encoding
    assert r"algorithm & rounds to 90\% test accuracy \\" in latex
