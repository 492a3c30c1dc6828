"""The spec hash of every cell of every shipped recipe, at every scale (and at the smoke scale on synthetic data),
is pinned in ``fixtures/spec_hashes.json``. A hash is a run's identity in every user's registry: a change that
moves one orphans those runs (``run`` trains them again, ``report`` stops finding them). When a change is meant
(a recipe's setting, or a default that changes results), regenerate the file and say so in the commit:

    python tests/papers/test_spec_hashes.py --write

A change that is not meant to move hashes (a new parameter: mark it ``HashNeutral``) must leave this test green.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINS = Path(__file__).resolve().parents[1] / "fixtures" / "spec_hashes.json"


def current_hashes() -> dict[str, dict[str, dict[str, str]]]:
    from fedbench.recipes.expand import expand
    from fedbench.recipes.load import load_recipe

    pins: dict[str, dict[str, dict[str, str]]] = {}
    for path in sorted((ROOT / "recipes").glob("*.toml")):
        recipe = load_recipe(path)
        variants = [(scale, False) for scale in recipe.scale_names()]
        if "smoke" in recipe.scale_names():
            variants.append(("smoke", True))
        for scale, synthetic in variants:
            cells = {}
            for run in expand(recipe, scale=scale, synthetic=synthetic):
                key = ", ".join(f"{k}={v}" for k, v in run.labels.items()) + f" | seed={run.spec.seed}"
                cells[key] = run.spec_hash
            if cells:
                pins.setdefault(path.name, {})[scale + (" synthetic" if synthetic else "")] = cells
    return pins


def test_every_shipped_recipe_cell_keeps_its_spec_hash():
    pinned = json.loads(PINS.read_text())
    current = current_hashes()
    changed = [
        f"{recipe} [{variant}] {cell}: {pinned.get(recipe, {}).get(variant, {}).get(cell)} -> {value}"
        for recipe, variants in current.items()
        for variant, cells in variants.items()
        for cell, value in cells.items()
        if pinned.get(recipe, {}).get(variant, {}).get(cell) != value
    ]
    removed = [
        f"{recipe} [{variant}] {cell}"
        for recipe, variants in pinned.items()
        for variant, cells in variants.items()
        for cell in cells
        if cell not in current.get(recipe, {}).get(variant, {})
    ]
    assert not changed and not removed, (
        f"{len(changed)} spec hashes changed and {len(removed)} cells disappeared, e.g. "
        f"{(changed + removed)[:5]}; if meant, run `python tests/papers/test_spec_hashes.py --write` (see its docstring)"
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/papers/test_spec_hashes.py --write")
    sys.path.insert(0, str(ROOT))
    PINS.write_text(json.dumps(current_hashes(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}")
