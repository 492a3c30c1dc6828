"""A view's `reproduces`: the paper's tables and figure panels it declares. Optional, checked when the recipe is
loaded, shown in JSON reports, and part of no run's spec (the spec hashes of the cells stay what they were)."""

from __future__ import annotations

import pytest

from fedbench.errors import RecipeError
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.views import TableView

RECIPE = """
paper = "p"
name = "r"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
num_clients = 4
clients_per_round = 2
rounds = 2

[matrix]
algorithm = ["fedavg", "fedprox"]

[[tables]]
name = "t"
title = "Table 2 (Fig. 6 convention)"
rows = ["algorithm"]
"""


def test_a_view_declares_nothing_unless_told():
    assert TableView(name="v").reproduces == []


def test_declarations_load_in_order_and_move_no_spec_hash(write_recipe):
    plain = load_recipe(write_recipe(RECIPE, "plain.toml"))
    declared = load_recipe(
        write_recipe(RECIPE + 'reproduces = ["Table 2", "Fig. 3(b)", "Fig. 4 (training loss)"]\n', "declared.toml")
    )
    assert plain.table("t").reproduces == []
    assert declared.table("t").reproduces == ["Table 2", "Fig. 3(b)", "Fig. 4 (training loss)"]
    assert [run.spec_hash for run in expand(declared)] == [run.spec_hash for run in expand(plain)]


@pytest.mark.parametrize(
    "value, message",
    [
        ('["Table 2", "Table 2"]', "reproduces: 'Table 2' is declared twice"),
        ('[""]', "reproduces: '' is not a table or figure label"),
        ('[" Fig. 3"]', "reproduces: ' Fig. 3' is not a table or figure label"),
    ],
)
def test_a_repeated_or_blank_item_is_a_one_line_error(write_recipe, value, message):
    path = write_recipe(RECIPE + f"reproduces = {value}\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == f"{path}: tables 't': {message}"


def test_an_item_must_be_a_string(write_recipe):
    path = write_recipe(RECIPE + "reproduces = [2]\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value).startswith(f"{path}: tables.0.reproduces.0: ")
