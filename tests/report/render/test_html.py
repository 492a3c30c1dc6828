"""`report --format html --out DIR/index.html` without any run: one self-contained page per paper (and an index
when there are several), the published numbers with "not comparable" verdicts and the summary at the top."""

from __future__ import annotations

import re
import textwrap

from typer.testing import CliRunner

from fedbench.cli import app

RECIPE = """
paper = "{paper}"
name = "{paper}_table"
seeds = [0, 1]

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "iid"
num_clients = 2
clients_per_round = 2
rounds = 2
batch_size = 32

[matrix]
algorithm = ["fedavg", "fedprox"]

[[tables]]
name = "acc"
title = "Best accuracy of {paper}"
rows = ["algorithm"]
columns = []
figure = "best"

[tables.published]
fedavg = 90.0
fedprox = 91.0
"""


def test_one_page_per_paper_and_an_index(tmp_path):
    paths = []
    for paper in ("alpha", "beta"):
        path = tmp_path / f"{paper}.toml"
        path.write_text(textwrap.dedent(RECIPE.format(paper=paper)))
        paths += ["--recipe", str(path)]
    out = tmp_path / "site" / "index.html"
    registry = f"sqlite:///{tmp_path / 'none.db'}"
    result = CliRunner().invoke(app, ["report", *paths, "--format", "html", "--out", str(out), "--registry", registry])
    assert result.exit_code == 0, result.output
    index = out.read_text()
    assert re.findall(r'href="([^"]+)"', index) == ["alpha.html", "beta.html"]
    for paper in ("alpha", "beta"):
        page = (out.parent / f"{paper}.html").read_text()
        summary = page.split('id="table-0"')[0]
        line = f"{paper}: 0 reproduced, 0 higher, 0 lower, 0 inconclusive, 2 not comparable of 2 cells with a published number"
        assert line in summary
        assert page.index("no finished run yet") > page.rindex('id="table-')  # the legend once, after the tables
        assert f"Best accuracy of {paper}" in page and "no finished run" in page
        assert "paper 90.00" in page and "paper 91.00" in page
        assert not re.search(r"""(src|href)=["'](?!data:)""", page)
    assert not (tmp_path / "none.db").exists()  # reporting never creates a registry


def test_a_baseline_that_is_not_a_label_is_a_recipe_error(tmp_path):
    path = tmp_path / "bad.toml"
    text = textwrap.dedent(RECIPE.format(paper="alpha"))
    path.write_text(text.replace('figure = "best"', 'figure = "best"\nbaseline = "FedAvg"'))
    result = CliRunner().invoke(app, ["report", "--recipe", str(path), "--registry", f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code == 2
    assert "baseline = 'FedAvg' is not a label of axis 'algorithm' (fedavg, fedprox)" in result.output
    path.write_text(text.replace('figure = "best"', 'figure = "best"\nbaseline = "fedavg"\nbaseline_axis = "dataset"'))
    result = CliRunner().invoke(app, ["report", "--recipe", str(path), "--registry", f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code == 2 and "baseline_axis 'dataset'" in result.output
