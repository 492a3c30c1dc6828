"""Recipe loading, validation and expansion into RunSpecs."""

from __future__ import annotations

import re

import pytest

from fedbench.errors import ConfigError, RecipeError, UnknownNameError
from fedbench.recipes.expand import assignments_to_dict, expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import resolve_spec


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


def test_unknown_top_level_key_and_bad_toml(write_recipe):
    from conftest import TINY_RECIPE

    with pytest.raises(RecipeError, match="unknown key 'sedes'"):
        load_recipe(write_recipe("sedes = [1]\n" + TINY_RECIPE))
    with pytest.raises(RecipeError, match="not valid TOML"):
        load_recipe(write_recipe("paper = \n"))


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


def test_spec_hash_is_stable_and_canonical():
    def resolved(**fields):  # as a recipe compiles it
        return resolve_spec(fields)

    a = resolved(
        algorithm="fedprox",
        algorithm_params={"mu": 0.01},
        dataset="digits",
        model="digits_mlp",
        optimizer={"lr": 0.1, "momentum": 0.9},
    )
    b = resolved(
        model="digits_mlp",
        dataset="digits",
        algorithm="fedprox",
        algorithm_params={"mu": 1e-2},
        optimizer={"momentum": 0.9, "lr": 0.1},
    )
    assert a.spec_hash == b.spec_hash
    # integral floats and ints hash alike (2 == 2.0 in TOML-written recipes)
    c = resolved(algorithm="fedavg", dataset="digits", model="digits_mlp", rounds=2, optimizer={"lr": 1})
    d = resolved(algorithm="fedavg", dataset="digits", model="digits_mlp", rounds=2, optimizer={"lr": 1.0})
    assert c.spec_hash == d.spec_hash
    assert a.spec_hash != resolved(**{**a.model_dump(), "seed": 1}).spec_hash
    # Pinned: a change here silently orphans every registry; change it only with a registry migration.
    assert c.canonical_json().startswith('{"algorithm":"fedavg","algorithm_params":{"regularizers":[]}')
    assert len(a.spec_hash) == 16


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
