"""``fedbench recipes list|copy`` (fedbench/cli/recipes.py) and recipe names on ``run``: the listing, the copy,
and a bad name or a changed file as one line, exit 2."""

from __future__ import annotations

import json

from cli_fixtures import assert_user_error, runner
from fedbench.cli import app
from fedbench.recipes.shipped import shipped_names


def test_list_names_every_shipped_recipe():
    result = runner.invoke(app, ["recipes", "list", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [entry["name"] for entry in listed] == shipped_names()
    assert {"name": "quickstart", "paper": "quickstart"}.items() <= listed[shipped_names().index("quickstart")].items()
    table = runner.invoke(app, ["recipes", "list"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "fedtrip_table4" in table.stdout


def test_copy_prints_what_it_wrote_and_a_changed_file_is_one_line(tmp_path):
    result = runner.invoke(app, ["recipes", "copy", "quickstart", "--to", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == [str(tmp_path / "quickstart.toml")]
    (tmp_path / "quickstart.toml").write_text("# changed\n")
    assert_user_error(runner.invoke(app, ["recipes", "copy", "quickstart", "--to", str(tmp_path)]), "--force")
    assert_user_error(runner.invoke(app, ["recipes", "copy", "nope", "--to", str(tmp_path)]), "nope:")


def test_run_takes_a_shipped_recipes_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no recipes/ here
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    result = runner.invoke(app, ["run", "quickstart", "--scale", "smoke", "--dry-run", "--registry", registry])
    assert result.exit_code == 0, result.output
    assert "algorithm=fedprox" in result.stdout
    assert_user_error(runner.invoke(app, ["run", "quikstart", "--registry", registry]), "did you mean quickstart?")
    assert not (tmp_path / "r.db").exists()
