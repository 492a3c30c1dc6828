"""``fedbench ledger`` over an evidence folder written by the project's own tools (``fedbench run`` of a small recipe
on digits, ``fedbench export`` into PAPER/RECIPE.jsonl): the reports and the ledger it renders agree with the report
of the same runs imported into a registry, the ledger counts only cells with every run the recipe asks for, a cause
from causes.toml lands beside its cell, and ``--check`` fails on any hand edit of a generated file (but not on the
PNG bytes of a plot) and on a generated file whose runs file is gone. Bad input is one line and exit 2."""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import pytest
from typer.testing import CliRunner

from cli_fixtures import assert_user_error
from fedbench.cli import app
from fedbench.report.evidence import Cause, check_evidence, comparable, load_causes, render_evidence
from fedbench.report.render.ledger import NO_CAUSE

runner = CliRunner()

RECIPE = """
paper = "lt"
name = "lt_table1"
title = "LT Table 1: best accuracy on digits"
seeds = [0, 1, 2]
trials = 3

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "dirichlet"
partition_params = { alpha = 1.0, min_size = 5 }
num_clients = 4
clients_per_round = 4
rounds = 3
batch_size = 32
optimizer = { name = "sgd", lr = 0.05 }

[matrix]
algorithm = ["fedavg", "fedprox"]

[[tables]]
name = "accuracy"
title = "Table 1: best test accuracy (%)"
rows = ["algorithm"]
columns = []
figure = "best"

[tables.published]
fedavg = 1.0
fedprox = 1.0
"""


def invoke(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A registry with fedavg's 3 seeds and fedprox's first 2 (of 3), and an evidence folder holding their export."""
    root = tmp_path_factory.mktemp("evidence")
    recipes = root / "recipes"
    recipes.mkdir()
    recipe = recipes / "lt_table1.toml"
    recipe.write_text(textwrap.dedent(RECIPE))
    url = f"sqlite:///{root / 'trained.db'}"
    for selection in (["--only", "algorithm=fedavg"], ["--only", "algorithm=fedprox", "--seeds", "0,1"]):
        result = invoke("run", str(recipe), *selection, "--registry", url)
        assert result.exit_code == 0, result.output
    folder = root / "reproductions"
    (folder / "lt").mkdir(parents=True)
    result = invoke(
        "export", "--recipe", str(recipe), "--out", str(folder / "lt" / "lt_table1.jsonl"), "--registry", url
    )
    assert result.exit_code == 0, result.output
    return root, recipes, folder, url


@pytest.fixture
def evidence(trained, tmp_path):
    """A fresh copy of the evidence folder, rendered once by ``fedbench ledger``."""
    root, recipes, folder, url = trained
    copy = tmp_path / "reproductions"
    shutil.copytree(folder, copy)
    result = invoke("ledger", str(copy), "--recipes-dir", str(recipes))
    assert result.exit_code == 0, result.output
    return copy, recipes, url


def test_the_ledger_counts_what_the_report_of_the_imported_runs_judges(evidence, tmp_path):
    folder, recipes, _ = evidence
    imported = f"sqlite:///{tmp_path / 'imported.db'}"
    assert invoke("import", str(folder / "lt" / "lt_table1.jsonl"), "--registry", imported).exit_code == 0
    shown = invoke("report", "--recipe", str(recipes / "lt_table1.toml"), "--format", "json", "--registry", imported)
    cells = {c["row"]: c for c in json.loads(shown.stdout)["tables"][0]["cells"]}
    assert (cells["fedavg"]["n"], cells["fedprox"]["n"]) == (3, 2)
    fedavg = cells["fedavg"]["verdict"]["status"]
    assert fedavg == "higher"  # ~tens of % against a published 1 %

    ledger = (folder / "README.md").read_text()
    # headline: one cell run at the paper's scale (fedavg), fedprox in progress, 5 runs
    assert "| lt | 1 | 0 | 1 | 0 | 0 | 1 | 5 |" in ledger
    assert "- runs: 5 finished of the 6 the recipe compiles to at its full scale" in ledger
    row = next(line for line in ledger.splitlines() if line.startswith("| accuracy | fedavg |"))
    assert f"| {fedavg}↑ |" in row and NO_CAUSE in row
    assert not any(line.startswith("| accuracy | fedprox |") for line in ledger.splitlines())  # in progress only
    assert (folder / "lt" / "lt_table1.md").read_text() == invoke(
        "report", "--recipe", str(recipes / "lt_table1.toml"), "--format", "markdown", "--registry", imported
    ).stdout


def test_the_ledger_names_the_data_checksums_commit_and_wall_time_of_the_runs(evidence):
    folder, _, _ = evidence
    runs = [json.loads(line) for line in (folder / "lt" / "lt_table1.jsonl").read_text().splitlines()[1:]]
    ledger = (folder / "README.md").read_text()
    wall = sum(r["wall_seconds"] for r in runs) / 3600
    assert f"- wall time: {wall:.2f} h" in ledger
    device = runs[0]["provenance"]["device"]
    assert f"- machine: {device}, torch {runs[0]['provenance']['torch']}" in ledger


def test_a_cause_lands_beside_its_cell_and_check_wants_the_ledger_rendered_again(evidence):
    folder, recipes, _ = evidence
    assert invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes)).exit_code == 0
    (folder / "lt" / "causes.toml").write_text(
        '[[cause]]\nrecipe = "lt_table1"\ntable = "accuracy"\nrow = "fedavg"\nkind = "paper-error"\n'
        'text = "the paper printed a fraction as a percentage"\n'
    )
    stale = invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes))
    assert stale.exit_code == 1 and "README.md: differs" in stale.stderr
    assert invoke("ledger", str(folder), "--recipes-dir", str(recipes)).exit_code == 0
    row = next(
        line for line in (folder / "README.md").read_text().splitlines() if line.startswith("| accuracy | fedavg")
    )
    assert "*paper-error*: the paper printed a fraction as a percentage" in row and NO_CAUSE not in row


def test_check_fails_on_a_hand_edit_but_not_on_the_png_bytes(evidence):
    folder, recipes, _ = evidence
    report = folder / "lt" / "lt_table1.md"
    report.write_text(report.read_text().replace("(n=3)", "(n=4)"))
    edited = invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes))
    assert edited.exit_code == 1 and "lt_table1.md: differs" in edited.stderr
    assert "run `fedbench ledger" in edited.stderr

    invoke("ledger", str(folder), "--recipes-dir", str(recipes))
    page = folder / "lt" / "lt_table1.html"
    text = page.read_text()
    assert "data:image/png;base64," in text
    page.write_text(re.sub(r"(data:image/png;base64,)[A-Za-z0-9+/=]{8}", r"\1AAAAAAAA", text))
    assert invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes)).exit_code == 0
    page.write_text(text.replace("fedavg", "fedavg2", 1))
    assert invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes)).exit_code == 1


def test_check_fails_on_a_generated_file_without_its_runs_file(evidence):
    folder, recipes, _ = evidence
    shutil.copy(folder / "lt" / "lt_table1.md", folder / "lt" / "old_table.md")
    result = invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes))
    assert result.exit_code == 1 and "old_table.md: no runs file renders it" in result.stderr


def test_rendering_twice_gives_the_same_files(evidence):
    folder, recipes, _ = evidence
    first, second = render_evidence(folder, recipes), render_evidence(folder, recipes)
    assert first.keys() == second.keys()
    plots = {k for k in first if k.endswith(".png")}
    assert first.keys() - plots == {"lt/lt_table1.md", "lt/lt_table1.html", "README.md"}
    assert plots == {"lt/lt_table1/lt_table1_accuracy_all.png"}  # the one view's figure, its methods as lines
    assert all(comparable(k, first[k]) == comparable(k, second[k]) for k in first)
    assert check_evidence(folder, first) == []


def test_a_report_names_its_runs_as_its_file_imported_alone_does_whatever_files_come_before(evidence, tmp_path):
    """The HTML page names runs by registry id: each runs file renders from a registry of its own, so another
    paper's runs file (imported first: papers in name order) leaves a page's ids, and the page, as they were."""
    folder, recipes, url = evidence
    alone = render_evidence(folder, recipes)
    earlier = recipes / "ea_table1.toml"
    earlier.write_text(textwrap.dedent(RECIPE).replace('"lt"', '"ea"').replace("lt_table1", "ea_table1"))
    trained = f"sqlite:///{tmp_path / 'ea.db'}"
    assert invoke("run", str(earlier), "--only", "algorithm=fedavg", "--registry", trained).exit_code == 0
    (folder / "ea").mkdir()
    exported = invoke(
        "export", "--recipe", str(earlier), "--out", str(folder / "ea" / "ea_table1.jsonl"), "--registry", trained
    )
    assert exported.exit_code == 0, exported.output
    both = render_evidence(folder, recipes)
    assert "ea/ea_table1.html" in both
    assert both["lt/lt_table1.html"] == alone["lt/lt_table1.html"]
    assert 'id="run-1"' in both["lt/lt_table1.html"] and 'id="run-1"' in both["ea/ea_table1.html"]
    imported = f"sqlite:///{tmp_path / 'imported.db'}"
    assert invoke("import", str(folder / "lt" / "lt_table1.jsonl"), "--registry", imported).exit_code == 0
    page = tmp_path / "page" / "index.html"
    shown = invoke(
        "report",
        "--recipe",
        str(recipes / "lt_table1.toml"),
        "--format",
        "html",
        "--out",
        str(page),
        "--registry",
        imported,
    )
    assert shown.exit_code == 0, shown.output
    ids = re.findall(r'id="run-(\d+)"', both["lt/lt_table1.html"])
    assert ids and ids == re.findall(r'id="run-(\d+)"', next(page.parent.glob("*.html")).read_text())


PARTITION_VIEW = """
[[tables]]
name = "partition"
kind = "partition"
title = "Fig. 2: label distribution of the clients"
rows = ["algorithm"]
columns = []
where = { algorithm = "fedavg" }
"""


def test_the_evidence_leaves_out_the_views_computed_from_a_data_set(evidence, tmp_path, monkeypatch):
    """A partition view counts a data set's classes per client: rendered into the evidence it would depend on
    whether the machine has the data (and name its data root), so the evidence reads no data set and leaves the view
    out, while ``fedbench report`` still renders it."""
    import fedbench.report.plots as plots
    import fedbench.report.static as static

    folder, recipes, url = evidence
    with_partition = tmp_path / "recipes"
    shutil.copytree(recipes, with_partition)
    recipe = with_partition / "lt_table1.toml"
    recipe.write_text(recipe.read_text() + textwrap.dedent(PARTITION_VIEW))
    reported = invoke("report", "--recipe", str(recipe), "--table", "partition", "--registry", url)
    assert reported.exit_code == 0 and "label distribution of the clients" in reported.output, reported.output

    def read_a_data_set(*args, **kwargs):
        raise AssertionError("the evidence read a data set")

    monkeypatch.setattr(static, "partition_panels", read_a_data_set)
    monkeypatch.setattr(plots, "partition_panels", read_a_data_set)
    rendered = render_evidence(folder, with_partition)
    assert "label distribution" not in rendered["lt/lt_table1.md"] + rendered["lt/lt_table1.html"]
    assert "Table 1: best test accuracy" in rendered["lt/lt_table1.md"]  # the views of runs are all there
    assert not [name for name in rendered if "partition" in name]
    assert "leave out the views computed from a data set" in rendered["README.md"]


def test_check_wants_every_plot_and_ledger_deletes_plots_no_longer_drawn(evidence):
    folder, recipes, _ = evidence
    plot = folder / "lt" / "lt_table1" / "lt_table1_accuracy_all.png"
    assert plot.read_bytes().startswith(b"\x89PNG")
    plot.write_bytes(b"other bytes: not compared")
    assert invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes)).exit_code == 0
    plot.unlink()
    missing = invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes))
    assert missing.exit_code == 1 and "lt_table1_accuracy_all.png: missing" in missing.stderr
    orphan = folder / "lt" / "lt_table1" / "gone_view.png"
    orphan.write_bytes(b"")
    assert (
        "gone_view.png: no runs file renders it"
        in invoke("ledger", str(folder), "--check", "--recipes-dir", str(recipes)).stderr
    )
    assert invoke("ledger", str(folder), "--recipes-dir", str(recipes)).exit_code == 0
    assert plot.is_file() and not orphan.exists()


def test_bad_causes_and_a_runs_file_without_its_recipe_are_one_line_errors(evidence):
    folder, recipes, _ = evidence
    causes = folder / "lt" / "causes.toml"
    causes.write_text('[[cause]]\nrecipe = "lt_table1"\ntable = "accuracy"\nkind = "luck"\ntext = "x"\n')
    assert_user_error(invoke("ledger", str(folder), "--recipes-dir", str(recipes)), f"{causes}: [[cause]] 1, key kind")
    causes.write_text("[cause\n")
    assert_user_error(invoke("ledger", str(folder), "--recipes-dir", str(recipes)), f"{causes}: cannot read it as TOML")
    causes.unlink()
    shutil.copy(folder / "lt" / "lt_table1.jsonl", folder / "lt" / "lt_missing.jsonl")
    assert_user_error(invoke("ledger", str(folder), "--recipes-dir", str(recipes)), "lt_missing.jsonl: no recipe")
    assert_user_error(invoke("ledger", str(folder / "nowhere")), "no such folder")


def test_causes_match_their_cell_or_claim_group_with_wildcards(tmp_path):
    path = tmp_path / "causes.toml"
    path.write_text(
        '[[cause]]\nrecipe = "r"\ntable = "t"\ncolumn = "C"\nkind = "reading"\ntext = "a"\n'
        '[[cause]]\nrecipe = "r"\ntable = "t"\nclaim = 2\ngroup = "C"\nkind = "seed-variance"\ntext = "b"\n'
    )
    column, claim = load_causes(path)
    assert column.covers_cell("r", "t", "any row", "C") and not column.covers_cell("r", "t", "any row", "D")
    assert not column.covers_cell("r", "u", "any row", "C") and not column.covers_claim("r", "t", 2, "C")
    assert claim.covers_claim("r", "t", 2, "C") and not claim.covers_claim("r", "t", 1, "C")
    assert not claim.covers_claim("r", "t", 2, "D") and not claim.covers_cell("r", "t", "x", "C")
    assert load_causes(tmp_path / "absent.toml") == []
    assert isinstance(column, Cause)
