"""``extends`` (fedbench/recipes/extends.py): a recipe written as its changes to another loads as that recipe with
them applied, key by key where the format says so; a bad ``extends`` is one line naming the file, and a run of it
changes nothing in the registry."""

from __future__ import annotations

import json
import textwrap

import pytest

from cli_fixtures import assert_user_error, runner
from fedbench.cli import app
from fedbench.errors import RecipeError
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.shipped import SHIPPED_DIR
from recipe_fixtures import GRID

BASE = (
    GRID.replace('partition = "iid"', 'partition = "dirichlet"\npartition_params = { alpha = 0.5, min_size = 2 }')
    .replace('name = "grid"', 'name = "grid"\ntitle = "the grid"\ndescription = "the base\'s prose"\norder = 1')
    .replace(
        "[scale.smoke]",
        "[overrides.algorithm.fedprox]\nalgorithm_params = { mu = 0.1 }\nlocal_epochs = 3\n\n[scale.smoke]",
    )
    .replace(
        'columns = ["local_epochs"]',
        'columns = ["local_epochs"]\ntitle = "T"\npublished = { fedavg = { "1" = 50.0, "2" = 60.0 } }',
    )
)


def write(folder, name: str, text: str):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def child(extra: str, extends: str = "grid") -> str:
    return f'extends = "{extends}"\nname = "variant"\ntitle = "the variant"\n' + textwrap.dedent(extra)


def test_a_variant_is_its_base_with_its_keys_applied(tmp_path):
    write(tmp_path, "grid.toml", BASE)
    path = write(
        tmp_path,
        "variant.toml",
        child(
            """
            [setup]
            partition_params = { alpha = 0.1 }
            rounds = 4

            [overrides.algorithm.fedprox]
            local_epochs = 5

            [scale.smoke]
            rounds = 2

            [[tables]]
            name = "t"
            title = "T under another reading"

            [[tables]]
            name = "u"
            rows = ["algorithm"]
            columns = ["local_epochs"]
            """
        ),
    )
    base, variant = load_recipe(tmp_path / "grid.toml"), load_recipe(path)
    assert (variant.name, variant.title, variant.description, variant.order) == ("variant", "the variant", "", 100)
    assert variant.paper == base.paper and variant.seeds == base.seeds and variant.matrix == base.matrix
    # a setup key replaces the base's value whole: alpha alone, not alpha and the base's min_size
    assert variant.setup == {**base.setup, "partition_params": {"alpha": 0.1}, "rounds": 4}
    # an override and a scale profile key by key
    assert variant.overrides["algorithm"]["fedprox"] == {"algorithm_params": {"mu": 0.1}, "local_epochs": 5}
    assert variant.scale["smoke"] == {"rounds": 2, "seeds": [5]}
    # views by name: the title changed, the published values the base's; a new view after them
    assert [v.name for v in variant.tables] == ["t", "u"]
    assert variant.tables[0].title == "T under another reading"
    assert variant.tables[0].published == base.tables[0].published == {"fedavg": {"1": 50.0, "2": 60.0}}
    assert variant.tables[0].rows == base.tables[0].rows
    assert variant.source == path
    specs = [planned.spec for planned in expand(variant)]
    assert {s.rounds for s in specs} == {4} and all(
        s.algorithm_params["mu"] == 0.1 for s in specs if s.algorithm == "fedprox"
    )


def test_a_variant_of_a_variant_and_a_base_named_by_path(tmp_path):
    write(tmp_path, "bases/grid.toml", BASE)
    write(
        tmp_path,
        "middle.toml",
        child("[setup]\nrounds = 7\n", extends="bases/grid.toml").replace('"variant"', '"middle"'),
    )
    last = load_recipe(write(tmp_path, "last.toml", child("[setup]\nnum_clients = 6\n", extends="middle")))
    assert (last.setup["rounds"], last.setup["num_clients"], last.name) == (7, 6, "variant")


def test_same_runs_as_the_recipe_written_out(tmp_path):
    """A variant compiles to the very runs (spec hashes) of the same recipe written out whole."""
    write(tmp_path, "grid.toml", BASE)
    variant = load_recipe(write(tmp_path, "variant.toml", child("[setup]\nrounds = 4\n")))
    whole = load_recipe(write(tmp_path, "whole.toml", BASE.replace("rounds = 3", "rounds = 4")))
    assert [p.spec_hash for p in expand(variant)] == [p.spec_hash for p in expand(whole)]
    assert [p.spec_hash for p in expand(variant)] != [p.spec_hash for p in expand(load_recipe(tmp_path / "grid.toml"))]


def test_a_base_plug_in_is_found_beside_the_base(tmp_path):
    plugin = tmp_path / "bases" / "my_plugin.py"
    write(tmp_path, "bases/grid.toml", 'plugins = ["my_plugin.py"]\n' + BASE)
    plugin.write_text("X = 1\n")
    variant = load_recipe(write(tmp_path, "variants/variant.toml", child("", extends="../bases/grid.toml")))
    assert variant.plugins == [str(plugin.resolve())]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (child("", extends="nope"), "FILE: extends = 'nope': neither a recipe file nor a shipped recipe's name"),
        (
            child("", extends="fedtr_tabel1"),
            "FILE: extends = 'fedtr_tabel1': neither a recipe file nor a shipped recipe's name; did you mean fedtr_table1",
        ),
        (child("", extends="sub/nope.toml"), "FILE: extends = 'sub/nope.toml': no such recipe file"),
        ('extends = 3\nname = "v"\ntitle = "v"\n', "FILE: extends = 3: give the recipe this one changes"),
        (
            'extends = "grid"\ntitle = "v"\n',
            "FILE: a recipe that extends another gives its own 'name'; add name = \"...\"",
        ),
        ('extends = "grid"\nname = "v"\n', "FILE: a recipe that extends another gives its own 'title'"),
        (child("", extends="variant"), "FILE: extends = 'variant' makes a cycle (variant → variant)"),
        (child("nonsense = 1\n"), "FILE: unknown key 'nonsense'"),
    ],
)
def test_a_bad_extends_is_one_line_naming_the_file(tmp_path, text, says):
    write(tmp_path, "grid.toml", BASE)
    path = write(tmp_path, "variant.toml", text)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    message = str(info.value)
    assert "\n" not in message and message.replace(str(path), "FILE").startswith(says), message


def test_a_cycle_through_two_files_names_both(tmp_path):
    write(tmp_path, "a.toml", 'extends = "b"\nname = "a"\ntitle = "a"\n')
    write(tmp_path, "b.toml", 'extends = "a"\nname = "b"\ntitle = "b"\n')
    with pytest.raises(RecipeError, match="makes a cycle \\(a → b → a\\)"):
        load_recipe(tmp_path / "a.toml")


def test_an_error_in_the_base_names_the_base(tmp_path):
    write(tmp_path, "grid.toml", BASE.replace('paper = "p"', 'paper = "p"\nbogus = ['))
    with pytest.raises(RecipeError) as info:
        load_recipe(write(tmp_path, "variant.toml", child("")))
    assert str(info.value).startswith(f"{tmp_path / 'grid.toml'}: not valid TOML")


def test_through_the_cli_a_bad_extends_is_exit_2_and_leaves_the_registry_alone(tmp_path):
    path = write(tmp_path, "variant.toml", child("", extends="nope"))
    registry = tmp_path / "r.db"
    result = runner.invoke(app, ["run", str(path), "--registry", f"sqlite:///{registry}"])
    assert_user_error(result, "extends = 'nope'")
    assert not registry.exists()


def test_a_shipped_variant_extends_by_name_and_lists_its_bases_paper(tmp_path):
    variants = [path for path in sorted(SHIPPED_DIR.glob("*.toml")) if "\nextends = " in path.read_text()]
    assert variants  # the PersonalizedFL variants of FedTR Table 1
    listed = {e["name"]: e for e in json.loads(runner.invoke(app, ["recipes", "list", "--json"]).stdout)}
    for path in variants:
        assert listed[path.stem]["paper"] == load_recipe(path).paper != ""
    # a copied variant alone still finds its base among the shipped recipes
    result = runner.invoke(app, ["recipes", "copy", "fedtr_table1_personalizedfl_data", "--to", str(tmp_path)])
    assert result.exit_code == 0, result.output
    copied = load_recipe(tmp_path / "fedtr_table1_personalizedfl_data.toml")
    assert copied.tables == load_recipe(SHIPPED_DIR / "fedtr_table1_personalizedfl_data.toml").tables
