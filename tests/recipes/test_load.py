"""Loading a recipe (``fedbench/recipes/load.py``): the one-line errors of a missing file, bad TOML, unknown keys and
bad types, naming the file and key; what a loaded recipe keeps (its source, the views' defaults)."""

from __future__ import annotations

import pytest

from fedbench.errors import RecipeError
from fedbench.recipes.load import load_recipe
from recipe_fixtures import GRID


# ------------------------------------------------------------------------------------------- loading
def test_a_missing_file_is_named_with_where_recipes_live(tmp_path):
    with pytest.raises(RecipeError) as info:
        load_recipe(tmp_path / "nope.toml")
    assert str(info.value) == (
        f"{tmp_path / 'nope.toml'}: recipe file not found; give a recipe file or a shipped recipe's name (`fedbench recipes list`)"
    )
    with pytest.raises(RecipeError) as info:
        load_recipe(tmp_path)  # a directory is no recipe
    assert (
        str(info.value) == f"{tmp_path}: a folder, not a recipe file; give a .toml file (e.g. recipes/quickstart.toml)"
    )


def test_a_file_that_is_not_utf8_text_is_a_toml_error_not_a_traceback(tmp_path):
    """TOML is UTF-8 (whatever the locale): a binary or Latin-1 file is one ``RecipeError`` naming it and the first
    byte that is not UTF-8."""
    path = tmp_path / "latin.toml"
    path.write_bytes(b'paper = "caf\xe9"\n')
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == f"{path}: not valid TOML: not UTF-8 text (byte 12)"
    path.write_bytes('paper = "café"\n'.encode())  # the same text in UTF-8 reads (and fails later, on the schema)
    with pytest.raises(RecipeError, match="Field required"):
        load_recipe(path)


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
    assert view.percent is True and view.tolerance is None and view.baseline_axis == "algorithm"
    with pytest.raises(RecipeError) as info:
        recipe.table("u")
    assert str(info.value) == f"{path}: no table 'u'; tables: t"


def test_unknown_top_level_key_and_bad_toml(write_recipe):
    from conftest import TINY_RECIPE

    with pytest.raises(RecipeError, match="unknown key 'sedes'"):
        load_recipe(write_recipe("sedes = [1]\n" + TINY_RECIPE))
    with pytest.raises(RecipeError, match="not valid TOML"):
        load_recipe(write_recipe("paper = \n"))
