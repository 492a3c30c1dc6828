"""The report's two answers through the command line, on registries written with known curves: two seeds whose
paired differences are all equal get no ▲/▼ in ``report`` or ``compare`` and the report says its seed count cannot
reach significance; a published value that 3 seeds cannot pin down within the margin is "inconclusive" with a seed
count, and 10 seeds within the margin reproduce it; the JSON carries the test, its statistic and its assignments."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import TINY_RECIPE
from fedbench.cli import app
from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry


def store(write_recipe, url: str, best: dict[str, list[float]], published: float = 50.0, name: str = "tiny.toml"):
    """The tiny recipe with one seed per entry of ``best``'s lists and FedAvg's published value, every run finished
    with a three-round curve whose best accuracy (%) is that seed's entry."""
    seeds = list(range(len(best["fedavg"])))
    text = TINY_RECIPE.replace("seeds = [0, 1]", f"seeds = {seeds}").replace("fedavg = 50.0", f"fedavg = {published}")
    path = write_recipe(text, name)
    registry = Registry(url)
    planned = expand(load_recipe(path))
    registry.ensure_runs([p.registry_entry() for p in planned])
    for p in planned:
        top = best[p.labels["algorithm"]][p.spec.seed] / 100
        run_id = registry.claim(p.spec_hash)
        for i, acc in enumerate([top - 0.1, top, top - 0.05]):
            registry.log_round(run_id, RoundRecord(i + 1, 0.1, 1.0, 100, 100, test_acc=acc))
        registry.finish(run_id, "done")
    return path


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def cells(document: dict) -> dict[str, dict]:
    return {c["row"]: c for table in document["tables"] for c in table["cells"]}


def test_two_seeds_with_equal_differences_are_not_marked_and_the_report_says_why(write_recipe, registry_url):
    # FedProx one point above FedAvg in both seeds: the smallest p two pairs allow, 0.5
    path = store(write_recipe, registry_url, {"fedavg": [80.0, 84.0], "fedprox": [81.0, 85.0]})
    document = json.loads(invoke("report", "--recipe", str(path), "--registry", registry_url, "--format", "json"))
    baseline = cells(document)["fedprox"]["baseline"]
    assert (baseline["p_value"], baseline["outcome"], baseline["mark"]) == (0.5, "same", "·")
    assert (baseline["test"], baseline["assignments"]) == (
        "exact sign-flip permutation test of the mean paired difference",
        4,
    )
    assert abs(baseline["statistic"] - 1.0) < 1e-9 and abs(baseline["difference"] - 1.0) < 1e-9
    markdown = invoke("report", "--recipe", str(path), "--registry", registry_url, "--format", "markdown")
    assert "▲" not in markdown.replace("▲/▼", "") and "▼" not in markdown.replace("▲/▼", "")
    assert "2 seeds: the smallest possible p is 0.5; no cell can be marked (6 seeds could)." in markdown
    assert "  - 2 seeds: p ≥ 0.5, no cell can be marked" in markdown


def test_compare_gives_no_answer_where_the_seed_counts_cannot_reach_significance(write_recipe, tmp_path):
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    path = store(write_recipe, a, {"fedavg": [80.0, 84.0], "fedprox": [81.0, 85.0]})
    store(write_recipe, b, {"fedavg": [82.0, 86.0], "fedprox": [83.0, 87.0]}, name="same.toml")
    document = json.loads(invoke("compare", a, b, "--recipe", str(path), "--format", "json"))
    pairs = document["tables"][0]["cells"]
    assert [(c["within_noise"], c["too_few_seeds"], c["p_value"]) for c in pairs] == [(None, True, None)] * 2
    assert document["summary"].endswith("2 cells with too few seeds for any test to tell")
    markdown = invoke("compare", a, b, "--recipe", str(path), "--format", "markdown")
    assert "NO (" not in markdown and "the smallest possible p is 0.33" in markdown


def test_three_seeds_are_inconclusive_and_ten_within_the_margin_reproduce(write_recipe, tmp_path):
    loose = f"sqlite:///{tmp_path / 'three.db'}"
    path = store(write_recipe, loose, {"fedavg": [94.3, 95.2, 96.1], "fedprox": [94.0, 95.0, 96.0]}, published=97.0)
    verdict = cells(json.loads(invoke("report", "--recipe", str(path), "--registry", loose, "--format", "json")))[
        "fedavg"
    ]["verdict"]
    assert verdict["status"] == "inconclusive" and verdict["seeds_needed"] == 8 and verdict["margin"] == 1.0
    text = invoke("report", "--recipe", str(path), "--registry", loose, "--format", "markdown")
    assert "? (≈8 seeds)" in text
    assert "testpaper: 0 reproduced, 0 higher, 0 lower, 1 inconclusive, 0 not comparable of 1 cells" in text

    careful = f"sqlite:///{tmp_path / 'ten.db'}"
    ten = [72.3, 71.6, 72.0, 72.5, 71.8, 72.2, 71.9, 72.4, 71.7, 72.1]
    path = store(write_recipe, careful, {"fedavg": ten, "fedprox": ten}, published=72.4, name="ten.toml")
    verdict = cells(json.loads(invoke("report", "--recipe", str(path), "--registry", careful, "--format", "json")))[
        "fedavg"
    ]["verdict"]
    assert verdict["status"] == "reproduced" and verdict["mark"] == "✓"
    assert -1.0 < verdict["ci90_low"] < verdict["ci90_high"] < 1.0
