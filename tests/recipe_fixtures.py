"""Helpers for the recipe tests: a small grid recipe and the one-line error a variant of it gives."""

from __future__ import annotations

import pytest

from fedbench.errors import RecipeError
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe

# A recipe of two axes, written out so that each test edits one line of it.
GRID = """
paper = "p"
name = "grid"
seeds = [0, 1]

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "iid"
num_clients = 4
clients_per_round = 2
rounds = 3
optimizer = { lr = 0.1 }

[matrix]
algorithm = ["fedavg", "fedprox"]
local_epochs = [1, 2]

[scale.smoke]
rounds = 1
seeds = [5]

[[tables]]
name = "t"
rows = ["algorithm"]
columns = ["local_epochs"]
"""


def error(write_recipe, text: str, exc: type[Exception] = RecipeError) -> str:
    """The one-line error ``text`` gives when compiled, its path replaced by FILE."""
    path = write_recipe(text)
    with pytest.raises(exc) as info:
        expand(load_recipe(path))
    message = str(info.value)
    assert "\n" not in message  # one line
    return message.replace(str(path), "FILE")


def with_view(extra: str) -> str:
    """GRID with ``extra`` lines added to its view."""
    return GRID.replace('columns = ["local_epochs"]', 'columns = ["local_epochs"]\n' + extra, 1)
