"""The recipe's schema (``fedbench/recipes/schema.py``; the registry has a schema.py too): the defaults of a recipe,
its combinations and static rows, axis labels, the tables by name, and the setup keys a run chooses itself."""

from __future__ import annotations

import pytest

from fedbench.errors import ConfigError, RecipeError
from fedbench.recipes.expand import assignments_to_dict
from fedbench.recipes.load import load_recipe
from fedbench.recipes.schema import Recipe, _label
from fedbench.recipes.views import TableView
from recipe_fixtures import GRID, error


@pytest.mark.parametrize("value, label", [(0.1, "0.1"), (1e-05, "1e-05"), (2.0, "2"), (3, "3"), ("iid", "iid")])
def test_axis_labels_print_floats_shortest(value, label):
    assert _label(value) == label


def test_recipe_model_defaults():
    recipe = Recipe(paper="p", name="n")
    assert recipe.seeds == [0] and recipe.scale_names() == ["full"] and recipe.source is None
    with pytest.raises(RecipeError) as info:
        recipe.table("x")
    assert str(info.value) == "None: no table 'x'; tables: "


@pytest.mark.parametrize("key, value", [("seed", "3"), ("scale", '"smoke"'), ("synthetic", "true")])
def test_seed_scale_and_synthetic_are_chosen_per_run_not_in_a_setup(write_recipe, key, value):
    message = error(write_recipe, GRID.replace("rounds = 3", f"rounds = 3\n{key} = {value}"))
    assert message.startswith(f"FILE: unknown setup key '{key}'; valid keys: algorithm, algorithm_params, dataset")
    assert message.endswith("eval_metrics, finetune, targets")
    with pytest.raises(ConfigError, match=f"^--set '{key}=1': unknown setup key '{key}'"):
        assignments_to_dict([f"{key}=1"])


def test_defaults_of_combinations_static_rows_and_recipes():
    from fedbench.recipes.schema import Combination
    from fedbench.recipes.views import StaticRow

    rule = Combination(match={"algorithm": "fedavg"})
    assert rule.set == {} and rule.skip is False
    row = StaticRow(label="MLP")
    assert (row.model, row.dataset, row.algorithm, row.model_params, row.algorithm_params) == (None, None, None, {}, {})
    recipe = Recipe(paper="p", name="n")
    assert (recipe.overrides, recipe.combination, recipe.scale, recipe.tables) == ({}, [], {}, [])
    view = TableView(name="v")
    assert (view.static_rows, view.setting, view.target_by, view.published, view.published_std) == ([], {}, {}, {}, {})
    assert (view.published_ratio, view.published_derived, view.published_std_derived) == ({}, {}, {})
    assert (view.metrics, view.where) == ({}, {})


def test_an_unknown_table_lists_every_table(write_recipe):
    recipe = load_recipe(write_recipe(GRID + '\n[[tables]]\nname = "u"\nrows = ["local_epochs"]\n'))
    assert recipe.table("u").rows == ["local_epochs"]
    with pytest.raises(RecipeError) as info:
        recipe.table("v")
    assert str(info.value) == f"{recipe.source}: no table 'v'; tables: t, u"


def test_the_papers_trials_are_a_positive_count(write_recipe):
    assert Recipe(paper="p", name="n").trials is None
    assert load_recipe(write_recipe(GRID.replace("[setup]", "trials = 1\n\n[setup]", 1))).trials == 1
    message = error(write_recipe, GRID.replace("[setup]", "trials = 0\n\n[setup]", 1))
    assert message.startswith("FILE: trials") and "greater than or equal to 1" in message
