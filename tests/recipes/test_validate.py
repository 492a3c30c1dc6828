"""The rules a recipe is checked against (``fedbench/recipes/validate.py``), each a one-line error naming the file,
key and value: the structure of setup, matrix, overrides, combinations and scales; what each view needs (figures,
targets, published values, ratios, derived marks, partition views); and every run's settings."""

from __future__ import annotations

import re

import pytest

from fedbench.errors import ConfigError, RecipeError, UnknownNameError
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import resolve_spec
from fedbench.recipes.schema import SPEC_SETUP_KEYS
from fedbench.spec import RunSpec
from recipe_fixtures import GRID, error, with_view

VALID = ", ".join((*SPEC_SETUP_KEYS, "targets"))


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
            "seeds = [0, 1]",
            "seeds = [0, 9223372036854775808]",  # one past what the registry's 64-bit seed column holds
            "FILE: seeds: seed 9223372036854775808 does not fit the registry's 64-bit integers; "
            "give one from -9223372036854775808 to 9223372036854775807",
        ),
        (
            "seeds = [5]",
            "seeds = [-9223372036854775809]",
            "FILE: scale.smoke.seeds: seed -9223372036854775809 does not fit the registry's 64-bit integers; "
            "give one from -9223372036854775808 to 9223372036854775807",
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


@pytest.mark.parametrize("value", ['"80"', "[true]", '["a"]', "80"])
def test_bad_targets_name_the_value(write_recipe, value):
    message = error(write_recipe, GRID.replace("rounds = 3", f"rounds = 3\ntargets = {value}"))
    shown = {'"80"': "'80'", "[true]": "[True]", '["a"]': "['a']", "80": "80"}[value]
    assert message == f"FILE: targets = {shown}: expected a list of accuracies in %, e.g. targets = [80, 90]"


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


def test_a_printed_ratio_needs_its_reference_cell(write_recipe):
    assert error(write_recipe, with_view('published_ratio = { fedprox = { "1" = 1.2 } }')) == (
        "FILE: tables 't': published_ratio needs ratio_to (the reference cell)"
    )


def test_a_missing_key_of_a_recipe_without_axes_names_every_run(write_recipe):
    no_axes = GRID.split("[matrix]")[0] + 'algorithm = "fedavg"\n'
    assert error(write_recipe, no_axes.replace('model = "digits_mlp"\n', "")) == (
        "FILE: setup key 'model' is required (run all)"
    )


@pytest.mark.parametrize(
    "snippet, message",
    [
        ("rounds = 3\nroundz = 4", "unknown setup key 'roundz'"),
        ('rounds = "many"', "rounds"),
        ("rounds = 0", "rounds"),
        ("rounds = 3\nnum_clients = 1", "clients_per_round=2 exceeds num_clients=1"),
    ],
)
def test_bad_setup_values_are_recipe_errors(write_recipe, snippet, message):
    from conftest import TINY_RECIPE

    # num_clients is dropped from the base setup (default 10) so a snippet may set it
    path = write_recipe(TINY_RECIPE.replace("num_clients = 4\n", "").replace("rounds = 3", snippet, 1))
    with pytest.raises(RecipeError, match=message):
        expand(load_recipe(path))


def test_unknown_algorithm_suggests_close_match(write_recipe):
    from conftest import TINY_RECIPE

    path = write_recipe(TINY_RECIPE.replace('"fedprox"]', '"fedprox", "fedprx"]'))
    with pytest.raises(UnknownNameError, match="did you mean fedprox"):
        expand(load_recipe(path))


def test_bad_algorithm_and_model_params_are_caught_at_compile_time(write_recipe):
    from conftest import TINY_RECIPE

    with pytest.raises(ConfigError, match="mu"):
        expand(load_recipe(write_recipe(TINY_RECIPE.replace("mu = 0.01", "mu = -1"))))
    with pytest.raises(ConfigError, match="no parameter"):
        expand(load_recipe(write_recipe(TINY_RECIPE.replace("hidden = 32", "hiddn = 32"))))


@pytest.mark.parametrize(
    "edit, message",
    [
        # a combination rule that can never match would silently leave its runs with the wrong settings
        (
            lambda t: t + '\n[[combination]]\nmatch = { algorithm = "fedproxx" }\nset = { rounds = 5 }\n',
            "combination[0].match.algorithm = 'fedproxx': no such value",
        ),
        # a published value under a row the table does not have would silently vanish from the report
        (lambda t: t.replace("fedavg = 50.0", "fedavgg = 50.0"), "published.'fedavgg' is not a row"),
        (
            lambda t: t.replace('figure = "best"', 'figure = "best"\nratio_to = "fedavgg"'),
            "ratio_to: 'fedavgg' is not a row or column",
        ),
        # a printed ratio under a row the table does not have, or with no reference cell to be a ratio to
        (
            lambda t: t.replace(
                'figure = "best"', 'figure = "best"\nratio_to = "fedavg"\npublished_ratio = { fedproxx = 1.2 }'
            ),
            "published_ratio.'fedproxx' is not a row",
        ),
        (
            lambda t: t.replace('figure = "best"', 'figure = "best"\npublished_ratio = { fedprox = 1.2 }'),
            "published_ratio needs ratio_to",
        ),
        # a `where` filter naming an axis or a value the recipe does not have would silently empty the view
        (
            lambda t: t.replace('figure = "best"', 'figure = "best"\nwhere = { algorithmm = "fedavg" }'),
            "where.algorithmm: 'algorithmm' is not a matrix axis",
        ),
        (
            lambda t: t.replace('figure = "best"', 'figure = "best"\nwhere = { algorithm = ["fedavg", "fedproxx"] }'),
            "where.algorithm = 'fedproxx': no such value on axis 'algorithm'",
        ),
        # a partition view draws one panel per row: columns would be silently ignored
        (
            lambda t: (
                t + '\n[[tables]]\nname = "p"\nkind = "partition"\nrows = ["algorithm"]\ncolumns = ["algorithm"]\n'
            ),
            "takes no columns",
        ),
    ],
)
def test_labels_a_recipe_names_must_exist(write_recipe, edit, message):
    from conftest import TINY_RECIPE

    with pytest.raises(RecipeError, match=re.escape(message)):
        load_recipe(write_recipe(edit(TINY_RECIPE)))


# ------------------------------------------------------------------------------------------- recipe rules
TABLE = '\n[[tables]]\nname = "t2"\nrows = ["algorithm"]\n'


# (accepted edit, rejected edit, message) of TINY_RECIPE (tests/conftest.py): each structural rule of a recipe.
RECIPE_RULES = [
    (
        lambda t: t.replace("rounds = 3", "rounds = 3\ntargets = [40]").replace("targets = [50]", ""),
        lambda t: t.replace("rounds = 3", "roundz = 3"),
        "unknown setup key 'roundz'",
    ),
    (
        lambda t: t,
        lambda t: t.replace('algorithm = ["fedavg", "fedprox"]', "algorithm = []"),
        "matrix.algorithm is empty",
    ),
    (
        lambda t: t.replace(
            'algorithm = ["fedavg", "fedprox"]',
            'algorithm = ["fedavg", "fedprox"]\nlr = [{ label = "a", optimizer = { lr = 0.1 } }, { label = "b", optimizer = { lr = 0.2 } }]',
        ),
        lambda t: t.replace(
            'algorithm = ["fedavg", "fedprox"]',
            'algorithm = ["fedavg", "fedprox"]\nlr = [{ label = "a", optimizer = { lr = 0.1 } }, { label = "a", optimizer = { lr = 0.2 } }]',
        ),
        "matrix.lr has duplicate labels",
    ),
    (
        lambda t: t.replace(
            'algorithm = ["fedavg", "fedprox"]',
            'algorithm = ["fedavg", "fedprox"]\nlr = [{ label = "a", optimizer = { lr = 0.1 } }]',
        ),
        lambda t: t.replace(
            'algorithm = ["fedavg", "fedprox"]',
            'algorithm = ["fedavg", "fedprox"]\nlr = [{ optimizer = { lr = 0.1 } }]',
        ),
        "every table item needs a 'label'",
    ),
    (
        lambda t: t.replace(
            'algorithm = ["fedavg", "fedprox"]',
            'algorithm = ["fedavg", "fedprox"]\nlr = [{ label = "a", optimizer = { lr = 0.1 } }]',
        ),
        lambda t: t.replace('algorithm = ["fedavg", "fedprox"]', 'algorithm = ["fedavg", "fedprox"]\nlr = [0.1]'),
        "'lr' is not a setup key",
    ),
    (
        lambda t: t.replace(
            'algorithm = ["fedavg", "fedprox"]',
            'algorithm = ["fedavg", "fedprox"]\nlr = [{ label = "a", optimizer = { lr = 0.1 } }]',
        ),
        lambda t: t.replace(
            'algorithm = ["fedavg", "fedprox"]',
            'algorithm = ["fedavg", "fedprox"]\nlr = [{ label = "a", optimiser = { lr = 0.1 } }]',
        ),
        "unknown key matrix.lr[a].'optimiser'",
    ),
    (
        lambda t: t,
        lambda t: t.replace("[overrides.algorithm.fedprox]", "[overrides.optimizer.fedprox]"),
        "overrides.optimizer: 'optimizer' is not a matrix axis",
    ),
    (
        lambda t: t,
        lambda t: t.replace("[overrides.algorithm.fedprox]", "[overrides.algorithm.fedprx]"),
        "overrides.algorithm.fedprx: no such value",
    ),
    (
        lambda t: t,
        lambda t: t.replace("algorithm_params = { mu = 0.01 }", "algorithm_parms = { mu = 0.01 }"),
        "unknown key overrides.algorithm.fedprox.'algorithm_parms'",
    ),
    (
        lambda t: t + '\n[[combination]]\nmatch = { algorithm = "fedprox", scale = "smoke" }\nset = { rounds = 5 }\n',
        lambda t: t + '\n[[combination]]\nmatch = { optimizer = "x" }\nset = { rounds = 5 }\n',
        "combination[0].match.optimizer: 'optimizer' is not a matrix axis",
    ),
    (
        lambda t: t + '\n[[combination]]\nmatch = { algorithm = "fedprox" }\nset = { rounds = 5 }\n',
        lambda t: t + '\n[[combination]]\nmatch = { algorithm = "fedprox" }\nset = { roundz = 5 }\n',
        "unknown key combination[0].set.'roundz'",
    ),
    (
        lambda t: t,
        lambda t: t.replace("rounds = 2\nseeds = [0]", "roundz = 2\nseeds = [0]"),
        "unknown key scale.smoke.'roundz'",
    ),
    (
        lambda t: t + '\n[[tables]]\nname = "m"\nkind = "models"\nstatic_rows = [{ label = "mlp", model = "mlp" }]\n',
        lambda t: t + '\n[[tables]]\nname = "m"\nkind = "models"\n',
        "kind 'models' needs static_rows",
    ),
    (lambda t: t + TABLE, lambda t: t + '\n[[tables]]\nname = "t2"\n', "rows must name at least one matrix axis"),
    (
        lambda t: t + TABLE + 'figure = "value_at_round"\nat_round = 2\n',
        lambda t: t + TABLE + 'figure = "value_at_round"\n',
        "figure 'value_at_round' needs at_round or at_rounds",
    ),
    (
        lambda t: t + TABLE + 'figure = "value_at_round"\nat_rounds = [1, 2]\ncolumns = ["round"]\n',
        lambda t: t + TABLE + 'figure = "value_at_round"\nat_round = 2\ncolumns = ["round"]\n',
        "'round' is not a matrix axis",
    ),
    (
        lambda t: t + TABLE + 'clients = ["A", "B"]\ncolumns = ["client"]\nmetric = "personal_mean"\n',
        lambda t: t + TABLE + 'columns = ["client"]\nmetric = "personal_mean"\n',
        "'client' is not a matrix axis",
    ),
    (
        lambda t: t + TABLE + 'metrics = { Acc = "test_acc" }\ncolumns = ["metric"]\n',
        lambda t: t + TABLE + 'metrics = { Acc = "test_acc" }\n',
        'metrics needs "metric" in rows or columns',
    ),
    (
        lambda t: t + TABLE + 'figure = "peak_memory_mb"\n',
        lambda t: t + TABLE + 'figure = "peak_memory_mb"\nsummary = "mean_curve"\n',
        "figure 'peak_memory_mb' is a value per run",
    ),
    (
        lambda t: t + TABLE + 'figure = "rounds_to_target"\ntarget = 0.5\n',
        lambda t: t + TABLE + 'figure = "rounds_to_target"\n',
        "figure 'rounds_to_target' needs a target",
    ),
    (
        lambda t: t + TABLE + 'figure = "total_bytes_to_target"\ntarget_by = { fedavg = 0.5 }\n',
        lambda t: t + TABLE + 'figure = "total_bytes_to_target"\n',
        "figure 'total_bytes_to_target' needs a target",
    ),
    (
        lambda t: t + TABLE + 'figure = "gflops_to_target"\ntarget = 0.5\n',
        lambda t: t + TABLE + 'figure = "gflops_to_target"\n',
        "figure 'gflops_to_target' needs a target",
    ),
    (
        lambda t: t + TABLE + 'figure = "rounds_to_target"\ntarget_by = { fedprox = 0.5 }\n',
        lambda t: t + TABLE + 'figure = "rounds_to_target"\ntarget_by = { fedprx = 0.5 }\n',
        "target_by.'fedprx': 'fedprx' is not a row or column",
    ),
    (
        lambda t: t + TABLE + 'published_only = ["FedX"]\npublished = { FedX = 1.0 }\n',
        lambda t: t + TABLE + 'published_only = ["FedX"]\n',
        "published_only row 'FedX' has no published value",
    ),
    (
        lambda t: t + TABLE + 'published_only = ["FedX"]\npublished = { FedX = 1.0 }\n',
        lambda t: t + TABLE + 'published_only = ["fedavg"]\npublished = { fedavg = 1.0 }\n',
        "published_only row 'fedavg' is a row of runs",
    ),
    (
        lambda t: t + TABLE + 'columns = ["algorithm"]\npublished = { fedavg = { fedavg = 1.0 } }\n',
        lambda t: t + TABLE + 'columns = ["algorithm"]\npublished = { fedavg = { fedavgg = 1.0 } }\n',
        "published.'fedavg'.'fedavgg' is not a column",
    ),
    (
        lambda t: t + TABLE + "published_std = { fedavg = 1.0 }\n",
        lambda t: t + TABLE + "published_std = { fedavgg = 1.0 }\n",
        "published_std.'fedavgg' is not a row",
    ),
    (
        lambda t: t + TABLE + 'published = { fedavg = 1.0 }\npublished_derived = ["fedavg"]\n',
        lambda t: t + TABLE + 'published = { fedavg = 1.0 }\npublished_derived = ["fedprox"]\n',
        "published_derived marks 'fedprox', which has no published value",
    ),
    (
        lambda t: t + TABLE + 'published_std = { fedavg = 1.0 }\npublished_std_derived = ["fedavg"]\n',
        lambda t: t + TABLE + 'published = { fedavg = 1.0 }\npublished_std_derived = ["fedavg"]\n',
        "published_std_derived marks 'fedavg', which has no published_std value",
    ),
    (
        lambda t: (
            t
            + TABLE
            + 'columns = ["algorithm"]\npublished = { fedavg = { fedprox = 1.0 } }\npublished_derived = { fedavg = ["fedprox"] }\n'
        ),
        lambda t: (
            t
            + TABLE
            + 'columns = ["algorithm"]\npublished = { fedavg = { fedprox = 1.0 } }\npublished_derived = ["fedavg"]\n'
        ),
        "published_derived is a list of rows only in a view without columns",
    ),
    (
        lambda t: t + TABLE + 'published = { fedavg = 1.0 }\npublished_derived = ["fedavg"]\n',
        lambda t: t + TABLE + 'published = { fedavg = 1.0 }\npublished_derived = { fedavg = ["x"] }\n',
        "the view has no columns, so published_derived lists rows",
    ),
]


@pytest.mark.parametrize("accepted, rejected, message", RECIPE_RULES)
def test_every_recipe_rule_accepts_a_valid_recipe_and_rejects_the_invalid_one(
    write_recipe, accepted, rejected, message
):
    from conftest import TINY_RECIPE

    expand(load_recipe(write_recipe(accepted(TINY_RECIPE), "ok.toml")))
    with pytest.raises(RecipeError, match=re.escape(message)):
        expand(load_recipe(write_recipe(rejected(TINY_RECIPE), "bad.toml")))


def test_cutout_needs_images_and_must_fit_them():
    """``check_augmentation``: Cutout on inputs that are not (C, H, W) images, or larger than the images, is one
    line naming the key, the value, the data set and what to do."""
    from fedbench.recipes.validate import check_augmentation
    from fedbench.spec import AugmentationSpec

    check_augmentation(AugmentationSpec(cutout=8), (3, 8, 8), "cifar10")  # fits exactly: no error
    check_augmentation(AugmentationSpec(), (27, 200), "pamap2")  # off: any shape
    with pytest.raises(ConfigError) as signals:
        check_augmentation(AugmentationSpec(cutout=4), (27, 200), "pamap2")
    assert str(signals.value) == (
        "augmentation.cutout = 4: dataset 'pamap2' has inputs of shape (27, 200), not (C, H, W) images"
    )
    with pytest.raises(
        ConfigError, match=r"cutout = 9 is larger than the 8×8 images of dataset 'cifar10'; use at most 8"
    ):
        check_augmentation(AugmentationSpec(cutout=9), (3, 8, 8), "cifar10")
    with pytest.raises(ConfigError, match=r"larger than the 4×10 images of dataset 'wide'; use at most 4"):
        check_augmentation(AugmentationSpec(cutout=5), (1, 4, 10), "wide")  # the smaller side bounds it


# ------------------------------------------------------------------------------------------- diagnostics views
DIAGNOSED = GRID.replace("rounds = 3\n", 'rounds = 3\ndiagnostics = ["weight_divergence"]\n', 1)


# one run (no matrix), whose view draws a diagnostic it does not record
SINGLE = """
paper = "p"
name = "single"
seeds = [0]

[setup]
algorithm = "fedavg"
dataset = "digits"
model = "digits_mlp"
partition = "iid"
num_clients = 4
clients_per_round = 2
rounds = 3
optimizer = { lr = 0.1 }

[[tables]]
name = "d"
kind = "diagnostics"
diagnostic = "weight_divergence"
"""


def diagnostics_view(extra: str = "", recipe: str = DIAGNOSED) -> str:
    """``recipe`` with a diagnostics view of weight_divergence added (``extra``: more lines of that view)."""
    return recipe + (
        '\n[[tables]]\nname = "d"\nkind = "diagnostics"\ndiagnostic = "weight_divergence"\nrows = ["algorithm"]\n'
        + extra
    )


def test_a_diagnostics_view_of_runs_that_record_it_compiles_and_trains(write_recipe):
    recipe = load_recipe(write_recipe(diagnostics_view('layout = "per_layer"\nlayers = ["fc1"]')))
    assert recipe.tables[1].diagnostic == "weight_divergence" and recipe.tables[1].layers == ["fc1"]
    only_diagnostics = DIAGNOSED.split("[[tables]]")[0]
    planned = expand(load_recipe(write_recipe(diagnostics_view(recipe=only_diagnostics))))
    assert len(planned) == 8  # a recipe whose only view draws diagnostics still has its runs to train
    assert all(p.spec.diagnostics == ("weight_divergence",) for p in planned)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            diagnostics_view().replace('diagnostic = "weight_divergence"\n', ""),
            "FILE: tables 'd': kind 'diagnostics' needs diagnostic = one of 'weight_divergence', 'val_loss', "
            "'personal_divergence', 'mixing_weights', 'feature_snapshot', "
            "'feature_stats', 'activations'",
        ),
        (
            with_view('diagnostic = "val_loss"'),
            "FILE: tables 't': diagnostic is for a view of kind 'diagnostics' (this one is 'runs'): drop it",
        ),
        (
            with_view('layout = "per_stage"'),
            "FILE: tables 't': layout is for a view of kind 'diagnostics' (this one is 'runs'): drop it",
        ),
        (
            with_view('layers = ["fc1"]'),
            "FILE: tables 't': layers is for a view of kind 'diagnostics' (this one is 'runs'): drop it",
        ),
        (
            diagnostics_view('layers = ["fc1"]'),
            "FILE: tables 'd': layers picks the lines of layout 'per_layer'; set it or drop layers",
        ),
        (
            diagnostics_view('layout = "per_layer"').replace('"weight_divergence"\nrows', '"val_loss"\nrows'),
            "FILE: tables 'd': layout 'per_layer' arranges weight_divergence only; drop it",
        ),
        (
            diagnostics_view(recipe=GRID),
            "FILE: tables 'd': diagnostic 'weight_divergence' is not recorded by run algorithm=fedavg, "
            'local_epochs=1 (scale full): add it to the setup\'s diagnostics (diagnostics = ["weight_divergence"]) '
            "or leave that run out of the view (where)",
        ),
        (  # a recipe of one run: no labels to name it by
            SINGLE,
            "FILE: tables 'd': diagnostic 'weight_divergence' is not recorded by run all (scale full): add it to the "
            'setup\'s diagnostics (diagnostics = ["weight_divergence"]) or leave that run out of the view (where)',
        ),
    ],
)
def test_a_diagnostics_view_names_a_diagnostic_its_runs_record(write_recipe, text, message):
    assert error(write_recipe, text) == message


def test_every_run_the_view_selects_records_the_diagnostic_at_every_scale(write_recipe):
    """A run left out of the view by `where` may record nothing; a scale profile or a combination that drops the
    diagnostic from a selected run is an error naming that run and scale."""
    unrecorded = DIAGNOSED + '\n[[combination]]\nmatch = { algorithm = "fedprox" }\nset = { diagnostics = [] }\n'
    load_recipe(write_recipe(diagnostics_view('where = { algorithm = "fedavg" }', recipe=unrecorded)))
    assert "run algorithm=fedprox, local_epochs=1 (scale full)" in error(
        write_recipe, diagnostics_view(recipe=unrecorded)
    )
    smoke_off = DIAGNOSED.replace("rounds = 1\n", "rounds = 1\ndiagnostics = []\n", 1)
    assert "run algorithm=fedavg, local_epochs=1 (scale smoke)" in error(
        write_recipe, diagnostics_view(recipe=smoke_off)
    )


# ------------------------------------------------------------------------------------------- the paper's claims
QUOTED = 'quote = "X is best."\nlocation = "§5"\n'


def claim(*lines: str) -> str:
    """A ``[[tables.claims]]`` entry of GRID's view with ``lines`` and a quote and location."""
    return "[[tables.claims]]\n" + "".join(f"{line}\n" for line in lines) + QUOTED


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            claim(),
            'claims[0]: needs best = "<label>" (the label the paper says is best) or order = ["<label>", ...] '
            "(best first)",
        ),
        (
            claim('best = "fedavg"', 'order = ["fedavg", "fedprox"]'),
            "claims[0]: best and order are two kinds of claim: give one",
        ),
        (claim('order = ["fedavg"]'), "claims[0].order = ['fedavg']: an order needs two or more distinct labels"),
        (
            claim('order = ["fedavg", "fedprox", "fedavg"]'),
            "claims[0].order = ['fedavg', 'fedprox', 'fedavg']: an order needs two or more distinct labels",
        ),
        (
            claim('best = "fedavg"', 'axis = "dataset"'),
            "claims[0].axis = 'dataset' is not a row or column key (algorithm, local_epochs)",
        ),
        (
            'figure = "best_round"\n' + claim('best = "fedavg"'),
            "claims[0]: figure 'best_round' has no better side, so nothing ranks first",
        ),
        (claim('best = "fedavgg"'), "claims[0].best = 'fedavgg': no such label on 'algorithm' (fedavg, fedprox)"),
        (
            claim('order = ["fedprox", "fedavgg"]'),
            "claims[0].order = 'fedavgg': no such label on 'algorithm' (fedavg, fedprox)",
        ),
        (
            'where = { algorithm = "fedavg" }\n' + claim('best = "fedprox"'),
            "claims[0].best = 'fedprox': no such label on 'algorithm' (fedavg)",
        ),
        (claim('best = "fedavg"', 'within = ["1", "3"]'), "claims[0].within = '3': not a column of the view (1, 2)"),
        (
            claim('best = "2"', 'axis = "local_epochs"', 'within = ["fedavgg"]'),
            "claims[0].within = 'fedavgg': not a row of the view (fedavg, fedprox)",
        ),
        (
            '[[tables.claims]]\nbest = "fedavg"\nquote = " "\nlocation = "§5"\n',
            "claims[0].quote is empty: give the paper's sentence and where it says it",
        ),
        (
            '[[tables.claims]]\nbest = "fedavg"\nquote = "q"\nlocation = ""\n',
            "claims[0].location is empty: give the paper's sentence and where it says it",
        ),
        (
            claim('best = "fedavg"') + claim('best = "fedproxx"'),
            "claims[1].best = 'fedproxx': no such label on 'algorithm' (fedavg, fedprox)",
        ),
    ],
)
def test_a_claim_names_one_kind_labels_of_a_key_the_views_groups_and_the_paper(write_recipe, extra, message):
    assert error(write_recipe, with_view(extra)) == f"FILE: tables 't': {message}"


def test_claims_that_name_what_the_view_has_load(write_recipe):
    extra = (
        claim('best = "fedprox"', 'within = ["2"]')
        + claim('order = ["fedprox", "fedavg"]')
        + claim('best = "2"', 'axis = "local_epochs"', 'within = ["fedavg"]')
    )
    view = load_recipe(write_recipe(with_view(extra))).tables[0]
    assert [(c.kind, c.best, c.order, c.within) for c in view.claims] == [
        ("best", "fedprox", [], ["2"]),
        ("order", None, ["fedprox", "fedavg"], []),
        ("best", "2", [], ["fedavg"]),
    ]
    assert view.claims[0].quote == "X is best." and view.claims[0].location == "§5"


def test_claims_on_the_client_axis_name_its_clients_and_their_average(write_recipe):
    clients = GRID.replace('columns = ["local_epochs"]', 'columns = ["client"]\nclients = ["A", "B"]')
    ok = clients + claim('best = "fedprox"', 'within = ["Avg.", "B"]')
    assert load_recipe(write_recipe(ok)).tables[0].claims[0].within == ["Avg.", "B"]
    bad = clients + claim('best = "fedprox"', 'within = ["C"]')
    assert error(write_recipe, bad) == "FILE: tables 't': claims[0].within = 'C': not a column of the view (A, Avg., B)"


def test_a_claim_without_its_quote_or_on_an_analytic_table_is_refused(write_recipe):
    assert error(write_recipe, with_view('[[tables.claims]]\nbest = "fedavg"\nlocation = "§5"\n')) == (
        "FILE: tables.0.claims.0.quote: Field required"
    )
    models = (
        GRID + '\n[[tables]]\nname = "m"\nkind = "models"\n'
        'static_rows = [{ label = "mlp", model = "digits_mlp", dataset = "digits" }]\n' + claim('best = "mlp"')
    )
    assert error(write_recipe, models) == (
        "FILE: tables 'm': claims are about a table of runs (this view is of kind 'models'): drop them"
    )
