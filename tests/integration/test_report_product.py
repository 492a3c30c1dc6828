"""The report as the product, on real tiny runs (digits, 3 seeds, 3 methods): the baseline statistics and paper
verdicts in the JSON against independent computations on the JSON's own per-seed values (every sign assignment
enumerated, scipy's t intervals), ``fedbench compare`` on two registries made
here, the overlaid plots through matplotlib's objects, and the HTML page (in headless Chromium when installed)."""

from __future__ import annotations

import base64
import itertools
import json
import re
import sqlite3
import textwrap
from pathlib import Path

import pytest
from scipy import stats as scipy_stats
from typer.testing import CliRunner

from browser_fixtures import CHROMIUM, probe_in_chromium
from fedbench.cli import app
from fedbench.execution.local import execute
from fedbench.execution.options import ExecutionOptions
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry
from fedbench.report.plots import figures
from fedbench.report.stats import holm

runner = CliRunner()
pytestmark = pytest.mark.slow  # the module's registry trains 9 tiny runs (about 4 s)

RECIPE = """
paper = "product"
name = "product"
title = "Report product test recipe"
seeds = [0, 1, 2]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 16 }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 2
rounds = 4
batch_size = 64
optimizer = { lr = 0.1 }
targets = [40]

[matrix]
algorithm = ["fedavg", "fedprox", "slow"]

[overrides.algorithm.fedprox]
algorithm = "fedprox"
algorithm_params = { mu = 0.01 }

[overrides.algorithm.slow]
algorithm = "fedavg"
optimizer = { lr = 0.001 }

[[tables]]
name = "acc"
title = "Best accuracy"
rows = ["algorithm"]
columns = []
figure = "best"

[tables.published]
fedavg = 50.0
fedprox = 99.0

[[tables]]
name = "speed"
title = "Rounds to 40%"
rows = ["algorithm"]
columns = []
figure = "rounds_to_target"
target = 40

[scale.smoke]
rounds = 2
seeds = [0]
"""


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    """(recipe path, registry A url, registry B url): A holds the recipe's 9 runs; B is A with every fedprox
    accuracy raised by 0.3 (a different result, as another machine or version might give)."""
    folder = tmp_path_factory.mktemp("product")
    path = folder / "product.toml"
    path.write_text(textwrap.dedent(RECIPE))
    url_a = f"sqlite:///{folder / 'a.db'}"
    planned = expand(load_recipe(path))
    Registry(url_a).ensure_runs([p.registry_entry() for p in planned])
    execute(planned, ExecutionOptions(registry_url=url_a, device="cpu"), 1, lambda event: None)
    assert {r.status for r in Registry(url_a).runs()} == {"done"}
    with sqlite3.connect(folder / "a.db") as source, sqlite3.connect(folder / "b.db") as db:
        source.backup(db)  # the registry runs in WAL mode: a file copy could miss the log
        db.execute(
            "UPDATE rounds SET test_acc = test_acc + 0.3 WHERE run_id IN "
            "(SELECT id FROM runs WHERE algorithm = 'fedprox')"
        )
    return path, url_a, f"sqlite:///{folder / 'b.db'}"


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def report_json(path: Path, url: str) -> dict:
    return json.loads(invoke("report", "--recipe", path, "--registry", url, "--format", "json").stdout)


def enumerated_sign_flip_p(differences: list[float]) -> float:
    """The share of the 2^n sign assignments whose mean difference is as far from 0 as the observed one."""
    observed = abs(sum(differences))
    sums = [abs(sum(s * d for s, d in zip(signs, differences))) for signs in itertools.product((1, -1), repeat=3)]
    return sum(total >= observed - 1e-9 for total in sums) / len(sums)


def test_json_baseline_statistics_are_the_exact_tests_on_the_per_seed_values(registries):
    path, url, _ = registries
    document = report_json(path, url)
    table = document["tables"][0]
    assert table["baseline"] == "fedavg" and table["baseline_axis"] == "algorithm"  # the default: the FedAvg row
    cells = {c["row"]: c for c in table["cells"]}
    base = dict(zip(cells["fedavg"]["seeds"], cells["fedavg"]["values"]))
    assert cells["fedavg"]["baseline"] is None
    raw = {}
    for row in ("fedprox", "slow"):
        mine = dict(zip(cells[row]["seeds"], cells[row]["values"]))
        seeds = sorted(mine)
        differences = [mine[s] - base[s] for s in seeds]
        ci = scipy_stats.ttest_rel([mine[s] for s in seeds], [base[s] for s in seeds]).confidence_interval(0.95)
        got = cells[row]["baseline"]
        assert got["pairs"] == 3 and got["seeds"] == [0, 1, 2] and got["assignments"] == 8
        assert got["p_value"] == pytest.approx(enumerated_sign_flip_p(differences), rel=1e-12)
        assert got["p_value"] >= 0.25  # three pairs: never below 2/8
        assert (got["ci_low"], got["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
        raw[row] = got["p_value"]
    adjusted = dict(zip(raw, holm(list(raw.values()))))
    for row, p in adjusted.items():
        got = cells[row]["baseline"]
        assert got["p_holm"] == pytest.approx(p, rel=1e-9)
        assert got["mark"] == "·"  # no cell of three seeds can be marked
    assert "3 seeds: the smallest possible p is 0.25; no cell can be marked (7 seeds could)." in table["notes"]


def test_json_verdicts_follow_the_equivalence_margin_and_the_paper_summary(registries):
    path, url, _ = registries
    document = report_json(path, url)
    cells = {c["row"]: c for c in document["tables"][0]["cells"]}
    statuses = {}
    for row, published in (("fedavg", 50.0), ("fedprox", 99.0)):
        values = cells[row]["values"]
        d = sum(values) / 3 - published
        half90, half95 = (float(scipy_stats.t.ppf(q, 2) * scipy_stats.tstd(values) / 3**0.5) for q in (0.95, 0.975))
        expected = (
            "reproduced"
            if -1 < d - half90 and d + half90 < 1
            else "higher"
            if d - half95 > 1
            else "lower"
            if d + half95 < -1
            else "inconclusive"
        )
        verdict = cells[row]["verdict"]
        assert verdict["status"] == expected and verdict["margin"] == 1.0
        assert verdict["ci_low"] == pytest.approx(d - half95, rel=1e-9, abs=1e-9)
        assert verdict["ci90_high"] == pytest.approx(d + half90, rel=1e-9, abs=1e-9)
        statuses[row] = expected
    assert statuses["fedprox"] == "lower"  # 99 % on digits after 4 rounds of a 16-unit MLP: far above ours
    assert cells["slow"]["verdict"] is None  # no published value
    (paper,) = document["papers"]
    counts = {status: sum(s == status for s in statuses.values()) for status in ("reproduced", "higher", "lower")}
    inconclusive = sum(s == "inconclusive" for s in statuses.values())
    assert paper["cells"] == 2 and paper["reproduced"] == counts["reproduced"]
    assert paper["line"] == (
        f"product: {counts['reproduced']} reproduced, {counts['higher']} higher, {counts['lower']} lower, "
        f"{inconclusive} inconclusive, 0 not comparable of 2 cells with a published number"
    )
    markdown = invoke("report", "--recipe", path, "--registry", url, "--format", "markdown").stdout
    assert markdown.startswith("### Summary") and markdown.index(paper["line"]) < markdown.index("\n| ")  # first
    assert "↓" in markdown and "▲/▼ better/worse than fedavg" in markdown
    latex = invoke("report", "--recipe", path, "--registry", url, "--format", "latex").stdout
    assert r"$\downarrow$" in latex and "▼" not in latex


def test_synthetic_or_smoke_tables_never_show_a_verdict(registries):
    path, url, _ = registries
    for args, why in ((["--synthetic"], "synthetic"), (["--scale", "smoke"], "scale")):
        document = json.loads(invoke("report", "--recipe", path, "--registry", url, "--format", "json", *args).stdout)
        verdicts = [c["verdict"] for t in document["tables"] for c in t["cells"] if c["verdict"] is not None]
        assert verdicts and all(v["status"] == "not_comparable" and why in v["reason"] for v in verdicts)
        assert "no verdict" in document["papers"][0]["line"]
        markdown = invoke("report", "--recipe", path, "--registry", url, "--format", "markdown", *args).stdout
        assert "✓" not in markdown and "↑" not in markdown and "↓" not in markdown


def test_compare_two_registries(registries):
    path, url_a, url_b = registries
    document = json.loads(
        invoke("compare", url_a, url_b, "--recipe", path, "--table", "acc", "--format", "json").stdout
    )
    (table,) = document["tables"]
    cells = {c["row"]: c for c in table["cells"]}
    for row in ("fedavg", "slow"):  # untouched in B: the same runs
        assert cells[row]["within_noise"] is True and cells[row]["difference"] == 0
        assert cells[row]["reason"] == "identical per-seed values"
    prox = cells["fedprox"]
    a, b = prox["a"]["values"], prox["b"]["values"]
    assert [y - x for x, y in zip(a, b)] == pytest.approx([30.0] * 3, abs=1e-9)  # best accuracy moved by 0.3
    assert prox["difference"] == pytest.approx(sum(b) / 3 - sum(a) / 3, rel=1e-9)
    # 3 + 3 seeds: no split of six values can give p < 0.05 (the smallest is 2/20), so no answer either way
    assert (prox["p_value"], prox["within_noise"], prox["too_few_seeds"]) == (None, None, True)
    assert document["summary"] == (
        "2 cells compared, 0 outside seed noise (exact two-sample permutation test, p < 0.05); "
        "1 cell with too few seeds for any test to tell"
    )
    markdown = invoke("compare", url_a, url_b, "--recipe", path, "--table", "acc", "--format", "markdown").stdout
    assert "| fedavg |" in markdown and "| +0 | yes (identical per-seed values) |" in markdown
    assert invoke("compare", url_a, url_b, "--recipe", path).stdout.count("fedprox") == 2  # rich: both tables


def test_runs_of_repeated_hashes_across_chunks(registries):
    """A run shown in several tables is asked for once per table: the registry answers each run once (the HTML
    drill-down of a paper asks for thousands, in chunks of 500)."""
    _, url, _ = registries
    registry = Registry(url)
    hashes = [r.spec_hash for r in registry.runs()]
    assert len(registry.runs(spec_hashes=hashes * 120)) == len(hashes) == 9


def test_compare_of_a_missing_registry_is_a_user_error(registries, tmp_path):
    path, url_a, _ = registries
    result = runner.invoke(app, ["compare", url_a, str(tmp_path / "nope.db"), "--recipe", str(path)])
    assert result.exit_code == 2 and "REGISTRY_B" in result.output


def test_plots_overlay_the_methods_with_bands_integer_rounds_and_the_target(registries):
    path, url, _ = registries
    recipe = load_recipe(path)
    registry = Registry(url)
    for view in recipe.tables:
        (stem_figure,) = figures(recipe, view, registry)  # one figure: the table has no columns
        stem, figure = stem_figure
        (ax,) = figure.axes
        labels = [line.get_label() for line in ax.get_lines()]
        methods = ["fedavg (n=3)", "fedprox (n=3)", "slow (n=3)"]
        assert labels[:3] == methods
        assert len(ax.collections) == 3  # a seed band per method
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
        lows, highs = ax.collections[0].get_paths()[0].vertices[:, 1].min(), max(ax.get_lines()[0].get_ydata())
        assert lows <= highs
        if view.figure == "rounds_to_target":
            target = ax.get_lines()[3]
            assert target.get_label() == "target 40" and list(target.get_ydata()) == [40, 40]
        else:  # the methods' lines, then the paper's values on them (diamonds), no target line
            assert [line.get_label() for line in ax.get_lines() if line.get_marker() != "D"] == methods


def test_seed_band_spans_the_seeds_min_to_max(registries):
    """The band of a method is the min–max of its seeds' curves at each round (the legend says so)."""
    path, url, _ = registries
    recipe = load_recipe(path)
    registry = Registry(url)
    runs = {r.labels["algorithm"]: [] for r in registry.runs()}
    for r in registry.runs():
        runs[r.labels["algorithm"]].append(r.id)
    curves = registry.curves([i for ids in runs.values() for i in ids])
    ((_, figure),) = figures(recipe, recipe.tables[0], registry)
    ax = figure.axes[0]
    band = ax.collections[0].get_paths()[0].vertices
    per_round = {}
    for run_id in runs["fedavg"]:
        for row in curves[run_id]:
            per_round.setdefault(row.round, []).append(row.test_acc * 100)
    for x, y in band:
        if x in per_round:
            assert min(per_round[x]) - 1e-9 <= y <= max(per_round[x]) + 1e-9
    assert ax.get_legend().get_title().get_text() == "mean; band: min–max over seeds"


def html_report(registries, tmp_path) -> Path:
    path, url, _ = registries
    out = tmp_path / "site" / "index.html"
    invoke("report", "--recipe", path, "--registry", url, "--format", "html", "--out", out)
    return out


def test_html_page_is_self_contained_with_summary_marks_plots_and_runs(registries, tmp_path):
    page = html_report(registries, tmp_path).read_text()
    summary = page.split('id="table-0"')[0]  # the summary comes first
    assert re.search(
        r"product: \d reproduced, \d higher, \d lower, \d inconclusive, 0 not comparable of 2 cells", summary
    )
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", page)  # nothing loaded from elsewhere (# : this page)
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 2  # one overlay per table
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert page.count("<details><summary>product / ") == 0
    assert page.count("· seed ") == 18  # 9 runs in each of the two tables
    # both tables draw test accuracy: each run's spec, provenance and curve once, the second table links to them
    assert page.count("spec</p><pre>") == 9 and page.count(": shown above</p>") == 9
    assert page.count("<p>stored summary, test accuracy (%): best ") == 9  # as `fedbench show` prints it
    assert all(f'id="run-{i}"' in page for i in re.findall(r'href="#run-(\d+)"', page))
    assert "p<sub>Holm</sub>" in page and "ours − paper" in page and "90% [" in page and '"provenance"' not in page
    assert "<svg" in page and "spec</p><pre>" in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium): no browser test")
def test_html_page_renders_in_headless_chromium(registries, tmp_path):
    probe, dom = probe_in_chromium(html_report(registries, tmp_path), tmp_path)
    assert probe["images"] == 2 and probe["decoded"] == 2
    assert probe["scrollWidth"] <= probe["innerWidth"], "the page overflows horizontally"
    assert "cells with a published number" in dom and "Best accuracy" in dom and "Rounds to 40%" in dom
