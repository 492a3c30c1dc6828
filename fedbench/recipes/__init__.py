"""Recipes: TOML → validated Recipe → planned runs (RunSpec + labels).

``schema`` (the recipe's models) and ``views`` (its tables and figures) → ``validate`` (the rules across keys) →
``load`` (``load_recipe``) → ``expand`` (``PlannedRun``s); ``assignments`` parses ``KEY=VALUE`` options and
``resolve`` fills plug-in defaults into a spec.
"""
