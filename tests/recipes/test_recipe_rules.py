"""Rules of the recipe compiler (fedbench/recipes/: schema, views, validate, load, expand) checked by hand: grids,
views, scales, overrides and the one-line errors that name the file, key or value."""

from __future__ import annotations

import dataclasses

import pytest

from fedbench.errors import ConfigError, RecipeError, UnknownNameError
from fedbench.recipes.expand import PlannedRun, assignments_to_dict, compile_recipes, deep_merge, expand, merge_setup
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import resolve_spec
from fedbench.recipes.schema import SPEC_SETUP_KEYS, Recipe, _label
from fedbench.recipes.views import TableView
from fedbench.spec import RunSpec

VALID = ", ".join((*SPEC_SETUP_KEYS, "targets"))

# A recipe of two axes, written out so that each test edits one line of it.
GRID = """
paper = "p"
name = "grid"
seeds = [0, 1]

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "iid"
num_clients = 4
clients_per_round = 2
rounds = 3
optimizer = { lr = 0.1 }

[matrix]
algorithm = ["fedavg", "fedprox"]
local_epochs = [1, 2]

[scale.smoke]
rounds = 1
seeds = [5]

[[tables]]
name = "t"
rows = ["algorithm"]
columns = ["local_epochs"]
"""


def error(write_recipe, text: str, exc: type[Exception] = RecipeError) -> str:
    path = write_recipe(text)
    with pytest.raises(exc) as info:
        expand(load_recipe(path))
    message = str(info.value)
    assert "\n" not in message  # one line
    return message.replace(str(path), "FILE")


# ------------------------------------------------------------------------------------------- loading
def test_a_missing_file_is_named_with_where_recipes_live(tmp_path):
    with pytest.raises(RecipeError) as info:
        load_recipe(tmp_path / "nope.toml")
    assert str(info.value) == (
        f"{tmp_path / 'nope.toml'}: recipe file not found; recipes live in recipes/ (e.g. recipes/quickstart.toml)"
    )
    with pytest.raises(RecipeError, match="recipe file not found"):
        load_recipe(tmp_path)  # a directory is no recipe


def test_bad_toml_unknown_keys_and_bad_types_name_the_file_and_key(write_recipe):
    path = write_recipe("paper = \n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value).startswith(f"{path}: not valid TOML: ")
    path = write_recipe("sedes = [1]\n" + GRID)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == f"{path}: unknown key 'sedes'; see docs/recipes.md for the recipe format"
    path = write_recipe(GRID.replace("seeds = [0, 1]", 'seeds = "x"'))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == f"{path}: seeds: Input should be a valid list"
    path = write_recipe(GRID.replace('rows = ["algorithm"]', 'rows = ["algorithm"]\nk = 0'))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == f"{path}: tables.0.k: Input should be greater than or equal to 1"


def test_load_keeps_the_source_and_the_view_defaults(write_recipe):
    path = write_recipe(GRID)
    recipe = load_recipe(path)
    assert recipe.source == path and recipe.paper == "p" and recipe.name == "grid"
    assert recipe.order == 100 and recipe.title == "" and recipe.scale_names() == ["full", "smoke"]
    view = recipe.table("t")
    assert view.rows == ["algorithm"] and view.columns == ["local_epochs"]
    assert (view.kind, view.figure, view.metric, view.k, view.summary) == ("runs", "best", "test_acc", 10, "mean_std")
    assert view.percent is True and view.tolerance == 0.0 and view.baseline_axis == "algorithm"
    with pytest.raises(RecipeError) as info:
        recipe.table("u")
    assert str(info.value) == f"{path}: no table 'u'; tables: t"


def test_a_bare_string_is_a_one_key_rows_list():
    view = TableView(name="t", rows="algorithm", columns="dataset")
    assert view.rows == ["algorithm"] and view.columns == ["dataset"]


# ------------------------------------------------------------------------------------------- structure errors
@pytest.mark.parametrize(
    "old, new, message",
    [
        ("rounds = 3", "rounds = 3\nroundz = 4", f"FILE: unknown setup key 'roundz'; valid keys: {VALID}"),
        ("local_epochs = [1, 2]", "local_epochs = []", "FILE: matrix.local_epochs is empty"),
        (
            "local_epochs = [1, 2]",
            "local_epochs = [1, 1]",
            "FILE: matrix.local_epochs has duplicate labels ['1', '1']; give each item a distinct label",
        ),
        (
            "local_epochs = [1, 2]",
            'local_epochs = [{ label = "a", local_epochs = 1 }, { local_epochs = 2 }]',
            "FILE: matrix.local_epochs: every table item needs a 'label' ({'local_epochs': 2})",
        ),
        (
            "local_epochs = [1, 2]",
            'local_epochs = [{ label = "a", epochz = 1 }]',
            f"FILE: unknown key matrix.local_epochs[a].'epochz'; valid keys: {VALID}",
        ),
        (
            "local_epochs = [1, 2]",
            "local_epochs = [1, 2]\nwidth = [1, 2]",
            "FILE: matrix.width: 'width' is not a setup key, so its items must be tables with a 'label' and the "
            "setup keys they change",
        ),
        (
            "[scale.smoke]",
            "[overrides.datasetz.x]\nrounds = 1\n\n[scale.smoke]",
            "FILE: overrides.datasetz: 'datasetz' is not a matrix axis",
        ),
        (
            "[scale.smoke]",
            "[overrides.algorithm.scaffold]\nrounds = 1\n\n[scale.smoke]",
            "FILE: overrides.algorithm.scaffold: no such value on axis 'algorithm' (fedavg, fedprox)",
        ),
        (
            "[scale.smoke]",
            "[overrides.algorithm.fedprox]\nroundz = 1\n\n[scale.smoke]",
            f"FILE: unknown key overrides.algorithm.fedprox.'roundz'; valid keys: {VALID}",
        ),
        (
            "[scale.smoke]",
            '[[combination]]\nmatch = { dataset = "x" }\n\n[scale.smoke]',
            "FILE: combination[0].match.dataset: 'dataset' is not a matrix axis",
        ),
        (
            "[scale.smoke]",
            '[[combination]]\nmatch = { local_epochs = "1" }\n[[combination]]\nmatch = { local_epochs = "3" }'
            "\n\n[scale.smoke]",
            "FILE: combination[1].match.local_epochs = '3': no such value on axis 'local_epochs' (1, 2)",
        ),
        (
            "[scale.smoke]",
            '[[combination]]\nmatch = { scale = "smoke" }\nset = { roundz = 1 }\n\n[scale.smoke]',
            f"FILE: unknown key combination[0].set.'roundz'; valid keys: {VALID}",
        ),
        (
            "seeds = [0, 1]",
            "seeds = []",
            "FILE: seeds = []: expected a non-empty list of integers, e.g. seeds = [0, 1, 2]",
        ),
        (
            "seeds = [5]",
            "seeds = [true]",
            "FILE: scale.smoke.seeds = [True]: expected a non-empty list of integers, e.g. scale.smoke.seeds = [0, 1, 2]",
        ),
        (
            "seeds = [5]",
            'seeds = "5"',
            "FILE: scale.smoke.seeds = '5': expected a non-empty list of integers, e.g. scale.smoke.seeds = [0, 1, 2]",
        ),
        (
            "seeds = [5]",
            "seeds = [5.0]",
            "FILE: scale.smoke.seeds = [5.0]: expected a non-empty list of integers, "
            "e.g. scale.smoke.seeds = [0, 1, 2]",
        ),
        ("rounds = 1", "roundz = 1", f"FILE: unknown key scale.smoke.'roundz'; valid keys: {VALID}"),
        (
            'rows = ["algorithm"]',
            "rows = []",
            "FILE: tables 't': rows must name at least one matrix axis",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nkind = "models"',
            "FILE: tables 't': kind 'models' needs static_rows",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nkind = "overheads"',
            "FILE: tables 't': kind 'overheads' needs static_rows",
        ),
        (
            'columns = ["local_epochs"]',
            'columns = ["local_epochs"]\nkind = "partition"',
            "FILE: tables 't': a partition view draws one panel per row of the recipe's runs: it needs a setup and "
            "takes no columns",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nfigure = "value_at_round"',
            "FILE: tables 't': figure 'value_at_round' needs at_round or at_rounds",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithmz"]',
            "FILE: tables 't': 'algorithmz' is not a matrix axis (algorithm, local_epochs)",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["client"]',
            "FILE: tables 't': 'client' is not a matrix axis (algorithm, local_epochs)",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["round"]',
            "FILE: tables 't': 'round' is not a matrix axis (algorithm, local_epochs)",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["metric"]',
            "FILE: tables 't': 'metric' is not a matrix axis (algorithm, local_epochs)",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nmetrics = { Acc = "test_acc" }',
            "FILE: tables 't': metrics needs \"metric\" in rows or columns",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nfigure = "peak_memory_mb"\nsummary = "mean_curve"',
            "FILE: tables 't': figure 'peak_memory_mb' is a value per run; use summary = 'mean_std'",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nfigure = "rounds_to_target"',
            "FILE: tables 't': figure 'rounds_to_target' needs a target",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nfigure = "total_bytes_to_target"',
            "FILE: tables 't': figure 'total_bytes_to_target' needs a target",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nfigure = "gflops_to_target"',
            "FILE: tables 't': figure 'gflops_to_target' needs a target",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nwhere = { datasetz = "digits" }',
            "FILE: tables 't': where.datasetz: 'datasetz' is not a matrix axis (algorithm, local_epochs)",
        ),
        (
            'rows = ["algorithm"]',
            'rows = ["algorithm"]\nwhere = { local_epochs = "3" }',
            "FILE: tables 't': where.local_epochs = '3': no such value on axis 'local_epochs' (1, 2)",
        ),
    ],
)
def test_each_structure_error_is_one_line_naming_file_key_and_value(write_recipe, old, new, message):
    assert old in GRID
    assert error(write_recipe, GRID.replace(old, new, 1)) == message


@pytest.mark.parametrize(
    "extra",
    [
        'figure = "value_at_round"\nat_round = 2',
        'figure = "value_at_round"\nat_rounds = [1, 2]',
        'figure = "rounds_to_target"\ntarget = 50.0',
        'figure = "gflops_to_target"\ntarget_by = { fedavg = 50.0 }',
        'figure = "peak_memory_mb"',
        'where = { local_epochs = ["1", "2"] }',
        'kind = "partition"\ncolumns = []',
    ],
)
def test_views_that_have_what_they_need_load(write_recipe, extra):
    text = GRID.replace('columns = ["local_epochs"]', 'columns = ["local_epochs"]\n' + extra, 1)
    if "partition" in extra:
        text = text.replace('columns = ["local_epochs"]\n', "", 1)
    load_recipe(write_recipe(text))


def test_analytic_views_need_static_rows_but_no_axes(write_recipe):
    text = 'paper = "p"\nname = "m"\n[[tables]]\nname = "m"\nkind = "models"\n'
    text += '[[tables.static_rows]]\nlabel = "MLP"\nmodel = "digits_mlp"\n'
    recipe = load_recipe(write_recipe(text))
    assert expand(recipe) == [] and expand(recipe, untrained=True) == []  # analytic tables only: nothing to run


def test_pseudo_axes_are_keys_only_with_their_lists(write_recipe):
    text = GRID.replace(
        'columns = ["local_epochs"]',
        'columns = ["round", "metric"]\nfigure = "value_at_round"\nat_rounds = [1, 3]\n'
        'metrics = { Acc = "test_acc", Loss = "test_loss" }\npublished = { fedavg = { "3 / Loss" = 1.0 } }',
    )
    view = load_recipe(write_recipe(text)).tables[0]
    assert view.view_metrics() == [("Acc", "test_acc"), ("Loss", "test_loss")]
    bad = text.replace('"3 / Loss"', '"2 / Loss"')
    path = write_recipe(bad)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == (
        f"{path}: tables 't': published.'fedavg'.'2 / Loss' is not a column (1 / Acc, 1 / Loss, 3 / Acc, 3 / Loss)"
    )
    clients = GRID.replace('columns = ["local_epochs"]', 'columns = ["client"]\nclients = ["A", "B"]')
    assert load_recipe(write_recipe(clients)).tables[0].view_metrics() == [(None, "test_acc")]


# ------------------------------------------------------------------------------------------- published labels
def with_view(extra: str) -> str:
    return GRID.replace('columns = ["local_epochs"]', 'columns = ["local_epochs"]\n' + extra, 1)


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            'published_only = ["FedDyn"]',
            "FILE: tables 't': published_only row 'FedDyn' has no published value",
        ),
        (
            'published_only = ["fedavg"]\npublished = { fedavg = { "1" = 1.0 } }',
            "FILE: tables 't': published_only row 'fedavg' is a row of runs",
        ),
        (
            "target_by = { fedavgg = 50.0 }",
            "FILE: tables 't': target_by.'fedavgg': 'fedavgg' is not a row or column (1, 2, fedavg, fedprox)",
        ),
        (
            'ratio_to = "x"',
            "FILE: tables 't': ratio_to: 'x' is not a row or column (1, 2, fedavg, fedprox)",
        ),
        (
            'published = { fedavgg = { "1" = 1.0 } }',
            "FILE: tables 't': published.'fedavgg' is not a row (fedavg, fedprox)",
        ),
        (
            'published_std = { fedavg = { "3" = 1.0 } }',
            "FILE: tables 't': published_std.'fedavg'.'3' is not a column (1, 2)",
        ),
        (
            'ratio_to = "fedavg"\npublished_ratio = { fedprox = { "4" = 1.0 } }',
            "FILE: tables 't': published_ratio.'fedprox'.'4' is not a column (1, 2)",
        ),
        (
            'published = { fedavg = { "1" = 1.0 } }\npublished_derived = ["fedavg"]',
            "FILE: tables 't': published_derived is a list of rows only in a view without columns; here mark cells "
            'as { row = ["column", ...] }',
        ),
        (
            'published = { fedavg = { "1" = 1.0 } }\npublished_derived = { fedavg = ["2"] }',
            "FILE: tables 't': published_derived marks 'fedavg'.'2', which has no published value",
        ),
        (
            'published_std = { fedavg = { "1" = 1.0 } }\npublished_std_derived = { fedprox = ["1"] }',
            "FILE: tables 't': published_std_derived marks 'fedprox'.'1', which has no published_std value",
        ),
        (
            'published = { fedavg = 1.0 }\npublished_derived = { fedavg = ["1"] }',
            "FILE: tables 't': published_derived marks 'fedavg'.'1', which has no published value",
        ),
        (
            'baseline = "fedavg"\nbaseline_axis = "dataset"',
            "FILE: tables 't': baseline = 'fedavg' needs baseline_axis 'dataset' among rows or columns "
            '(algorithm, local_epochs), or baseline = "none"',
        ),
        (
            'baseline = "fedavgg"',
            "FILE: tables 't': baseline = 'fedavgg' is not a label of axis 'algorithm' (fedavg, fedprox)",
        ),
    ],
)
def test_published_values_ratios_targets_and_baselines_name_real_cells(write_recipe, extra, message):
    assert error(write_recipe, with_view(extra)) == message


def test_derived_marks_in_a_view_without_columns_list_rows(write_recipe):
    no_columns = GRID.replace('columns = ["local_epochs"]', "columns = []")
    text = no_columns + 'published = { fedavg = 1.0 }\npublished_derived = { fedavg = ["1"] }\n'
    assert error(write_recipe, text) == (
        "FILE: tables 't': the view has no columns, so published_derived lists rows: [\"row\", ...]"
    )
    text = no_columns + 'published_std = { fedavg = 1.0 }\npublished_std_derived = ["fedprox"]\n'
    assert error(write_recipe, text) == (
        "FILE: tables 't': published_std_derived marks 'fedprox', which has no published_std value"
    )
    text = no_columns + 'published = { fedavg = 1.0, fedprox = 2.0 }\npublished_derived = ["fedprox"]\n'
    view = load_recipe(write_recipe(text)).tables[0]
    assert view.derived_cells() == [("fedprox", None)] and view.derived_cells(std=True) == []
    assert view.is_derived("fedprox", "anything") and not view.is_derived("fedavg", "anything")
    assert view.published_value("fedprox", "x") == 2.0 and view.published_value("fedavg", "x", std=True) is None


def test_published_cells_ratios_and_derived_marks_are_read_per_cell(write_recipe):
    text = with_view(
        'ratio_to = "fedavg"\nbaseline = "none"\n'
        'published = { fedavg = { "1" = 50.0, "2" = 60.0 }, fedprox = { "1" = 55.0, "2" = "n/a" } }\n'
        'published_std = { fedavg = { "1" = 0.5 } }\n'
        'published_ratio = { fedprox = { "1" = 1.1 } }\n'
        'published_derived = { fedprox = ["1"] }\npublished_std_derived = { fedavg = ["1"] }\n'
        'derived_note = "from Table 2"'
    )
    view = load_recipe(write_recipe(text)).tables[0]
    assert view.published_value("fedavg", "2") == 60.0 and view.published_value("fedprox", "2") == "n/a"
    assert (
        view.published_value("fedavg", "1", std=True) == 0.5 and view.published_value("fedprox", "1", std=True) is None
    )
    assert view.printed_ratio("fedprox", "1") == 1.1 and view.printed_ratio("fedprox", "2") is None
    assert view.printed_ratio("fedavg", "1") is None
    assert view.derived_cells() == [("fedprox", "1")] and view.derived_cells(std=True) == [("fedavg", "1")]
    assert view.is_derived("fedprox", "1") and not view.is_derived("fedprox", "2")
    assert not view.is_derived("fedavg", "1") and view.is_derived("fedavg", "1", std=True)
    # a row-only printed ratio applies to every column
    assert TableView(name="v", published_ratio={"a": 2.0}).printed_ratio("a", "any") == 2.0


def test_published_only_rows_join_the_rows_and_the_baseline_may_be_a_column_axis(write_recipe):
    text = with_view(
        'published_only = ["FedDyn"]\npublished = { FedDyn = { "1" = 40.0 } }\nratio_to = "FedDyn"\n'
        'baseline = "1"\nbaseline_axis = "local_epochs"'
    )
    view = load_recipe(write_recipe(text)).tables[0]
    assert view.published_only == ["FedDyn"] and view.baseline == "1"


def test_cells_of_the_client_axis_are_not_checked(write_recipe):
    text = GRID.replace('columns = ["local_epochs"]', 'columns = ["client"]\nclients = ["A", "B"]')
    text += 'published = { fedavg = { Z = 1.0 } }\nratio_to = "nowhere"\ntarget_by = { elsewhere = 1.0 }\n'
    load_recipe(write_recipe(text))  # the client labels come from the data: nothing to check them against


def test_selects_keeps_runs_whose_labels_match_every_key():
    view = TableView(name="v", where={"algorithm": "fedavg", "local_epochs": ["1", "2"]})
    assert view.selects({"algorithm": "fedavg", "local_epochs": "2"})
    assert not view.selects({"algorithm": "fedavg", "local_epochs": "3"})
    assert not view.selects({"algorithm": "fedprox", "local_epochs": "1"})
    assert TableView(name="v").selects({"anything": "x"})


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


@pytest.mark.parametrize("value, label", [(0.1, "0.1"), (1e-05, "1e-05"), (2.0, "2"), (3, "3"), ("iid", "iid")])
def test_axis_labels_print_floats_shortest(value, label):
    assert _label(value) == label


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


@pytest.mark.parametrize("value", ['"80"', "[true]", '["a"]', "80"])
def test_bad_targets_name_the_value(write_recipe, value):
    message = error(write_recipe, GRID.replace("rounds = 3", f"rounds = 3\ntargets = {value}"))
    shown = {'"80"': "'80'", "[true]": "[True]", '["a"]': "['a']", "80": "80"}[value]
    assert message == f"FILE: targets = {shown}: expected a list of accuracies in %, e.g. targets = [80, 90]"


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


def test_bad_run_settings_name_the_run(write_recipe):
    assert error(write_recipe, GRID.replace('model = "digits_mlp"\n', "")) == (
        "FILE: setup key 'model' is required (run algorithm=fedavg, local_epochs=1)"
    )
    message = error(write_recipe, GRID.replace("rounds = 3", "rounds = 0"))
    assert message.startswith("FILE: rounds: ") and message.endswith("(run algorithm=fedavg, local_epochs=1, value 0)")
    message = error(write_recipe, GRID.replace('"fedprox"]', '"fedproxx"]'), UnknownNameError)
    assert message.startswith("FILE: ") and message.endswith(" (run algorithm=fedproxx, local_epochs=1)")
    assert "fedproxx" in message
    no_axes = GRID.split("[matrix]")[0] + 'algorithm = "fedavg"\nrounds = 0\n'
    message = error(write_recipe, no_axes.replace("rounds = 3\n", ""))
    assert message.startswith("FILE: rounds: ") and message.endswith("(run all, value 0)")
    message = error(write_recipe, no_axes.replace("rounds = 3\n", "").replace("rounds = 0\n", "mu = 1\n"))
    assert message.startswith("FILE: unknown setup key 'mu'")


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


def test_augmentation_is_checked_against_the_datasets_shape_unless_told_not_to(write_recipe):
    text = GRID.replace("rounds = 3", "rounds = 3\naugmentation = { cutout = 9 }")
    recipe = load_recipe(write_recipe(text))
    with pytest.raises(ConfigError) as info:
        expand(recipe)
    assert str(info.value) == (
        f"{recipe.source}: augmentation.cutout = 9 is larger than the 8×8 images of dataset 'digits'; use at most 8 "
        "(0 = off)"
    )
    assert len(expand(recipe, check=False)) == 8


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


def test_recipe_model_defaults():
    recipe = Recipe(paper="p", name="n")
    assert recipe.seeds == [0] and recipe.scale_names() == ["full"] and recipe.source is None
    with pytest.raises(RecipeError) as info:
        recipe.table("x")
    assert str(info.value) == "None: no table 'x'; tables: "


def test_a_views_defaults_and_bounds():
    view = TableView(name="v")
    assert (view.title, view.caption, view.kind, view.figure, view.metric) == ("", "", "runs", "best", "test_acc")
    assert (view.k, view.target, view.target_rule, view.at_round, view.ratio_to) == (
        10,
        None,
        "first_reach",
        None,
        None,
    )
    assert (view.plot, view.plot_by, view.smoothing, view.summary, view.percent) == (
        "curves",
        "rows",
        0.0,
        "mean_std",
        True,
    )
    assert (view.baseline, view.baseline_axis, view.tolerance, view.derived_note) == (None, "algorithm", 0.0, "")
    assert view.rows == view.columns == view.at_rounds == view.clients == view.published_only == []
    assert view.view_metrics() == [(None, "test_acc")] and view.derived_cells() == []
    assert TableView(name="v", k=1, smoothing=0.99, tolerance=0.0).k == 1
    for bad in ({"k": 0}, {"smoothing": 1.0}, {"smoothing": -0.1}, {"tolerance": -0.1}):
        with pytest.raises(ValueError):
            TableView(name="v", **bad)
    recipe = Recipe(paper="p", name="n")
    assert (recipe.title, recipe.description, recipe.order, recipe.setup, recipe.matrix) == ("", "", 100, {}, {})


@pytest.mark.parametrize("key, value", [("seed", "3"), ("scale", '"smoke"'), ("synthetic", "true")])
def test_seed_scale_and_synthetic_are_chosen_per_run_not_in_a_setup(write_recipe, key, value):
    message = error(write_recipe, GRID.replace("rounds = 3", f"rounds = 3\n{key} = {value}"))
    assert message.startswith(f"FILE: unknown setup key '{key}'; valid keys: algorithm, algorithm_params, dataset")
    assert message.endswith("eval_metrics, finetune, targets")
    with pytest.raises(ConfigError, match=f"^--set '{key}=1': unknown setup key '{key}'"):
        assignments_to_dict([f"{key}=1"])


@pytest.mark.parametrize(
    "field, values",
    [
        ("kind", ["runs", "models", "overheads", "partition"]),
        ("target_rule", ["first_reach", "count_not_above"]),
        ("plot", ["curves", "box", "none"]),
        ("plot_by", ["rows", "columns"]),
        ("summary", ["mean_std", "mean_curve"]),
        (
            "figure",
            [
                "best",
                "final",
                "last_k_mean",
                "best_round",
                "rounds_to_target",
                "total_bytes_to_target",
                "gflops_to_target",
                "value_at_round",
                "wall_seconds",
                "seconds_per_round",
                "wall_hours",
                "peak_memory_mb",
                "val_selected",
            ],
        ),
    ],
)
def test_every_documented_choice_of_a_view_is_accepted_and_others_are_not(field, values):
    for value in values:
        assert getattr(TableView(name="v", **{field: value}), field) == value
    with pytest.raises(ValueError):
        TableView(name="v", **{field: "other"})


@pytest.mark.parametrize("figure", ["wall_seconds", "wall_hours", "peak_memory_mb", "best"])
def test_a_run_figures_caption_names_no_curve_metric_and_derived_values_carry_the_mark(write_recipe, figure):
    from fedbench.report.collect import EmptyRegistry
    from fedbench.report.render import render
    from fedbench.report.render.notes import notes
    from fedbench.report.table import build_table

    text = GRID.replace('columns = ["local_epochs"]', f'columns = []\nfigure = "{figure}"')
    text += 'published = { fedavg = 12.5 }\npublished_derived = ["fedavg"]\n'
    recipe = load_recipe(write_recipe(text))
    table = build_table(recipe, recipe.tables[0], EmptyRegistry())
    (cell_note,) = [n for n in notes(table) if n.startswith("cell: ")]
    assert ("test accuracy" in cell_note) == (figure == "best")
    assert "‡ paper value not printed in the paper" in render([table], "markdown")


def test_setup_wide_errors_say_setup_and_a_recipe_without_axes_names_no_run(write_recipe):
    message = error(write_recipe, GRID.replace("num_clients = 4", "num_clients = 1"))
    assert message.startswith("FILE: setup: clients_per_round=2 exceeds num_clients=1")
    assert "Value error" not in message and "(run algorithm=fedavg, local_epochs=1, value {" in message
    no_axes = GRID.split("[matrix]")[0] + 'algorithm = "fedavgg"\n'
    message = error(write_recipe, no_axes, UnknownNameError)
    with pytest.raises(UnknownNameError) as info:
        resolve_spec({"algorithm": "fedavgg", "dataset": "digits", "model": "digits_mlp"})
    assert message == f"FILE: {info.value}"  # the spec's own error, prefixed by the file; no run to name


def test_check_spec_prefixes_the_source_only_when_given():
    from fedbench.recipes.validate import check_spec

    spec = RunSpec(algorithm="fedavg", dataset="digits", model="digits_mlp", augmentation={"cutout": 9})
    expected = "augmentation.cutout = 9 is larger than the 8×8 images of dataset 'digits'; use at most 8 (0 = off)"
    with pytest.raises(ConfigError) as info:
        check_spec(spec)
    assert str(info.value) == expected
    with pytest.raises(ConfigError) as info:
        check_spec(spec, "r.toml")
    assert str(info.value) == "r.toml: " + expected
    check_spec(RunSpec(algorithm="fedavg", dataset="digits", model="digits_mlp", augmentation={"cutout": 8}))


def test_derived_marks_of_a_view_without_columns_need_row_values(write_recipe):
    no_columns = GRID.replace('columns = ["local_epochs"]', "columns = []")
    text = no_columns + 'published = { fedavg = { x = 1.0 } }\npublished_derived = ["fedavg"]\n'
    assert error(write_recipe, text) == (
        "FILE: tables 't': published_derived marks 'fedavg', which has no published value"
    )
    models = 'paper = "p"\nname = "m"\n[[tables]]\nname = "m"\nkind = "models"\n{}\n'
    models += '[[tables.static_rows]]\nlabel = "MLP"\nmodel = "digits_mlp"\n'
    marks = 'published = { MLP = 1.0 }\npublished_derived = ["MLP"]'
    assert error(write_recipe, models.format(marks)).startswith(
        "FILE: tables 'm': published_derived is a list of rows only in a view without columns"
    )
    marks = 'published = { MLP = { a = 1.0 } }\npublished_derived = { MLP = ["a"] }'
    view = load_recipe(write_recipe(models.format(marks)))
    assert view.tables[0].is_derived("MLP", "a")


def test_an_items_label_may_be_a_number(write_recipe):
    text = GRID.replace("local_epochs = [1, 2]", "local_epochs = [{ label = 1, local_epochs = 1 }, 2]")
    runs = expand(load_recipe(write_recipe(text)), seeds=[0])
    assert cells(runs) == [("fedavg", "1", 0), ("fedavg", "2", 0), ("fedprox", "1", 0), ("fedprox", "2", 0)]


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


def test_a_planned_run_cannot_change_after_its_hash_is_taken(write_recipe):
    run = expand(load_recipe(write_recipe(GRID)), seeds=[0])[0]
    assert run.spec_hash == run.spec.spec_hash and run.extra == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.spec = run.spec.model_copy(update={"rounds": 9})


def test_combination_rules_check_every_axis_they_match_and_every_view_is_checked(write_recipe):
    text = GRID.replace(
        "[scale.smoke]", '[[combination]]\nmatch = { scale = "smoke", local_epochs = "3" }\n\n[scale.smoke]'
    )
    assert error(write_recipe, text) == (
        "FILE: combination[0].match.local_epochs = '3': no such value on axis 'local_epochs' (1, 2)"
    )
    models = '[[tables]]\nname = "m"\nkind = "models"\n[[tables.static_rows]]\nlabel = "MLP"\n\n'
    text = GRID.replace("[[tables]]", models + "[[tables]]", 1).replace('rows = ["algorithm"]', "rows = []")
    assert error(write_recipe, text) == "FILE: tables 't': rows must name at least one matrix axis"


def test_a_partition_view_needs_a_setup(write_recipe):
    text = GRID.split("[setup]")[0] + '[matrix]\nalgorithm = ["fedavg"]\n[[tables]]\nname = "p"\nkind = "partition"\n'
    text += 'rows = ["algorithm"]\n'
    assert error(write_recipe, text).endswith("it needs a setup and takes no columns")


def test_published_only_rows_add_to_the_rows_of_runs(write_recipe):
    text = with_view(
        'published_only = ["FedDyn"]\npublished = { FedDyn = { "1" = 40.0 }, fedavg = { "1" = 50.0 } }\n'
        "target_by = { fedprox = 60.0 }"
    )
    assert load_recipe(write_recipe(text)).tables[0].published_value("fedavg", "1") == 50.0


def test_a_registry_entry_is_plain_json_and_targets_default_to_none_given(write_recipe):
    import json

    run = expand(load_recipe(write_recipe(GRID)), seeds=[0])[0]
    entry = PlannedRun(run.spec, run.labels, run.paper, run.recipe).registry_entry()
    assert entry["targets"] == []
    assert json.loads(json.dumps(entry)) == entry  # tuples (optimizer betas, milestones) stored as JSON lists
    assert entry["spec"]["optimizer"]["lr"] == 0.1


def test_an_unknown_table_lists_every_table(write_recipe):
    recipe = load_recipe(write_recipe(GRID + '\n[[tables]]\nname = "u"\nrows = ["local_epochs"]\n'))
    assert recipe.table("u").rows == ["local_epochs"]
    with pytest.raises(RecipeError) as info:
        recipe.table("v")
    assert str(info.value) == f"{recipe.source}: no table 'v'; tables: t, u"


def test_a_printed_ratio_needs_its_reference_cell(write_recipe):
    assert error(write_recipe, with_view('published_ratio = { fedprox = { "1" = 1.2 } }')) == (
        "FILE: tables 't': published_ratio needs ratio_to (the reference cell)"
    )


def test_a_missing_key_of_a_recipe_without_axes_names_every_run(write_recipe):
    no_axes = GRID.split("[matrix]")[0] + 'algorithm = "fedavg"\n'
    assert error(write_recipe, no_axes.replace('model = "digits_mlp"\n', "")) == (
        "FILE: setup key 'model' is required (run all)"
    )
