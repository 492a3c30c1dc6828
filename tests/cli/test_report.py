"""`fedbench report` (fedbench/cli/report.py) through the command line: partial cells are marked, synthetic runs are
labelled and kept apart from real ones, and an unwritable output place is a user error."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fedbench.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_partial_cells_are_marked(write_recipe, registry_url):
    recipe = write_recipe()
    assert (
        invoke(
            "run", recipe, "--seeds", "0", "--set", "rounds=1", "--only", "algorithm=fedavg", "--registry", registry_url
        ).exit_code
        == 0
    )
    # --set changed the specs, so the recipe's own runs are still missing
    out = invoke("report", "--recipe", recipe, "--registry", registry_url, "--format", "json")
    assert all(c["n"] == 0 for c in json.loads(out.stdout)["tables"][0]["cells"])
    assert (
        invoke("run", recipe, "--seeds", "0", "--only", "algorithm=fedavg", "--registry", registry_url).exit_code == 0
    )
    cells = json.loads(invoke("report", "--recipe", recipe, "--registry", registry_url, "--format", "json").stdout)
    fedavg = [c for c in cells["tables"][0]["cells"] if c["row"] == "fedavg"][0]
    assert fedavg["n"] == 1 and fedavg["expected"] == 2 and fedavg["partial"]
    md = invoke("report", "--recipe", recipe, "--registry", registry_url, "--format", "markdown").output
    assert "(n=1)*" in md and "partial" in md


def test_synthetic_runs_are_labelled_and_kept_apart(write_recipe, registry_url):
    recipe = write_recipe()
    assert invoke("run", recipe, "--scale", "smoke", "--synthetic", "--registry", registry_url).exit_code == 0
    runs = json.loads(invoke("runs", "--registry", registry_url, "--json").stdout)
    assert all(r["synthetic"] for r in runs)
    real = json.loads(
        invoke("report", "--recipe", recipe, "--scale", "smoke", "--registry", registry_url, "--format", "json").stdout
    )
    assert all(c["n"] == 0 for c in real["tables"][0]["cells"])
    synthetic = invoke(
        "report",
        "--recipe",
        recipe,
        "--scale",
        "smoke",
        "--synthetic",
        "--registry",
        registry_url,
        "--format",
        "markdown",
    )
    assert "SYNTHETIC" in synthetic.output and "(n=1)" in synthetic.output


def test_report_to_an_unwritable_place_is_a_user_error(tmp_path, registry_url):
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "quickstart.toml"
    blocker = tmp_path / "file"
    blocker.write_text("")
    for args in (["--plots", str(blocker / "plots")], ["--out", str(tmp_path), "--format", "markdown"]):
        result = runner.invoke(app, ["report", "--recipe", str(recipe), "--registry", registry_url, *args])
        assert result.exit_code == 2, result.output
        assert "cannot" in result.stderr or "is a folder" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_seeds_and_only_select_the_reported_cells_as_they_select_trained_runs(write_recipe, registry_url):
    """``report --seeds``/``--only`` mean what they mean for ``run``: the cells of the chosen labels, over the chosen
    seeds (a seed the registry has no run of counts as missing); a bad value is one line, exit 2."""
    recipe = write_recipe()
    assert invoke("run", recipe, "--seeds", "0", "--registry", registry_url).exit_code == 0

    def cells(*selection: str) -> dict[str, tuple[int, int]]:
        out = invoke("report", "--recipe", recipe, "--registry", registry_url, "--format", "json", *selection)
        assert out.exit_code == 0, out.output
        return {c["row"]: (c["n"], c["expected"]) for c in json.loads(out.stdout)["tables"][0]["cells"]}

    everything = cells()
    assert all(expected == 2 and n == 1 for n, expected in everything.values())  # the recipe has 2 seeds
    assert set(cells("--seeds", "0").values()) == {(1, 1)}  # only seed 0: complete
    assert set(cells("--seeds", "1").values()) == {(0, 1)}  # seed 1 was not trained
    fedavg_only = cells("--only", "algorithm=fedavg")
    assert list(fedavg_only) == ["fedavg"] and len(everything) > 1
    for bad in (["--seeds", "x"], ["--only", "algorithm=nothing-by-that-name"]):
        result = invoke("report", "--recipe", recipe, "--registry", registry_url, *bad)
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


def test_seeds_and_only_select_the_plotted_runs_too(write_recipe, registry_url, tmp_path):
    """The figures of ``--plots`` and the HTML page draw the runs the tables show: a line per selected method over
    the selected seeds, nothing for a seed never trained."""
    from fedbench.recipes.load import load_recipe
    from fedbench.registry import Registry
    from fedbench.report.plots import curve_series

    recipe = write_recipe()
    assert invoke("run", recipe, "--seeds", "0", "--registry", registry_url).exit_code == 0
    loaded, store = load_recipe(Path(recipe)), Registry(registry_url)
    view = loaded.tables[0]
    drawn = curve_series(loaded, view, store, only={"algorithm": "fedavg"})
    assert [list(lines) for lines in drawn.values()] == [["fedavg"]]
    assert [len(seeds) for lines in drawn.values() for seeds in lines.values()] == [1]
    assert curve_series(loaded, view, store, seeds=[1]) == {}  # seed 1 was never trained
    everything = curve_series(loaded, view, store)
    assert {line for lines in everything.values() for line in lines} > {"fedavg"}

    selection = ["--seeds", "0", "--only", "algorithm=fedavg"]
    out = tmp_path / "page" / "index.html"
    result = invoke(
        "report",
        "--recipe",
        recipe,
        "--registry",
        registry_url,
        *selection,
        "--plots",
        str(tmp_path / "plots"),
        "--format",
        "html",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "plots").glob("*.png"))
    pages = list(out.parent.glob("*.html"))
    assert pages and all("fedprox" not in page.read_text() and "fedavg" in page.read_text() for page in pages)
