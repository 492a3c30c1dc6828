"""Rules of the recipe compiler (fedbench/recipe.py) checked by hand: grids, views, scales, overrides and the
one-line errors that name the file, key or value (issue 19)."""

from __future__ import annotations
