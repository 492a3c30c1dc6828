"""Shell completion (fedbench/cli/completion.py): what the shell is offered after each kind of option, through
the same protocol a shell uses (``_FEDBENCH_COMPLETE`` with the words typed so far)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.cli.completion import recipe_files

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def offered(line: str) -> list[str]:
    """What bash is offered for the last word of ``line`` (a trailing space: a new, empty word)."""
    words = line.split(" ")
    env = {"_FEDBENCH_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    result = runner.invoke(app, [], prog_name="fedbench", env=env)
    assert result.exit_code == 0, result.output
    return result.output.split()


@pytest.fixture(autouse=True)
def in_the_repository(monkeypatch):
    monkeypatch.chdir(ROOT)  # recipes/ is where the completion of recipe paths looks


def test_recipe_files_and_folders():
    assert offered("fedbench run recipes/quicks") == ["recipes/quickstart.toml"]
    assert "recipes/" in offered("fedbench run rec")
    assert offered("fedbench report --recipe recipes/fedtrip_table") == [
        "recipes/fedtrip_table4.toml",
        "recipes/fedtrip_table4_feddyn_first_h.toml",
        "recipes/fedtrip_table4_plato_batches.toml",
        "recipes/fedtrip_table4_shared_keys.toml",
        "recipes/fedtrip_table6.toml",
        "recipes/fedtrip_table7.toml",
    ]


def test_table_names_of_the_recipe_on_the_line():
    assert offered("fedbench report --recipe recipes/quickstart.toml --table ") == ["accuracy", "final", "speed"]
    assert offered("fedbench report --table ") == []  # no recipe yet: nothing to offer


def test_assignments_offer_axes_then_their_values_and_registered_names():
    keys = offered("fedbench run recipes/quickstart.toml --only alg")
    assert keys == ["algorithm=", "algorithm_params="]  # the axis, and the setup keys it starts
    values = offered("fedbench run recipes/quickstart.toml --only algorithm=fedp")
    assert values == ["algorithm=fedper", "algorithm=fedproto", "algorithm=fedprox"]
    assert "algorithm=scaffold" in offered("fedbench run recipes/quickstart.toml --add algorithm=s")
    assert "optimizer=" in offered("fedbench run recipes/quickstart.toml --set opt")


def test_registered_names():
    assert offered("fedbench models resnet18_f") == ["resnet18_femnist"]
    assert offered("fedbench datasets check digi") == ["digits", "digits5"]
    assert offered("fedbench check-method fedpr") == ["fedproto", "fedprox"]
    assert offered("fedbench check-method fedprox --dataset digi") == ["digits", "digits5"]
    assert offered("fedbench check-method fedprox --model digits_m") == ["digits_mlp"]


def test_a_broken_recipe_completes_nothing_and_raises_nothing(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("this is [not toml")
    assert offered(f"fedbench report --recipe {broken} --table ") == []


def test_recipe_files_under_a_folder_typed_with_its_slash(tmp_path):
    (tmp_path / "a.toml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "sub").mkdir()
    assert recipe_files(f"{tmp_path}{os.sep}") == [str(tmp_path / "a.toml"), f"{tmp_path / 'sub'}/"]
