"""``--add`` and ``--set-for`` (fedbench/recipes/additions.py) on the recipe's grid: the recipe's own cells compile
to the runs they compile to without them, the added cells are every cell of the grid with the added value (at the
recipe's seeds and scale, with the cell's other settings and none of another value's overrides), labelled
``added``; ``--set-for`` reaches the cells it selects only, after ``--set``; bad input is one ``ConfigError`` or
``RecipeError`` line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedbench.errors import ConfigError, RecipeError, UnknownNameError
from fedbench.recipes.additions import Additions
from fedbench.recipes.expand import assignments_to_dict, compile_recipes, expand
from fedbench.recipes.load import load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def extended(recipe, add=(), set_for=()):
    (out,) = Additions.parse(add, set_for).extend([recipe])
    return out


def own_and_added(runs):
    own = {tuple(sorted(r.labels.items())) + (r.spec.seed,): r.spec_hash for r in runs if "added" not in r.labels}
    added = [r for r in runs if "added" in r.labels]
    return own, added


def keyed(runs):
    return {tuple(sorted(r.labels.items())) + (r.spec.seed,): r.spec_hash for r in runs}


def test_own_cells_keep_their_runs_and_the_added_value_fills_every_cell_at_every_seed():
    recipe = load_recipe(RECIPES / "fedtrip_table4.toml")
    plain = expand(recipe, check=False)
    runs = expand(extended(recipe, ["algorithm=scaffold"]), check=False)
    own, added = own_and_added(runs)
    assert own == keyed(plain)  # same cells, same spec hashes
    cases, seeds = recipe.axis_labels("case"), recipe.seeds
    assert len(added) == len(cases) * len(seeds) == 60
    assert {(r.labels["case"], r.spec.seed) for r in added} == {(c, s) for c in cases for s in seeds}
    assert all(r.labels == {"algorithm": "scaffold", "case": r.labels["case"], "added": "algorithm"} for r in added)
    assert all(r.spec.algorithm == "scaffold" and r.recipe == "fedtrip_table4" for r in added)


def test_no_override_of_another_value_applies_to_an_added_value_and_the_cells_other_settings_do():
    recipe = load_recipe(RECIPES / "fedtrip_table4.toml")
    runs = expand(extended(recipe, ["algorithm=scaffold"]), check=False)
    scaffold = {r.labels["case"]: r.spec for r in runs if r.labels.get("added") and r.spec.seed == 1}
    # SlowMo's and FedDyn's plain SGD (overrides) is not SCAFFOLD's: the setup's momentum 0.9 stays
    assert all(spec.optimizer.momentum == 0.9 for spec in scaffold.values())
    # the case's own items apply: its model, data set and client size
    assert scaffold["AlexNet CIFAR-50%"].model == "alexnet_cifar"
    assert scaffold["CNN EMNIST-62%"].partition_params["samples_per_client"] == 3000
    fedprox = next(r.spec for r in runs if r.labels["algorithm"] == "fedprox")
    assert "mu" not in scaffold["MLP MNIST-87%"].algorithm_params and fedprox.algorithm_params["mu"] == 0.1


def test_an_added_table_item_takes_each_other_values_overrides_and_matching_combinations():
    recipe = load_recipe(RECIPES / "fedtrip_table4.toml")
    case = (
        '{ label = "MLP EMNIST", model = "mlp", dataset = "emnist", partition_params = { samples_per_client = 600 } }'
    )
    runs = expand(extended(recipe, [f"case={case}"]), check=False)
    own, added = own_and_added(runs)
    assert own == keyed(expand(recipe, check=False))
    assert len(added) == len(recipe.axis_labels("algorithm")) * len(recipe.seeds)
    by_algorithm = {r.labels["algorithm"]: r.spec for r in added if r.spec.seed == 1}
    assert by_algorithm["fedprox"].algorithm_params["mu"] == 0.1  # [overrides.algorithm.fedprox]
    assert by_algorithm["fedtrip"].algorithm_params["mu"] == 0.4  # the MLP combinations name other cases
    assert by_algorithm["slowmo"].optimizer.momentum == 0.0
    assert all(r.labels["added"] == "case" and r.spec.dataset == "emnist" for r in added)


def test_a_scalar_on_an_axis_of_tables_named_by_a_setup_key_sets_that_key(write_recipe):
    recipe = load_recipe(RECIPES / "feddrplus_table1.toml")
    runs = expand(extended(recipe, ["algorithm=scaffold"]), check=False)
    own, added = own_and_added(runs)
    assert own == keyed(expand(recipe, check=False))
    assert added and all(r.spec.algorithm == "scaffold" and r.labels["algorithm"] == "scaffold" for r in added)


def test_a_dotted_axis_takes_scalar_items_and_an_added_value(write_recipe):
    from conftest import TINY_RECIPE

    text = TINY_RECIPE.replace(
        'algorithm = ["fedavg", "fedprox"]', 'algorithm = ["fedavg", "fedprox"]\n"partition_params.alpha" = [0.5, 0.1]'
    )
    recipe = load_recipe(write_recipe(text))
    plain = expand(recipe)
    assert {r.labels["partition_params.alpha"]: r.spec.partition_params["alpha"] for r in plain} == {
        "0.5": 0.5,
        "0.1": 0.1,
    }
    assert all(r.spec.partition_params["min_size"] == 5 for r in plain)  # the setup's other parameters stay
    runs = expand(extended(recipe, ["partition_params.alpha=0.05"]))
    own, added = own_and_added(runs)
    assert own == keyed(plain)
    assert len(added) == 2 * 2  # two algorithms × two seeds
    assert all(r.spec.partition_params["alpha"] == 0.05 and r.labels["partition_params.alpha"] == "0.05" for r in added)


def test_values_on_two_axes_fill_the_extended_grid(write_recipe):
    from conftest import TINY_RECIPE

    text = TINY_RECIPE.replace(
        'algorithm = ["fedavg", "fedprox"]', 'algorithm = ["fedavg", "fedprox"]\nlocal_epochs = [1, 2]'
    )
    recipe = load_recipe(write_recipe(text))
    add = ["algorithm=scaffold", "algorithm=fednova", "local_epochs=3"]
    runs = expand(extended(recipe, add))
    own, added = own_and_added(runs)
    assert own == keyed(expand(recipe))
    assert len(added) == (4 * 3 - 2 * 2) * 2  # the 4 × 3 grid less the recipe's 2 × 2 cells, two seeds each
    marks = {(r.labels["algorithm"], r.labels["local_epochs"]): r.labels["added"] for r in added}
    assert marks[("scaffold", "1")] == "algorithm" and marks[("fedavg", "3")] == "local_epochs"
    assert marks[("fednova", "3")] == "algorithm,local_epochs"


def test_set_for_reaches_only_the_cells_it_selects_after_set_and_the_scale(write_recipe):
    recipe = load_recipe(write_recipe())
    add = ["algorithm=scaffold"]
    plain = expand(extended(recipe, add), scale="smoke", overrides=assignments_to_dict(["rounds=4"]))
    runs = expand(
        extended(recipe, add, ["algorithm=scaffold:rounds=6", "algorithm=scaffold:optimizer.lr=0.02"]),
        scale="smoke",
        overrides=assignments_to_dict(["rounds=4"]),
    )
    by_algorithm = {r.labels["algorithm"]: r for r in runs}
    assert by_algorithm["scaffold"].spec.rounds == 6 and by_algorithm["scaffold"].spec.optimizer.lr == 0.02
    assert by_algorithm["fedavg"].spec.rounds == 4  # --set, not --set-for
    assert keyed([r for r in runs if r.labels["algorithm"] != "scaffold"]) == keyed(
        [r for r in plain if r.labels["algorithm"] != "scaffold"]
    )
    own_value = expand(extended(recipe, (), ["algorithm=fedprox:rounds=7"]))  # a selector may name the recipe's own
    assert {r.labels["algorithm"]: r.spec.rounds for r in own_value} == {"fedavg": 3, "fedprox": 7}


def test_only_keeps_added_cells_by_their_label(write_recipe):
    recipe = extended(load_recipe(write_recipe()), ["algorithm=scaffold"])
    runs = expand(recipe, only={"algorithm": "scaffold", "seed": "1"})
    assert [(r.labels["algorithm"], r.spec.seed) for r in runs] == [("scaffold", 1)]


def test_extending_copies_the_recipe(write_recipe):
    recipe = load_recipe(write_recipe())
    extended(recipe, ["algorithm=scaffold"], ["algorithm=scaffold:rounds=6"])
    assert recipe.matrix["algorithm"] == ["fedavg", "fedprox"] and not recipe.added and not recipe.set_for


def test_several_recipes_each_recipe_with_the_axis_takes_the_value():
    paths = [RECIPES / "quickstart.toml", RECIPES / "fedtrip_costs.toml"]  # the second has no axes, no runs
    runs = compile_recipes(paths, Additions.parse(["algorithm=scaffold"]), scale="smoke")
    assert sorted(r.labels["algorithm"] for r in runs) == ["fedavg", "fedprox", "scaffold"]
    with pytest.raises(ConfigError, match=r"'algorithm' is not an axis of .*fedtrip_costs.toml \(axes: none\)"):
        compile_recipes(paths[1:], Additions.parse(["algorithm=scaffold"]))


@pytest.mark.parametrize(
    ("add", "set_for", "error", "message"),
    [
        (["dataset=mnist"], [], ConfigError, r"^--add dataset=mnist: 'dataset' is not an axis of .*tiny.toml "),
        (["algorithm"], [], ConfigError, r"^--add 'algorithm': expected AXIS=VALUE"),
        (["algorithm=fedavg"], [], ConfigError, r"'fedavg' is already a value of axis 'algorithm' .*\(fedavg, "),
        (["algorithm={ x = 1 }"], [], ConfigError, r"every table item needs a 'label'"),
        (["algorithm={ label = 'z', bad = 1 }"], [], ConfigError, r"unknown key matrix.algorithm\[z\].'bad'"),
        (["algorithm=nosuch"], [], UnknownNameError, r"unknown algorithm 'nosuch'.*added=algorithm"),
        ([], ["algorithm=fedavg"], ConfigError, r"^--set-for 'algorithm=fedavg': expected AXIS=LABEL:KEY=VALUE"),
        ([], ["algorithm=fedavg:nosuch=1"], ConfigError, r"^--set-for 'nosuch=1': unknown setup key 'nosuch'"),
        ([], ["case=x:rounds=1"], ConfigError, r"^--set-for case=x:rounds=1: 'case' is not an axis of"),
        ([], ["algorithm=zzz:rounds=1"], ConfigError, r"no value 'zzz' on axis 'algorithm' \(.*: fedavg, fedprox\)"),
        (["algorithm=scaffold"], ["algorithm=scaffold:rounds=abc"], RecipeError, r"rounds: .*valid integer"),
        (["algorithm=scaffold"], ["algorithm=scaffold:target=abc"], ConfigError, r"target must be a number, in the"),
        (["algorithm=scaffold"], ["algorithm=scaffold:target=true"], ConfigError, r"target must be a number"),
        (["algorithm=scaffold"], ["algorithm=scaffold:target=nan"], ConfigError, r"target must be a number"),
        (
            ["algorithm=scaffold"],
            ["algorithm=scaffold:target=60"],
            ConfigError,
            r"^--set-for algorithm=scaffold:target=60: no table view of .*tiny.toml counts to a target by 'algorithm' "
            r"\(in its rows or columns\), so there is no target to set$",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_option(write_recipe, add, set_for, error, message):
    with pytest.raises(error, match=message) as caught:
        expand(extended(load_recipe(write_recipe()), add, set_for))
    assert "\n" not in str(caught.value)


def test_an_added_cell_that_is_already_a_cell_of_the_recipe_is_refused(write_recipe):
    path = write_recipe()
    recipe = extended(load_recipe(path), ['algorithm={ label = "FedAvg again", algorithm = "fedavg" }'])
    with pytest.raises(RecipeError) as refused:
        expand(recipe)
    message = str(refused.value)
    assert message.startswith(f"{path}: the added cell ")  # the recipe file first, as every recipe error
    assert re.search(r"FedAvg again.* compiles to the same run as the recipe's cell .*fedavg", message)
    assert message.endswith(": it is already in the table")


def test_an_added_value_may_not_be_a_row_the_paper_quotes(write_recipe):
    from conftest import TINY_RECIPE

    quoted = '[[tables]]\nname = "q"\nrows = ["algorithm"]\npublished_only = ["scaffold"]\n[tables.published]\nscaffold = 70.0\n'
    recipe = load_recipe(write_recipe(TINY_RECIPE + quoted))
    with pytest.raises(ConfigError, match=r"^--add algorithm=scaffold: .*published_only row 'scaffold' is a row"):
        extended(recipe, ["algorithm=scaffold"])


@pytest.mark.parametrize("key", ["added", "set_for"])
def test_a_recipe_file_cannot_mark_its_own_cells_added(write_recipe, key):
    from conftest import TINY_RECIPE

    value = '{ algorithm = ["fedavg"] }' if key == "added" else "[]"
    with pytest.raises(RecipeError, match=f"unknown key '{key}'"):
        load_recipe(write_recipe(f"{key} = {value}\n" + TINY_RECIPE))


def test_set_for_a_target_gives_the_label_its_target_in_the_to_target_views_only(write_recipe):
    text = TINY_VIEWS
    recipe = load_recipe(write_recipe(text))
    out = extended(recipe, ["algorithm=scaffold"], ["algorithm=scaffold:target=62", "algorithm=fedprox:target=70.5"])
    best, rounds = out.tables
    assert best.target_by == {} and rounds.target_by == {"fedavg": 60.0, "scaffold": 62.0, "fedprox": 70.5}
    assert out.set_for == [] and recipe.tables[1].target_by == {"fedavg": 60.0}  # no setup rule; a copy
    assert keyed(expand(out)) == keyed(expand(extended(recipe, ["algorithm=scaffold"])))  # the runs are the same


TINY_VIEWS = """
paper = "testpaper"
name = "tiny"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "dirichlet"
num_clients = 4
clients_per_round = 2
rounds = 3

[matrix]
algorithm = ["fedavg", "fedprox"]

[[tables]]
name = "acc"
rows = ["algorithm"]
figure = "best"

[[tables]]
name = "speed"
rows = ["algorithm"]
figure = "rounds_to_target"
target_by = { fedavg = 60 }
"""


TWO_AXES = """
paper = "testpaper"
name = "cases"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "dirichlet"
num_clients = 4
clients_per_round = 2
rounds = 3

[matrix]
algorithm = ["fedavg", "fedprox"]
case = [{ label = "H32", model_params = { hidden = 32 } }, { label = "H16", model_params = { hidden = 16 } }]

[[tables]]
name = "acc"
rows = ["algorithm"]
columns = ["case"]
figure = "best"

[[tables]]
name = "rounds"
rows = ["case"]
columns = ["algorithm"]
figure = "rounds_to_target"
target_by = { H32 = 50, H16 = 55 }

[[tables]]
name = "grid"
rows = ["algorithm", "case"]
figure = "rounds_to_target"
target_by = { "fedavg / H32" = 50, "fedavg / H16" = 55, "fedprox / H32" = 50, "fedprox / H16" = 55 }

[[tables]]
name = "overall"
rows = ["algorithm"]
figure = "rounds_to_target"
target = 50
where = { case = "H32" }
"""
H8 = 'case={ label = "H8", model_params = { hidden = 8 } }'


def test_a_target_reaches_every_row_or_column_key_holding_the_label_in_the_views_that_show_its_axis(write_recipe):
    recipe = load_recipe(write_recipe(TWO_AXES))
    out = extended(recipe, [H8, "algorithm=scaffold"], ["case=H8:target=60"])
    acc, rounds, grid, overall = out.tables
    assert acc.target_by == {} and acc.target is None  # no target to count to
    assert rounds.target_by == {"H32": 50, "H16": 55, "H8": 60.0}
    # two axes on the rows: each key with H8 on "case", for every algorithm (the added one too)
    assert grid.target_by == {
        **recipe.tables[2].target_by,
        "fedavg / H8": 60.0,
        "fedprox / H8": 60.0,
        "scaffold / H8": 60.0,
    }
    assert (overall.target, overall.target_by) == (50, {})  # "case" is not one of its rows or columns
    assert keyed(expand(out)) == keyed(expand(extended(recipe, [H8, "algorithm=scaffold"])))  # the runs are the same


@pytest.mark.parametrize(
    ("text", "add", "set_for", "message"),
    [
        # a recipe's own value the paper gives a target keeps it
        (TWO_AXES, [], "case=H32:target=60", r"'H32' already has a target in table 'rounds' of .*\(target_by 'H32' = 50\)"),
        # an added column whose rows have their targets: its cells have theirs
        (TWO_AXES, ["algorithm=scaffold"], "algorithm=scaffold:target=60", r"'scaffold' already has a target in table 'rounds' of .*\(target_by 'H32' = 50\)"),
        # one target for the whole view: an added row has it
        (TINY_VIEWS.replace("target_by = { fedavg = 60 }", "target = 60"), ["algorithm=scaffold"],
         "algorithm=scaffold:target=70", r"'scaffold' already has a target in table 'speed' of .*\(target = 60\)"),
    ],
)  # fmt: skip
def test_a_target_is_refused_where_the_cells_have_one(write_recipe, text, add, set_for, message):
    with pytest.raises(ConfigError, match=f"^--set-for {re.escape(set_for)}: {message}; target= gives one to a row or "
                       "column that has none, such as a value added with --add$"):  # fmt: skip
        extended(load_recipe(write_recipe(text)), add, [set_for])


@pytest.mark.parametrize("value", ["1", "0.8", "100.5", "-5"])
def test_a_target_of_a_percent_table_is_in_percent(write_recipe, value):
    recipe = load_recipe(write_recipe(TINY_VIEWS))
    with pytest.raises(ConfigError) as refused:
        extended(recipe, ["algorithm=scaffold"], [f"algorithm=scaffold:target={value}"])
    assert str(refused.value) == (
        f"--set-for algorithm=scaffold:target={value}: table 'speed' of {recipe.source} counts to a target in % (e.g. "
        f"target=60 for 60 %); {float(value):g} is not one"
    )


def test_a_target_of_100_percent_or_of_a_loss_is_taken(write_recipe):
    recipe = load_recipe(write_recipe(TINY_VIEWS))
    assert extended(recipe, ["algorithm=scaffold"], ["algorithm=scaffold:target=100"]).tables[1].target_by == {
        "fedavg": 60.0,
        "scaffold": 100.0,
    }
    loss = load_recipe(
        write_recipe(
            TINY_VIEWS.replace("target_by = { fedavg = 60 }", 'target_by = { fedavg = 0.3 }\nmetric = "test_loss"')
        )
    )
    assert extended(loss, ["algorithm=scaffold"], ["algorithm=scaffold:target=0.5"]).tables[1].target_by == {
        "fedavg": 0.3,
        "scaffold": 0.5,
    }
