"""The shipped recipes (``fedbench/recipes/shipped.py``): the package's link reaches the repository's recipes/, a
bare name loads the shipped recipe of that name, a path never does, an unknown name lists the close ones, and
copying refuses to replace a file that differs; a variant quotes the paper's numbers as its base recipe does."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.errors import RecipeError
from fedbench.recipes.load import load_recipe
from fedbench.recipes.shipped import (
    SHIPPED_DIR,
    copy_shipped,
    is_recipe_name,
    shipped_names,
    shipped_path,
    shipped_recipes,
)

REPOSITORY_RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_the_shipped_recipes_are_the_repositorys_recipes():
    assert SHIPPED_DIR.resolve() == REPOSITORY_RECIPES.resolve()
    assert shipped_names() == sorted(path.stem for path in REPOSITORY_RECIPES.glob("*.toml"))
    quickstart = next(r for r in shipped_recipes() if r.name == "quickstart")
    assert (quickstart.paper, quickstart.title) == ("quickstart", load_recipe(quickstart.path).title)


def test_a_bare_name_is_a_shipped_recipe_and_a_path_is_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_recipe("quickstart").source == SHIPPED_DIR / "quickstart.toml"
    assert is_recipe_name("quickstart")
    assert not is_recipe_name("quickstart.toml") and not is_recipe_name("recipes/quickstart")
    (tmp_path / "quickstart").write_text("")  # a file of that name, here, is what the user means
    assert not is_recipe_name("quickstart")
    with pytest.raises(RecipeError, match="recipe file not found"):
        load_recipe("recipes/quickstart.toml")  # a path is never looked up among the shipped recipes


def test_an_unknown_name_is_one_line_with_the_close_names():
    with pytest.raises(RecipeError) as info:
        shipped_path("quikstart")
    assert str(info.value) == "quikstart: neither a recipe file nor a shipped recipe's name; did you mean quickstart?"
    with pytest.raises(RecipeError) as info:
        shipped_path("zzzz")
    assert str(info.value).endswith("`fedbench recipes list` lists them")


def test_copy_writes_the_files_and_refuses_to_replace_a_changed_one(tmp_path):
    folder = tmp_path / "mine"
    assert copy_shipped(["quickstart"], folder) == [folder / "quickstart.toml"]
    assert (folder / "quickstart.toml").read_bytes() == (SHIPPED_DIR / "quickstart.toml").read_bytes()
    assert copy_shipped(["quickstart"], folder) == [folder / "quickstart.toml"]  # the same file again: fine
    (folder / "quickstart.toml").write_text("# mine\n")
    with pytest.raises(RecipeError) as info:
        copy_shipped(["quickstart", "fedtr_table1"], folder)
    assert (
        str(info.value)
        == f"{folder / 'quickstart.toml'}: exists and differs from the shipped recipe; pass --force to replace it"
    )
    assert not (folder / "fedtr_table1.toml").exists()  # nothing copied
    copy_shipped(["quickstart"], folder, overwrite=True)
    assert (folder / "quickstart.toml").read_bytes() == (SHIPPED_DIR / "quickstart.toml").read_bytes()
    assert len(copy_shipped([], tmp_path / "all")) == len(shipped_names())
    (tmp_path / "file").write_text("")
    with pytest.raises(RecipeError, match="not a folder"):
        copy_shipped(["quickstart"], tmp_path / "file")


def _variants():
    recipes = {r.name: load_recipe(r.path) for r in shipped_recipes()}
    return [(recipe, recipes.get(recipe.variant_of)) for recipe in recipes.values() if recipe.variant_of]


@pytest.mark.parametrize(("variant", "base"), _variants(), ids=lambda item: getattr(item, "name", ""))
def test_a_variant_quotes_the_paper_as_its_base_recipe_does(variant, base):
    """A variant runs its base recipe's cells under another reading, so it compares them with the same printed
    numbers: every published value, std and target it shares with a same-named table of the base is the base's
    (a variant keeps its own copy, since a recipe cannot include another; this is where a copy that drifted shows)."""
    assert base is not None, f"{variant.name}: variant_of {variant.variant_of!r} is not a shipped recipe"
    assert base.paper == variant.paper and base.variant_of is None
    base_tables = {view.name: view for view in base.tables}
    shared = [view for view in variant.tables if view.name in base_tables]
    assert shared, f"{variant.name} shares no table with {base.name}"
    for view in shared:
        other = base_tables[view.name]
        assert set(view.reproduces) <= set(other.reproduces), view.name
        for key in ("published", "published_std", "target_by"):
            mine, theirs = getattr(view, key), getattr(other, key)
            assert set(mine) <= set(theirs), (view.name, key)
            for row, entry in mine.items():
                if isinstance(entry, dict):
                    assert entry == {column: theirs[row][column] for column in entry}, (view.name, key, row)
                else:
                    assert entry == theirs[row], (view.name, key, row)
