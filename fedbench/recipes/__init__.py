"""Recipes: TOML → validated Recipe → planned runs (RunSpec + labels)."""
