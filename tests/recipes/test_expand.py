"""Expanding a recipe into runs (``fedbench/recipes/expand.py``): the grid (every combination times every seed, in
order), per-value, combination and scale overrides and their merge order, ``--set`` / ``--only`` / ``where``,
targets, cells that compile to one run, and planned runs that cannot change after their hash is taken."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fedbench.errors import ConfigError, RecipeError
from fedbench.recipes.expand import PlannedRun, assignments_to_dict, compile_recipes, deep_merge, expand, merge_setup
from fedbench.recipes.load import load_recipe
from fedbench.recipes.schema import SPEC_SETUP_KEYS
from recipe_fixtures import GRID

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


# ------------------------------------------------------------------------------------------- merging
def test_deep_merge_replaces_leaves_and_merges_tables_without_touching_its_inputs():
    base = {"a": {"x": 1, "y": {"p": 1}}, "b": [1], "c": 1, "k": {"m": [1]}}
    extra = {"a": {"y": {"q": 2}, "z": 3}, "b": [[2]], "c": {"n": [1]}}
    out = deep_merge(base, extra)
    assert out == {"a": {"x": 1, "y": {"p": 1, "q": 2}, "z": 3}, "b": [[2]], "c": {"n": [1]}, "k": {"m": [1]}}
    out["b"][0].append(9)
    out["c"]["n"].append(5)
    out["k"]["m"].append(3)
    assert base == {"a": {"x": 1, "y": {"p": 1}}, "b": [1], "c": 1, "k": {"m": [1]}}
    assert extra == {"a": {"y": {"q": 2}, "z": 3}, "b": [[2]], "c": {"n": [1]}}
    assert deep_merge({"a": {"x": 1}}, {"a": 5}) == {"a": 5}


@pytest.mark.parametrize("plugin", ["algorithm", "dataset", "model", "partition"])
def test_switching_a_plugin_starts_its_params_afresh(plugin):
    setup = {plugin: "a", f"{plugin}_params": {"p": 1}, "rounds": 3}
    assert merge_setup(setup, {plugin: "b"}) == {plugin: "b", "rounds": 3}
    assert merge_setup(setup, {plugin: "a", f"{plugin}_params": {"q": 2}}) == {
        plugin: "a",
        f"{plugin}_params": {"p": 1, "q": 2},
        "rounds": 3,
    }
    assert merge_setup(setup, {"rounds": 4}) == {plugin: "a", f"{plugin}_params": {"p": 1}, "rounds": 4}
    assert setup == {plugin: "a", f"{plugin}_params": {"p": 1}, "rounds": 3}  # input untouched


def test_set_values_are_dotted_setup_keys():
    assert assignments_to_dict(["rounds=5", "optimizer.lr=0.5", "targets=[80, 90]"]) == {
        "rounds": 5,
        "optimizer": {"lr": 0.5},
        "targets": [80, 90],
    }
    with pytest.raises(ConfigError) as info:
        assignments_to_dict(["roundz=5"])
    assert str(info.value) == f"--set 'roundz=5': unknown setup key 'roundz'; valid keys: {', '.join(SPEC_SETUP_KEYS)}"
    with pytest.raises(ConfigError, match="^--x 'targetz=1': unknown setup key"):
        assignments_to_dict(["targetz=1"], "--x")


# ------------------------------------------------------------------------------------------- expansion
def cells(runs: list[PlannedRun]) -> list[tuple[str, str, int]]:
    return sorted((r.labels["algorithm"], r.labels["local_epochs"], r.spec.seed) for r in runs)


def test_the_grid_is_every_combination_times_every_seed_in_order(write_recipe):
    runs = expand(load_recipe(write_recipe(GRID)))
    assert [(r.labels["algorithm"], r.labels["local_epochs"], r.spec.seed) for r in runs] == [
        ("fedavg", "1", 0),
        ("fedavg", "1", 1),
        ("fedavg", "2", 0),
        ("fedavg", "2", 1),
        ("fedprox", "1", 0),
        ("fedprox", "1", 1),
        ("fedprox", "2", 0),
        ("fedprox", "2", 1),
    ]
    assert all(r.spec.local_epochs == int(r.labels["local_epochs"]) for r in runs)
    assert all(r.spec.algorithm == r.labels["algorithm"] and r.spec.scale == "full" for r in runs)
    assert all(r.paper == "p" and r.recipe == "grid" and r.targets == () for r in runs)
    assert not any(r.spec.synthetic for r in runs)


def test_a_scale_sets_its_values_and_seeds_and_explicit_seeds_win(write_recipe):
    recipe = load_recipe(write_recipe(GRID))
    smoke = expand(recipe, scale="smoke")
    assert len(smoke) == 4 and {(r.spec.seed, r.spec.rounds, r.spec.scale) for r in smoke} == {(5, 1, "smoke")}
    assert {r.spec.seed for r in expand(recipe, scale="smoke", seeds=[7, 8])} == {7, 8}
    assert {r.spec.seed for r in expand(recipe, seeds=[3])} == {3}
    assert all(r.spec.synthetic for r in expand(recipe, synthetic=True))
    with pytest.raises(RecipeError) as info:
        expand(recipe, scale="tiny")
    assert str(info.value) == f"{recipe.source}: no scale 'tiny'; scales: full, smoke"


def test_a_scale_without_seeds_keeps_the_recipes(write_recipe):
    recipe = load_recipe(write_recipe(GRID.replace("seeds = [5]", "")))
    assert {r.spec.seed for r in expand(recipe, scale="smoke")} == {0, 1}


def test_merge_order_is_setup_axis_override_combination_scale_then_set(write_recipe):
    text = GRID.replace(
        "[scale.smoke]",
        "[overrides.algorithm.fedprox]\nrounds = 10\nalgorithm_params = { mu = 0.5 }\n\n"
        '[[combination]]\nmatch = { algorithm = "fedprox", local_epochs = "2" }\nset = { rounds = 20 }\n\n'
        '[[combination]]\nmatch = { scale = "smoke", local_epochs = "1" }\nset = { batch_size = 7 }\n\n'
        "[scale.smoke]",
    )
    recipe = load_recipe(write_recipe(text))
    full = {(r.labels["algorithm"], r.labels["local_epochs"]): r.spec for r in expand(recipe, seeds=[0])}
    assert {k: s.rounds for k, s in full.items()} == {
        ("fedavg", "1"): 3,
        ("fedavg", "2"): 3,
        ("fedprox", "1"): 10,
        ("fedprox", "2"): 20,
    }
    assert full[("fedprox", "1")].algorithm_params["mu"] == 0.5
    batch = full[("fedavg", "2")].batch_size
    assert {s.batch_size for s in full.values()} == {batch}  # the smoke-only rule does not apply at full scale
    smoke = {(r.labels["algorithm"], r.labels["local_epochs"]): r.spec for r in expand(recipe, scale="smoke")}
    assert {k: s.rounds for k, s in smoke.items()} == {k: 1 for k in full}  # the scale comes after combinations
    assert {k: s.batch_size for k, s in smoke.items()} == {
        ("fedavg", "1"): 7,
        ("fedavg", "2"): batch,
        ("fedprox", "1"): 7,
        ("fedprox", "2"): batch,
    }
    cli = expand(recipe, scale="smoke", overrides={"rounds": 4})
    assert {r.spec.rounds for r in cli} == {4}  # --set comes last


def test_skipped_combinations_are_dropped_even_when_a_later_rule_matches(write_recipe):
    text = GRID.replace(
        "[scale.smoke]",
        '[[combination]]\nmatch = { algorithm = "fedavg", local_epochs = "2" }\nskip = true\n\n'
        '[[combination]]\nmatch = { algorithm = "fedavg" }\nset = { rounds = 9 }\n\n[scale.smoke]',
    )
    runs = expand(load_recipe(write_recipe(text)), seeds=[0])
    assert cells(runs) == [("fedavg", "1", 0), ("fedprox", "1", 0), ("fedprox", "2", 0)]
    assert [r.spec.rounds for r in runs if r.labels["algorithm"] == "fedavg"] == [9]


def test_only_keeps_the_named_labels_and_seeds(write_recipe):
    recipe = load_recipe(write_recipe(GRID))
    runs = expand(recipe, only={"local_epochs": "2", "seed": {"1"}})
    assert cells(runs) == [("fedavg", "2", 1), ("fedprox", "2", 1)]
    runs = expand(recipe, only={"algorithm": ["fedprox"], "local_epochs": {"1", "2"}})
    assert cells(runs) == [("fedprox", "1", 0), ("fedprox", "1", 1), ("fedprox", "2", 0), ("fedprox", "2", 1)]
    with pytest.raises(ConfigError) as info:
        expand(recipe, only={"dataset": "digits"})
    assert str(info.value) == (
        f"--only dataset=...: 'dataset' is not a label of {recipe.source} (labels: algorithm, local_epochs, seed)"
    )
    with pytest.raises(ConfigError) as info:
        expand(recipe, only={"seed": {"0", "9"}})
    assert str(info.value) == f"--only seed=9: no such seed in {recipe.source} (0, 1)"
    with pytest.raises(ConfigError) as info:
        expand(recipe, scale="smoke", only={"seed": "0"})
    assert str(info.value) == f"--only seed=0: no such seed in {recipe.source} (5)"
    with pytest.raises(ConfigError) as info:
        expand(recipe, only={"local_epochs": {"3", "4"}})
    assert str(info.value) == f"--only local_epochs=3: no such local_epochs in {recipe.source} (1, 2)"


def test_targets_are_floats_kept_out_of_the_spec(write_recipe):
    recipe = load_recipe(write_recipe(GRID.replace("rounds = 3", "rounds = 3\ntargets = [80, 92.5]")))
    runs = expand(recipe)
    assert {r.targets for r in runs} == {(80.0, 92.5)}
    assert all(type(t) is float for t in runs[0].targets)
    assert runs[0].spec_hash == expand(load_recipe(write_recipe(GRID, "other.toml")))[0].spec_hash
    entry = runs[0].registry_entry()
    assert entry["targets"] == [80.0, 92.5] and entry["spec_hash"] == runs[0].spec_hash
    assert (entry["paper"], entry["recipe"], entry["algorithm"], entry["dataset"]) == ("p", "grid", "fedavg", "digits")
    assert (entry["seed"], entry["scale"], entry["synthetic"]) == (0, "full", False)
    assert entry["labels"] == {"algorithm": "fedavg", "local_epochs": "1"}
    assert entry["spec"]["rounds"] == 3 and entry["spec"]["local_epochs"] == 1


def test_cells_that_compile_to_one_run_are_an_error(write_recipe):
    text = GRID.replace("[scale.smoke]\nrounds = 1", "[scale.smoke]\nrounds = 1\nlocal_epochs = 1")
    recipe = load_recipe(write_recipe(text))
    assert len(expand(recipe)) == 8
    with pytest.raises(RecipeError) as info:
        expand(recipe, scale="smoke")
    assert str(info.value) == (
        f"{recipe.source}: cells {{'algorithm': 'fedavg', 'local_epochs': '1'}} and "
        "{'algorithm': 'fedavg', 'local_epochs': '2'} compile to the same run at scale 'smoke'; "
        "an override (often a scale profile) erases the difference between them"
    )


def test_a_recipe_without_axes_is_one_cell(write_recipe):
    text = GRID.split("[matrix]")[0] + 'algorithm = "fedavg"\n'
    runs = expand(load_recipe(write_recipe(text)))
    assert [(r.labels, r.spec.seed) for r in runs] == [({}, 0), ({}, 1)]


def test_partition_only_recipes_compile_their_cells_only_untrained(write_recipe):
    text = GRID.replace('columns = ["local_epochs"]', 'kind = "partition"')
    recipe = load_recipe(write_recipe(text))
    assert expand(recipe) == []
    assert len(expand(recipe, untrained=True)) == 8
    both = load_recipe(write_recipe(text + '\n[[tables]]\nname = "u"\nrows = ["algorithm"]\n', "both.toml"))
    assert len(expand(both)) == 8


def test_compile_recipes_keeps_each_run_once_in_order(write_recipe):
    a = write_recipe(GRID, "a.toml")
    b = write_recipe(GRID.replace('name = "grid"', 'name = "b"').replace("seeds = [0, 1]", "seeds = [1, 2]"), "b.toml")
    runs = compile_recipes([a, b])
    assert [(r.recipe, r.labels["algorithm"], r.labels["local_epochs"], r.spec.seed) for r in runs][:2] == [
        ("grid", "fedavg", "1", 0),
        ("grid", "fedavg", "1", 1),
    ]
    assert len(runs) == 12 and len({r.spec_hash for r in runs}) == 12
    assert {r.spec.seed for r in runs if r.recipe == "b"} == {2}
    assert len(compile_recipes([a], scale="smoke")) == 4


def test_an_items_label_may_be_a_number(write_recipe):
    text = GRID.replace("local_epochs = [1, 2]", "local_epochs = [{ label = 1, local_epochs = 1 }, 2]")
    runs = expand(load_recipe(write_recipe(text)), seeds=[0])
    assert cells(runs) == [("fedavg", "1", 0), ("fedavg", "2", 0), ("fedprox", "1", 0), ("fedprox", "2", 0)]


def test_a_planned_run_cannot_change_after_its_hash_is_taken(write_recipe):
    run = expand(load_recipe(write_recipe(GRID)), seeds=[0])[0]
    assert run.spec_hash == run.spec.spec_hash and run.extra == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.spec = run.spec.model_copy(update={"rounds": 9})


def test_a_registry_entry_is_plain_json_and_targets_default_to_none_given(write_recipe):
    import json

    run = expand(load_recipe(write_recipe(GRID)), seeds=[0])[0]
    entry = PlannedRun(run.spec, run.labels, run.paper, run.recipe).registry_entry()
    assert entry["targets"] == []
    assert json.loads(json.dumps(entry)) == entry  # tuples (optimizer betas, milestones) stored as JSON lists
    assert entry["spec"]["optimizer"]["lr"] == 0.1


def test_expansion_is_matrix_times_seeds(write_recipe):
    runs = expand(load_recipe(write_recipe()))
    assert len(runs) == 4
    assert {(r.labels["algorithm"], r.spec.seed) for r in runs} == {
        ("fedavg", 0),
        ("fedavg", 1),
        ("fedprox", 0),
        ("fedprox", 1),
    }
    assert len({r.spec_hash for r in runs}) == 4


def test_per_value_override_applies_only_to_its_value(write_recipe):
    runs = expand(load_recipe(write_recipe()))
    by_alg = {r.labels["algorithm"]: r.spec for r in runs if r.spec.seed == 0}
    # specs hold every parameter, defaults filled in (fedbench.recipes.resolve)
    assert by_alg["fedprox"].algorithm_params == {"mu": 0.01, "regularizers": []}
    assert by_alg["fedavg"].algorithm_params == {"regularizers": []}
    assert by_alg["fedavg"].model_params == {"hidden": 32}


def test_scale_profile_overrides_setup_and_seeds(write_recipe):
    runs = expand(load_recipe(write_recipe()), scale="smoke")
    assert len(runs) == 2 and all(r.spec.rounds == 2 and r.spec.scale == "smoke" for r in runs)


def test_combination_override_and_skip(write_recipe):
    from conftest import TINY_RECIPE

    text = (
        TINY_RECIPE
        + """
[[combination]]
match = { algorithm = "fedprox" }
set = { rounds = 7 }

[[combination]]
match = { algorithm = "fedavg" }
skip = true
"""
    )
    runs = expand(load_recipe(write_recipe(text)))
    assert {r.labels["algorithm"] for r in runs} == {"fedprox"}
    assert all(r.spec.rounds == 7 for r in runs)


def test_table_items_on_an_axis_carry_labels_and_overrides(write_recipe):
    from conftest import TINY_RECIPE

    text = TINY_RECIPE.replace(
        'algorithm = ["fedavg", "fedprox"]',
        """algorithm = ["fedavg", "fedprox"]
partition = [
  { label = "dir0.1", partition = "dirichlet", partition_params = { alpha = 0.1 } },
  { label = "iid", partition = "iid", partition_params = {} },
]""",
    )
    runs = expand(load_recipe(write_recipe(text)))
    assert len(runs) == 8
    iid = [r for r in runs if r.labels["partition"] == "iid"]
    assert all(r.spec.partition == "iid" and r.spec.partition_params == {} for r in iid)  # iid has no parameters
    dirichlet = [r for r in runs if r.labels["partition"] == "dir0.1"]
    # partition_params merge deeply: alpha replaced, min_size kept from the setup
    assert all(
        r.spec.partition_params == {"alpha": 0.1, "min_size": 5, "balance": False, "max_tries": 1000} for r in dirichlet
    )


def test_cli_style_overrides_change_spec_and_hash(write_recipe):
    recipe = load_recipe(write_recipe())
    base = expand(recipe, seeds=[0], only={"algorithm": "fedprox"})
    changed = expand(
        recipe,
        seeds=[0],
        only={"algorithm": "fedprox"},
        overrides=assignments_to_dict(["rounds=5", "algorithm_params.mu=0"]),
    )
    assert len(base) == len(changed) == 1
    assert changed[0].spec.rounds == 5 and changed[0].spec.algorithm_params["mu"] == 0
    assert changed[0].spec_hash != base[0].spec_hash
    assert changed[0].labels == base[0].labels


def test_only_filters_by_label_and_rejects_unknown_label(write_recipe):
    recipe = load_recipe(write_recipe())
    assert {r.labels["algorithm"] for r in expand(recipe, only={"algorithm": "fedavg"})} == {"fedavg"}
    with pytest.raises(ConfigError, match="not a label"):
        expand(recipe, only={"dataset": "digits"})


def test_only_values_of_one_key_are_alternatives_and_typos_are_named(write_recipe):
    recipe = load_recipe(write_recipe())
    both = expand(recipe, seeds=[0, 1, 2], only={"algorithm": {"fedavg", "fedprox"}, "seed": {"0", "2"}})
    assert {(r.labels["algorithm"], r.spec.seed) for r in both} == {
        ("fedavg", 0),
        ("fedavg", 2),
        ("fedprox", 0),
        ("fedprox", 2),
    }
    with pytest.raises(ConfigError, match="--only algorithm=fedavgg: no such algorithm"):
        expand(recipe, only={"algorithm": {"fedavg", "fedavgg"}})


def test_where_keeps_the_runs_whose_labels_match_one_of_its_values(write_recipe):
    from conftest import TINY_RECIPE

    text = TINY_RECIPE.replace('figure = "best"', 'figure = "best"\nwhere = { algorithm = ["fedprox"] }')
    recipe = load_recipe(write_recipe(text))
    view = recipe.tables[0]
    selected = [p.labels["algorithm"] for p in expand(recipe) if view.selects(p.labels)]
    assert selected and set(selected) == {"fedprox"}
    assert view.selects({"algorithm": "fedprox"}) and not view.selects({"algorithm": "fedavg"})
    both = view.model_copy(update={"where": {"algorithm": ["fedavg", "fedprox"]}})
    assert both.selects({"algorithm": "fedavg"}) and both.selects({"algorithm": "fedprox"})
    assert not both.selects({"dataset": "x"})  # a run without the label does not match


def test_added_axes_read_back_the_added_label_an_expansion_writes():
    from fedbench.recipes.additions import Additions
    from fedbench.recipes.expand import added_axes

    recipe = load_recipe(RECIPES / "fedtrip_table4.toml")
    case = (
        '{ label = "MLP EMNIST", model = "mlp", dataset = "emnist", partition_params = { samples_per_client = 600 } }'
    )
    (wider,) = Additions.parse(["algorithm=scaffold", f"case={case}"]).extend([recipe])
    read = {(p.labels["algorithm"], p.labels["case"]): added_axes(p.labels) for p in expand(wider, check=False)}
    assert read[("scaffold", "MLP EMNIST")] == ["algorithm", "case"]
    assert read[("scaffold", "MLP MNIST-87%")] == ["algorithm"] and read[("fedavg", "MLP EMNIST")] == ["case"]
    assert read[("fedavg", "MLP MNIST-87%")] == [] and added_axes({}) == []
