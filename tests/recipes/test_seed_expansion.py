"""Expansion resolves and hashes a cell once for all its seeds (``RunSpec.with_seeds``): for every shipped recipe at
every scale (and at the smoke scale on synthetic data), with its seeds widened, that gives exactly the specs and
spec hashes of resolving, checking and hashing each seed on its own (``_each_seed``, the plain path). tests/papers/test_spec_hashes.py pins the shared path's hashes at the recipes'
own seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.recipes import expand as expansion
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.toml"))
# more seeds than any recipe names, out of order, with a gap and a large one
WIDENED = [4, 0, 1, 2, 3, 9, 2**40]


def _variants(path: Path) -> list[tuple[str, bool]]:
    recipe = load_recipe(path)
    variants = [(scale, False) for scale in recipe.scale_names()]
    if "smoke" in recipe.scale_names():
        variants.append(("smoke", True))
    return variants


@pytest.mark.slow  # every recipe twice, the plain path at 0.3 ms a spec: 15 s in all
@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_the_shared_resolution_gives_each_seed_the_spec_and_hash_of_the_plain_path(path, monkeypatch):
    recipe = load_recipe(path)
    for scale, synthetic in _variants(path):
        fast = expand(recipe, scale=scale, synthetic=synthetic, seeds=WIDENED)
        with monkeypatch.context() as patch:
            patch.setattr(expansion, "_seed_specs", expansion._each_seed)
            plain = expand(recipe, scale=scale, synthetic=synthetic, seeds=WIDENED)
        where = f"{path.name} at {scale}{' synthetic' if synthetic else ''}"
        assert len(fast) == len(plain), where
        for a, b in zip(fast, plain):
            assert a.labels == b.labels and a.spec.seed == b.spec.seed, where
            assert a.spec == b.spec, f"{where} {b.labels} seed {b.spec.seed}"
            assert a.spec.model_fields_set == b.spec.model_fields_set, where
            assert a.spec.model_dump(mode="json") == b.spec.model_dump(mode="json"), where
            assert a.spec_hash == b.spec_hash == b.spec.spec_hash == a.spec.spec_hash, f"{where} {b.labels}"


def test_the_recipe_seeds_and_a_seed_filter_take_the_shared_path_with_the_same_result(monkeypatch):
    """The recipe's own seeds (not a caller's) and ``--only seed=…`` compile the same both ways."""
    recipe = load_recipe(ROOT / "recipes" / "quickstart.toml")
    recipe = recipe.model_copy(update={"seeds": list(range(40))})
    only = {"seed": {"3", "17", "39"}}
    fast = expand(recipe), expand(recipe, only=only)
    monkeypatch.setattr(expansion, "_seed_specs", expansion._each_seed)
    plain = expand(recipe), expand(recipe, only=only)
    for a, b in zip(fast, plain):
        assert [(p.spec, p.spec_hash, p.labels) for p in a] == [(p.spec, p.spec_hash, p.labels) for p in b]
    assert sorted({p.spec.seed for p in fast[1]}) == [3, 17, 39]


def test_seeds_that_are_not_plain_ints_are_validated_one_by_one(monkeypatch):
    """A caller's bool seed is not written into the canonical JSON as given: it takes the plain path, whose
    validation decides."""
    recipe = load_recipe(ROOT / "recipes" / "quickstart.toml")
    shared = []
    monkeypatch.setattr(expansion.RunSpec, "with_seeds", lambda self, seeds: shared.append(seeds))
    runs = expand(recipe, seeds=[True])
    assert not shared and {type(p.spec.seed) for p in runs} == {int}
    assert all(p.spec_hash == p.spec.spec_hash for p in runs)
