"""Every experimental table and figure panel of each paper (tests/papers/paper_items.toml, written from the papers'
specs) is reproduced by a view of a shipped recipe that declares it (`reproduces = ["Fig. 2(b)"]`), or listed in
NOT_REPRODUCED with the reason. The check reads the declarations, never the titles: a title may name any table or
figure ("… (Fig. 6 convention)") without covering it. `fedbench report --paper ID` lists the views that declare them.
"""

from __future__ import annotations

import json
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.recipes.load import load_recipe
from fedbench.recipes.schema import Recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
PAPER_ITEMS: dict[str, list[str]] = {
    paper: entry["items"]
    for paper, entry in tomllib.loads((Path(__file__).parent / "paper_items.toml").read_text()).items()
}
PAPERS = sorted(PAPER_ITEMS)


# The items no view reproduces yet, and why: an item that a view declares must leave this list, so it only shrinks.
NOT_REPRODUCED: dict[str, dict[str, str]] = {
    "fedimpro": {
        figure: "model-inversion study (App. F.7): outside fedbench's scope"
        for figure in ("Fig. 11", "Fig. 12", "Fig. 13")
    },
}


def paper_recipes(paper: str) -> list[Recipe]:
    return [recipe for recipe in map(load_recipe, sorted(RECIPES.glob("*.toml"))) if recipe.paper == paper]


def declarations(recipes: list[Recipe]) -> dict[str, list[str]]:
    """{item: the views ("recipe:view") that declare it}."""
    declared = defaultdict(list)
    for recipe in recipes:
        for view in recipe.tables:
            for item in view.reproduces:
                declared[item].append(f"{recipe.name}:{view.name}")
    return dict(declared)


def coverage_problems(paper: str, recipes: list[Recipe]) -> list[str]:
    """What is wrong with the paper's coverage by these recipes: an item neither declared nor listed as not
    reproduced, one both declared and listed, a declaration or a listing of something the paper does not have."""
    items = set(PAPER_ITEMS[paper])
    declared = declarations(recipes)
    missing = NOT_REPRODUCED.get(paper, {})
    problems = [
        f"{item}: declared by no view and not in NOT_REPRODUCED" for item in sorted(items - {*declared, *missing})
    ]
    problems += [
        f"{item}: declared by {declared[item]}, so not 'not reproduced'"
        for item in sorted(set(declared) & set(missing))
    ]
    problems += [
        f"{item}: declared by {views}, not an item of the paper"
        for item, views in declared.items()
        if item not in items
    ]
    problems += [f"{item}: in NOT_REPRODUCED, not an item of the paper" for item in sorted(set(missing) - items)]
    return problems


@pytest.mark.parametrize("paper", PAPERS)
def test_every_item_is_declared_by_a_view_or_not_reproduced_with_its_reason(paper):
    assert coverage_problems(paper, paper_recipes(paper)) == []
    assert all(reason for reason in NOT_REPRODUCED.get(paper, {}).values())


@pytest.mark.parametrize("paper", PAPERS)
def test_removing_every_declaration_of_an_item_fails_the_check(paper):
    """An item declared by several views (a variant recipe reproduces its base's tables under another reading) is
    uncovered once none of them declares it."""
    recipes = paper_recipes(paper)
    declared = declarations(recipes)
    assert declared
    for item, views in declared.items():
        edited = [
            recipe.model_copy(
                update={
                    "tables": [
                        view.model_copy(update={"reproduces": [i for i in view.reproduces if i != item]})
                        if f"{recipe.name}:{view.name}" in views
                        else view
                        for view in recipe.tables
                    ]
                }
            )
            for recipe in recipes
        ]
        assert coverage_problems(paper, edited) == [f"{item}: declared by no view and not in NOT_REPRODUCED"]


def test_the_check_reads_declarations_not_titles(monkeypatch):
    """A title naming a figure covers nothing (FedTrip's "Final accuracy … (Fig. 6 convention)"); an item declared
    that the paper does not have, or declared while listed as not reproduced, is an error."""
    recipes = paper_recipes("fedtrip")
    fig6 = next(recipe for recipe in recipes if recipe.name == "fedtrip_fig6")
    without_fig6 = [recipe for recipe in recipes if recipe is not fig6]
    assert any("Fig. 6" in view.title for recipe in without_fig6 for view in recipe.tables)
    assert coverage_problems("fedtrip", without_fig6) == [
        f"Fig. 6({panel}): declared by no view and not in NOT_REPRODUCED" for panel in "ab"
    ]
    monkeypatch.setitem(NOT_REPRODUCED, "fedtrip", {"Fig. 2(a)": "listed here while declared, to show the check"})
    view = fig6.tables[0]
    wrong = fig6.model_copy(update={"tables": [view.model_copy(update={"reproduces": ["Fig. 6", "Fig. 2(a)"]})]})
    assert coverage_problems("fedtrip", [*without_fig6, wrong]) == [
        "Fig. 6(a): declared by no view and not in NOT_REPRODUCED",
        "Fig. 6(b): declared by no view and not in NOT_REPRODUCED",
        "Fig. 2(a): declared by ['fedtrip_fig2:tsne', 'fedtrip_fig6:final'], so not 'not reproduced'",
        "Fig. 6: declared by ['fedtrip_fig6:final'], not an item of the paper",
    ]


@pytest.mark.parametrize("paper", PAPERS)
def test_report_lists_the_views_that_reproduce_each_item(paper, tmp_path, monkeypatch):
    """`fedbench report --paper` renders every recipe of the paper: its JSON tables carry the views' declarations."""
    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path / "data"))  # partition views: no data here, quickly said
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--paper",
            paper,
            "--recipes-dir",
            str(RECIPES),
            "--format",
            "json",
            "--registry",
            f"sqlite:///{tmp_path / 'none.db'}",
        ],
    )
    assert result.exit_code == 0, result.output
    reported = {item for table in json.loads(result.stdout)["tables"] for item in table["reproduces"]}
    assert reported == set(declarations(paper_recipes(paper)))
