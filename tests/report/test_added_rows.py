"""A value added with ``--add`` in a report (fedbench/report/table.py, stats.py, render/): one more row (or column)
with its figure and its ▲/▼/· mark against the table's baseline, no published value even where the view has one
under its label, marked ⁺ in every format; the recipe's own cells, their marks and Holm-corrected p-values are what
they are without it. Curves are written by hand into a real registry, so every number is known."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.recipes.additions import Additions
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.views import TableView
from fedbench.registry import Registry
from fedbench.report.collect import build_tables
from fedbench.report.render import render
from fedbench.report.render.notes import ADDED_MARK
from fedbench.report.stats import ALPHA, holm
from fedbench.report.table import build_table

# Best test accuracy (%) per algorithm and seed. FedProx − FedAvg = 2, 3, 1.5, 1.5, 1, 1.5, all positive: p = 2/64
# alone (the smallest six pairs allow), but not after a Holm correction together with SCAFFOLD's test (5, −1, 3, −1,
# 1, 0.5: p = 0.34); SCAFFOLD's row has no significant difference.
BEST = {
    "fedavg": [50.0, 52.0, 54.0, 51.0, 53.0, 50.5],
    "fedprox": [52.0, 55.0, 55.5, 52.5, 54.0, 52.0],
    "scaffold": [55.0, 51.0, 57.0, 50.0, 54.0, 51.0],
}
SEEDS = [0, 1, 2, 3, 4, 5]
RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.fixture
def stored(write_recipe, registry_url):
    """The tiny recipe at six seeds with SCAFFOLD added, every run finished with the curves of BEST."""
    from conftest import TINY_RECIPE

    recipe = load_recipe(write_recipe(TINY_RECIPE.replace("seeds = [0, 1]", "seeds = [0, 1, 2, 3, 4, 5]")))
    (wider,) = Additions.parse(["algorithm=scaffold"]).extend([recipe])
    registry = Registry(registry_url)
    planned = expand(wider)
    registry.ensure_runs([p.registry_entry() for p in planned])
    for p in planned:
        best = BEST[p.labels["algorithm"]][SEEDS.index(p.spec.seed)] / 100
        run_id = registry.claim(p.spec_hash)
        for i, acc in enumerate([best - 0.1, best, best - 0.05]):
            registry.log_round(run_id, RoundRecord(i + 1, 0.1, 1.0, 100, 100, test_acc=acc))
        registry.finish(run_id, "done")
    return recipe, wider, registry


def tables(stored, **view):
    """The view (the recipe's first, changed by ``view``) without and with the added value."""
    recipe, wider, registry = stored
    built = TableView(**{**recipe.tables[0].model_dump(), **view})
    return build_table(recipe, built, registry), build_table(wider, built, registry)


def test_the_added_value_is_one_more_row_with_its_figure_and_the_recipes_rows_are_unchanged(stored):
    plain, table = tables(stored)
    assert plain.rows == ["fedavg", "fedprox"] and table.rows == ["fedavg", "fedprox", "scaffold"]
    assert (table.added_rows, table.added_columns, plain.added_rows) == (["scaffold"], [], [])
    scaffold = table.cells[("scaffold", "")]
    assert scaffold.added and scaffold.n == 6 and scaffold.mean == pytest.approx(sum(BEST["scaffold"]) / 6)
    for key, cell in plain.cells.items():
        mine = table.cells[key]
        assert not mine.added and (mine.mean, mine.values, mine.published) == (cell.mean, cell.values, cell.published)
        assert mine.comparison == cell.comparison and mine.verdict == cell.verdict


def test_the_added_row_is_compared_with_the_baseline_and_corrected_apart_from_the_recipes_rows(stored):
    plain, table = tables(stored)
    fedprox, scaffold = table.cells[("fedprox", "")], table.cells[("scaffold", "")]
    assert fedprox.comparison.outcome == "better" and fedprox.comparison.mark == "▲"
    assert fedprox.comparison.p_value == 2 / 64 == fedprox.comparison.p_holm
    assert scaffold.comparison.baseline == "fedavg" and scaffold.comparison.pairs == 6
    assert scaffold.comparison.difference == pytest.approx(1.25)  # (5 − 1 + 3 − 1 + 1 + 0.5) / 6
    assert scaffold.comparison.outcome == "same" and scaffold.comparison.mark == "·"
    # one family for both would have cost FedProx its mark: the added row leaves the recipe's marks alone
    assert holm([fedprox.comparison.p_value, scaffold.comparison.p_value])[0] >= ALPHA
    assert fedprox.comparison.p_holm == plain.cells[("fedprox", "")].comparison.p_holm == fedprox.comparison.p_value


def test_no_published_value_reaches_the_added_row_even_under_its_label(stored):
    published = {"fedavg": 50.0, "fedprox": 55.0, "scaffold": 99.0}
    _, table = tables(stored, published=published, published_ratio={"scaffold": 2.0}, ratio_to="fedavg")
    scaffold = table.cells[("scaffold", "")]
    assert scaffold.published is None and scaffold.verdict is None
    assert scaffold.published_ratio is None and scaffold.printed_ratio is None
    assert scaffold.ratio == pytest.approx(scaffold.mean / table.cells[("fedavg", "")].mean)
    assert table.cells[("fedprox", "")].published == 55.0 and table.cells[("fedprox", "")].verdict is not None


def test_an_added_column_is_marked_like_a_row(stored):
    _, table = tables(stored, rows=[], columns=["algorithm"], published={})
    assert table.columns == ["fedavg", "fedprox", "scaffold"] and table.added_columns == ["scaffold"]
    assert table.added_rows == []  # the one row, "", holds the recipe's cells too
    assert table.cells[("", "scaffold")].comparison.mark == "·"
    markdown = render([table], "markdown")
    assert f"| scaffold{ADDED_MARK} |" in markdown and f"fedprox{ADDED_MARK}" not in markdown


def test_every_format_marks_the_added_row_and_says_what_the_mark_means(stored):
    _, table = tables(stored)
    markdown = render([table], "markdown")
    assert f"| scaffold{ADDED_MARK} | 53.00 ± " in markdown and f"| fedprox{ADDED_MARK}" not in markdown
    assert f"- {ADDED_MARK} added with --add: not in the paper's recipe, so no published value." in markdown
    assert "Holm-corrected across the recipe's cells, and apart across the added ones" in markdown
    latex = render([table], "latex")
    assert "scaffold$^{+}$" in latex
    document = json.loads(render([table], "json"))["tables"][0]
    assert (document["added_rows"], document["added_columns"]) == (["scaffold"], [])
    assert [c["added"] for c in document["cells"]] == [False, False, True]
    rows = list(csv.DictReader(io.StringIO(render([table], "csv"))))
    assert [(r["row"], r["added"], r["published"]) for r in rows] == [
        ("fedavg", "False", "50.0"),
        ("fedprox", "False", ""),
        ("scaffold", "True", ""),
    ]
    plain, _ = tables(stored)
    assert ADDED_MARK not in render([plain], "markdown")


@pytest.mark.parametrize(("name", "method"), [("fedtrip_table4", "scaffold"), ("fedimpro_table1", "moon")])
def test_a_paper_table_gets_the_row_or_column_without_published_values_and_the_same_reproduction_count(name, method):
    recipe = load_recipe(RECIPES / f"{name}.toml")
    (wider,) = Additions.parse([f"algorithm={method}"]).extend([recipe])
    plain, tables = build_tables([recipe], None), build_tables([wider], None)
    sides = set()
    for before, after in zip(plain, tables):
        if "algorithm" not in before.view.rows + before.view.columns:
            continue
        side = "rows" if "algorithm" in before.view.rows else "columns"
        sides.add(side)
        assert getattr(after, side) == [*getattr(before, side), method]
        assert getattr(after, f"added_{side}") == [method] and not getattr(
            after, "added_" + ({"rows", "columns"} - {side}).pop()
        )
        added = [cell for cell in after.cells.values() if cell.added]
        assert added and all(c.labels["algorithm"] == method and c.published is None for c in added)
        assert after.reproduction() == before.reproduction()
        assert {k: c.published for k, c in before.cells.items()} == {
            k: c.published for k, c in after.cells.items() if not c.added
        }
        if before.view.published:
            assert any(c.published is not None for c in after.cells.values())  # the paper's numbers stay in place
    assert sides == ({"rows", "columns"} if name == "fedtrip_table4" else {"columns"})


def test_only_on_an_added_value_keeps_the_baseline_and_its_test(stored):
    recipe, wider, registry = stored
    view = recipe.tables[0]
    alone = build_table(wider, view, registry, only={"algorithm": {"scaffold"}})
    assert alone.rows == ["fedavg", "scaffold"] and alone.baseline == "fedavg"
    whole = build_table(wider, view, registry)
    assert alone.cells[("scaffold", "")].comparison == whole.cells[("scaffold", "")].comparison
    assert alone.cells[("scaffold", "")].comparison.pairs == 6
    # a selection of the recipe's own values keeps the baseline too; one without the baseline axis is left alone
    own = build_table(recipe, view, registry, only={"algorithm": {"fedprox"}})
    assert own.rows == ["fedavg", "fedprox"] and own.cells[("fedprox", "")].comparison.outcome == "better"
    assert build_table(recipe, view, registry, only={"algorithm": {"fedavg", "fedprox"}}).rows == ["fedavg", "fedprox"]
    markdown = render([alone], "markdown")
    assert f"scaffold{ADDED_MARK}: · no significant difference from fedavg in 1 of 1 cell" in markdown


def test_report_only_on_an_added_value_through_the_command_line(stored, registry_url):
    from typer.testing import CliRunner

    from fedbench.cli import app

    recipe, _, _ = stored
    args = ["report", "--recipe", str(recipe.source), "--registry", registry_url, "--add", "algorithm=scaffold"]
    result = CliRunner().invoke(app, [*args, "--only", "algorithm=scaffold", "--format", "json"])
    assert result.exit_code == 0, result.output
    (table,) = json.loads(result.output)["tables"]
    assert table["rows"] == ["fedavg", "scaffold"] and table["baseline"] == "fedavg"
    scaffold = next(c for c in table["cells"] if c["row"] == "scaffold")
    assert scaffold["baseline"]["pairs"] == 6 and scaffold["baseline"]["mark"] == "·"


SPEED_VIEW = """
[[tables]]
name = "speed"
title = "Rounds to 50 %"
rows = ["algorithm"]
columns = []
figure = "rounds_to_target"
target_by = { fedavg = 50, fedprox = 50 }
"""


def test_an_added_row_without_a_target_says_so_and_set_for_gives_it_one(stored, registry_url, write_recipe):
    from typer.testing import CliRunner

    from conftest import TINY_RECIPE
    from fedbench.cli import app

    # the same runs (a view changes no spec hash), with a rounds-to-target view whose targets are per row
    path = write_recipe(TINY_RECIPE.replace("seeds = [0, 1]", "seeds = [0, 1, 2, 3, 4, 5]") + SPEED_VIEW, "speed.toml")
    args = [
        "report",
        "--recipe",
        str(path),
        "--registry",
        registry_url,
        "--table",
        "speed",
        "--add",
        "algorithm=scaffold",
    ]

    def report(*extra: str) -> str:
        result = CliRunner().invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        return result.output

    (table,) = json.loads(report("--format", "json"))["tables"]
    scaffold = next(c for c in table["cells"] if c["row"] == "scaffold")
    assert scaffold["no_target"] is True and scaffold["not_reached"] == 0 and scaffold["baseline"] is None
    markdown = report("--format", "markdown")
    assert f"| scaffold{ADDED_MARK} | no target (n=6) |" in markdown
    assert "not reached" not in markdown and ">3" not in markdown
    assert "no target: the table gives this row or column no target" in markdown

    (table,) = json.loads(report("--set-for", "algorithm=scaffold:target=50", "--format", "json"))["tables"]
    scaffold = next(c for c in table["cells"] if c["row"] == "scaffold")
    # every SCAFFOLD seed's curve (best − 10, best, best − 5 points) is at or above 50 % at round 2 or earlier
    assert scaffold["no_target"] is False and all(v in (1, 2) for v in scaffold["values"])
    assert scaffold["baseline"]["pairs"] == 6
    fedavg = next(c for c in table["cells"] if c["row"] == "fedavg")
    assert fedavg["no_target"] is False


# A FedTrip Table IV-like table: a case per column, each with its target (target_by), and a case added with --add.
CASES = """
paper = "testpaper"
name = "cases"
title = "Cases"
seeds = [0, 1, 2, 3, 4, 5]

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 2
rounds = 3
batch_size = 64
optimizer = { lr = 0.1 }

[matrix]
algorithm = ["fedavg", "fedprox"]
case = [{ label = "H32", model_params = { hidden = 32 } }, { label = "H16", model_params = { hidden = 16 } }]

[[tables]]
name = "rounds"
title = "Rounds to the case's target"
rows = ["algorithm"]
columns = ["case"]
figure = "rounds_to_target"
target_by = { H32 = 50, H16 = 50 }
"""
H8 = 'case={ label = "H8", model_params = { hidden = 8 } }'
# test accuracy per round, every seed alike: FedAvg reaches 50 % at round 2 and 60 % at round 3, FedProx 50 % at
# round 1 and 60 % at round 2 (six equal differences: p = 2/64, below 0.05 alone in the added family, not after
# Holm over the recipe's two columns)
CURVES = {"fedavg": [0.40, 0.55, 0.62], "fedprox": [0.52, 0.61, 0.62]}


@pytest.fixture
def cases(write_recipe, registry_url):
    """The CASES recipe and the CLI's report of it with H8 added (``report(*options)``: its output), every run of
    CURVES stored."""
    from typer.testing import CliRunner

    from fedbench.cli import app

    path = write_recipe(CASES, "cases.toml")
    (wider,) = Additions.parse([H8]).extend([load_recipe(path)])
    registry = Registry(registry_url)
    planned = expand(wider)
    registry.ensure_runs([p.registry_entry() for p in planned])
    for p in planned:
        run_id = registry.claim(p.spec_hash)
        for i, acc in enumerate(CURVES[p.labels["algorithm"]]):
            registry.log_round(run_id, RoundRecord(i + 1, 0.1, 1.0, 100, 100, test_acc=acc))
        registry.finish(run_id, "done")

    def report(*options: str) -> str:
        args = ["report", "--recipe", str(path), "--registry", registry_url, "--add", H8, *options]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        return result.stdout

    return report


@pytest.mark.parametrize("fmt", ["rich", "markdown", "latex", "html"])
def test_an_added_column_without_a_target_reads_no_target_in_every_format(cases, fmt):
    text = cases("--format", fmt)
    assert "no target (n=6)" in text and "not reached" not in text and ">3" not in text
    assert ("$>$3" not in text) and text.count("no target (n=6)") == 2  # FedAvg's and FedProx's H8 cells


def test_an_added_column_without_a_target_in_json_and_csv(cases):
    (table,) = json.loads(cases("--format", "json"))["tables"]
    cells = {(c["row"], c["column"]): c for c in table["cells"]}
    for algorithm in ("fedavg", "fedprox"):
        h8, h32 = cells[(algorithm, "H8")], cells[(algorithm, "H32")]
        assert (h8["no_target"], h8["target"], h8["not_reached"], h8["baseline"]) == (True, None, 0, None)
        assert h8["values"] == [None] * 6 and h8["mean"] is None and h8["added"]
        assert (h32["no_target"], h32["target"]) == (False, 50.0)
    own = cells[("fedprox", "H32")]["baseline"]  # the recipe's own cells keep their test: Holm over H32 and H16
    assert (own["p_value"], own["p_holm"], own["mark"]) == (2 / 64, 4 / 64, "·")
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(cases("--format", "csv")))}
    assert (rows[("fedprox", "H8")]["no_target"], rows[("fedprox", "H8")]["target"]) == ("True", "")
    assert (rows[("fedprox", "H32")]["no_target"], rows[("fedprox", "H32")]["target"]) == ("False", "50.0")


def test_set_for_gives_the_added_column_its_target_and_only_on_it_keeps_the_baseline_test(cases):
    target = ("--set-for", "case=H8:target=60")
    (table,) = json.loads(cases(*target, "--format", "json"))["tables"]
    cells = {(c["row"], c["column"]): c for c in table["cells"]}
    fedavg, fedprox = cells[("fedavg", "H8")], cells[("fedprox", "H8")]
    assert (fedavg["no_target"], fedavg["target"], fedavg["values"]) == (False, 60.0, [3] * 6)
    assert (fedprox["target"], fedprox["values"], fedprox["baseline"]["mark"]) == (60.0, [2] * 6, "▲")
    assert cells[("fedprox", "H32")]["values"] == [1] * 6  # the recipe's own columns keep their 50 %
    # --only on the added column and a method: the baseline's cell of the column is read and shown, and tested
    markdown = cases(*target, "--only", "case=H8", "--only", "algorithm=fedprox", "--format", "markdown")
    assert f"| algorithm | H8{ADDED_MARK} |" in markdown and "| fedavg | 3 ± 0 (n=6) |" in markdown
    assert "| fedprox | 2 ± 0 (n=6) ▲ |" in markdown
    assert f"fedprox{ADDED_MARK}: ▲ better than fedavg in 1 of 1 cell" in markdown  # the added cells' line
    assert f"fedavg{ADDED_MARK}" not in markdown  # the recipe's rows are not marked added, though all cells are
