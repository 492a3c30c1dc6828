"""LG-Mix's tables beyond accuracy: the binary metrics of Tables 7 and 10, a "metric" pseudo-axis, the run-level
figures of Tables 8-9 (wall-clock hours, peak memory from the provenance), the derived-value mark, and the Retinal
task of Tables 3-4 on files in the DoFE package's layout (six clients from four sites, 0.6 / 0.2 / 0.2 per client)."""

from __future__ import annotations

import csv
import io
import json
import mmap
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import data_fixtures as fx
from fedbench import curves
from fedbench.cli import app
from fedbench.data import load_dataset
from fedbench.data.federated import prepare_data
from fedbench.data.partition import make_partition
from fedbench.data.synthetic import synthetic_dataset
from fedbench.engine import scores
from fedbench.engine.personal import extra_metrics
from fedbench.errors import ConfigError, RecipeError
from fedbench.execution.provenance import PeakMemory
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import non_default
from fedbench.registry import Registry
from fedbench.report.collect import EmptyRegistry
from fedbench.report.render import render
from fedbench.report.table import build_table
from fedbench.spec import RunSpec
from fedbench.vocab.provenance import peak_memory

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


# ------------------------------------------------------------------------------------ recipes and CLI
@pytest.mark.parametrize("name", sorted(p.name for p in RECIPES.glob("lgmix_*.toml")))
def test_every_lgmix_recipe_compiles_at_every_scale(name):
    recipe = load_recipe(RECIPES / name)
    for scale in recipe.scale_names():
        runs = expand(recipe, scale=scale)
        assert runs and all(r.spec.eval_mode != "global" for r in runs)


def test_table1_recipe_matches_the_paper_setting():
    recipe = load_recipe(RECIPES / "lgmix_table1.toml")
    runs = expand(recipe)
    assert len(runs) == 11 * 2 * 3
    by = {(r.labels["algorithm"], r.labels["dataset"]): r.spec for r in runs if r.spec.seed == 0}
    digits, office = by[("lgmix", "Digits5")], by[("lgmix", "Office-Caltech10")]
    assert (digits.batch_size, digits.rounds, office.batch_size, office.rounds) == (128, 100, 32, 200)
    assert digits.partition == "natural" and digits.num_clients == 5 and office.num_clients == 4
    assert digits.optimizer.lr == 0.01 and digits.optimizer.momentum == 0.0
    assert non_default("algorithm", by[("fedbn", "Digits5")].algorithm, by[("fedbn", "Digits5")].algorithm_params) == {}
    table = recipe.table("digits5")
    assert table.figure == "val_selected" and table.metric == "personal_mean"


def test_table1_views_are_one_per_dataset_with_the_papers_columns():
    recipe = load_recipe(RECIPES / "lgmix_table1.toml")
    from fedbench.report.table import build_table

    digits = build_table(recipe, recipe.table("digits5"), Registry("sqlite://"))
    office = build_table(recipe, recipe.table("office"), Registry("sqlite://"))
    assert digits.columns == ["A", "B", "C", "D", "E", "Avg."] and office.columns == ["A", "B", "C", "D", "Avg."]
    assert digits.rows[-1] == office.rows[-1] == "lgmix" and len(digits.rows) == 11
    assert digits.cells[("lgmix", "Avg.")].published == 97.10 and digits.cells[("lgmix", "Avg.")].expected == 3
    assert office.cells[("fedbn", "D")].published == 83.05 and office.cells[("l2sgd", "A")].published is None


runner = CliRunner()


# ------------------------------------------------------------------------------ sensitivity, specificity, F1
LABELS = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])


PREDICTIONS = np.array([0, 0, 1, 0, 1, 1, 0, 1, 1, 0])  # TN 3, FP 1, TP 4, FN 2


def test_binary_metrics_equal_the_confusion_matrix_formulas():
    from sklearn.metrics import confusion_matrix

    tn, fp, fn, tp = confusion_matrix(LABELS, PREDICTIONS).ravel()
    assert (tn, fp, fn, tp) == (3, 1, 2, 4)
    assert scores.sensitivity(LABELS, PREDICTIONS, 2) == pytest.approx(tp / (tp + fn)) == pytest.approx(4 / 6)
    assert scores.specificity(LABELS, PREDICTIONS, 2) == pytest.approx(tn / (tn + fp)) == pytest.approx(3 / 4)
    f1_pos = 2 * tp / (2 * tp + fp + fn)  # 8 / 11
    f1_neg = 2 * tn / (2 * tn + fn + fp)  # 6 / 9
    assert scores.f1_macro(LABELS, PREDICTIONS) == pytest.approx((f1_pos + f1_neg) / 2)


def test_binary_metrics_are_none_where_undefined():
    only_negatives = np.zeros(4, int)
    assert scores.sensitivity(only_negatives, np.array([0, 1, 0, 0]), 2) is None  # no positives
    assert scores.specificity(only_negatives, np.array([0, 1, 0, 0]), 2) == pytest.approx(0.75)
    assert scores.specificity(np.ones(3, int), np.ones(3, int), 2) is None  # no negatives
    three = np.array([0, 1, 2, 2])
    assert scores.sensitivity(three, three, 3) is None and scores.specificity(three, three, 3) is None
    assert scores.f1_macro(three, three) == 1.0  # macro F1 is defined for any number of classes


def test_client_metrics_of_logits():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 3.0], [0.5, 0.0]])
    labels = torch.tensor([0, 0, 1, 1, 1])  # predictions 0 1 0 1 0: TN 1, FP 1, TP 1, FN 2
    out = extra_metrics(["sensitivity", "specificity", "f1", "dice"], logits, labels)
    assert out["sensitivity"] == pytest.approx(1 / 3) and out["specificity"] == pytest.approx(1 / 2)
    assert out["f1"] == pytest.approx((2 / 5 + 2 / 5) / 2)  # class 1: 2·1 / (2·1 + 1 + 2); class 0 likewise
    assert out["dice"] is None  # a segmentation metric on a classification task
    empty = extra_metrics(["sensitivity", "f1"], logits[:0], labels[:0])
    assert empty == {"sensitivity": None, "f1": None}


# ------------------------------------------------------------------------------ derived marks
VIEW = """
paper = "testpaper"
name = "marks"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = {{ hidden = 16 }}
partition = "dirichlet"
partition_params = {{ alpha = 1.0, min_size = 20 }}
num_clients = 3
clients_per_round = 3
rounds = 2
batch_size = 32
optimizer = {{ lr = 0.1 }}
eval_mode = "personal"
client_test_fraction = 0.3
client_val_fraction = 0.2
eval_metrics = ["auc", "sensitivity", "specificity", "f1"]

[matrix]
algorithm = ["fedavg", "lgmix"]

[[tables]]
name = "metrics"
rows = ["algorithm"]
columns = ["metric"]
metrics = {{ Accuracy = "personal_mean", AUC = "personal_auc", "F1-score" = "personal_f1" }}
figure = "val_selected"
derived_note = "rebuilt from the row average"

[tables.published]
fedavg = {{ Accuracy = 90.5, AUC = 99.0 }}
lgmix = {{ Accuracy = 91.25, "F1-score" = 90.0 }}

[tables.published_std]
lgmix = {{ Accuracy = 0.5 }}

[tables.published_derived]
fedavg = ["AUC"]

[tables.published_std_derived]
lgmix = ["Accuracy"]
{extra}"""


def test_derived_marks_show_in_every_format_with_their_caption(write_recipe):
    recipe = load_recipe(write_recipe(VIEW.format(extra=""), "marks.toml"))
    (view,) = recipe.tables
    table = build_table(recipe, view, EmptyRegistry())
    assert table.columns == ["Accuracy", "AUC", "F1-score"]
    auc, accuracy = table.cells[("fedavg", "AUC")], table.cells[("lgmix", "Accuracy")]
    assert auc.published_derived and not auc.published_std_derived
    assert accuracy.published_std_derived and not accuracy.published_derived
    assert not table.cells[("fedavg", "Accuracy")].published_derived
    caption = "‡ paper value not printed in the paper; derived for this report: rebuilt from the row average."
    for fmt in ("markdown", "html"):
        text = render([table], fmt)
        assert "99.00‡" in text and "91.25 ± 0.50‡" in text and caption in text, fmt
        assert "90.50‡" not in text
    latex = render([table], "latex")
    assert r"99.00$^\ddagger$" in latex and r"0.50$^\ddagger$" in latex and "rebuilt from the row average" in latex
    from rich.console import Console

    console = Console(width=200, record=True)
    for renderable in render([table], "rich"):
        console.print(renderable)
    rich_text = console.export_text()
    assert "99.00‡" in rich_text and "derived for this report" in rich_text
    as_json = json.loads(render([table], "json"))["tables"][0]
    cells = {(c["row"], c["column"]): c for c in as_json["cells"]}
    assert cells[("fedavg", "AUC")]["published_derived"] and cells[("lgmix", "Accuracy")]["published_std_derived"]
    assert caption in as_json["notes"]
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(render([table], "csv")))}
    assert rows[("fedavg", "AUC")]["published_derived"] == "True"
    assert (
        rows[("lgmix", "Accuracy")]["published_std_derived"] == "True" and rows[("lgmix", "Accuracy")]["published_std"]
    )
    assert rows[("fedavg", "Accuracy")]["published_derived"] == "False"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('fedavg = ["AUC"]', 'fedavg = ["F1-score"]'), r"published_derived marks 'fedavg'.'F1-score', which has no"),
        (('fedavg = ["AUC"]', 'fedprox = ["AUC"]'), r"published_derived marks 'fedprox'.'AUC', which has no"),
        (('lgmix = ["Accuracy"]', 'lgmix = ["AUC"]'), r"published_std_derived marks 'lgmix'.'AUC', which has no"),
        (('fedavg = ["AUC"]', "fedavg = 1"), r"published_derived"),
    ],
)
def test_a_mark_on_a_cell_without_a_published_value_is_an_error(write_recipe, change, message):
    text = VIEW.format(extra="").replace(*change)
    with pytest.raises(RecipeError, match=message):
        load_recipe(write_recipe(text, "bad.toml"))


def test_rows_only_marks_in_a_view_without_columns(write_recipe):
    text = """
paper = "testpaper"
name = "rows"
[setup]
dataset = "digits"
model = "digits_mlp"
[matrix]
algorithm = ["fedavg", "fedprox"]
[[tables]]
name = "best"
rows = ["algorithm"]
columns = []
published = { fedavg = 50.0 }
published_derived = ["fedavg"]
"""
    recipe = load_recipe(write_recipe(text, "rows.toml"))
    table = build_table(recipe, recipe.tables[0], EmptyRegistry())
    assert table.cells[("fedavg", "")].published_derived and "50.00‡" in render([table], "markdown")
    with pytest.raises(RecipeError, match="which has no published value"):
        load_recipe(write_recipe(text.replace('["fedavg"]', '["fedprox"]'), "rows2.toml"))
    with pytest.raises(RecipeError, match="has no columns, so published_derived lists rows"):
        load_recipe(write_recipe(text.replace('["fedavg"]', '{ fedavg = ["x"] }'), "rows3.toml"))


def test_a_metrics_axis_needs_metric_in_rows_or_columns(write_recipe):
    text = VIEW.format(extra="").split("[tables.published]")[0].replace('columns = ["metric"]', "columns = []")
    with pytest.raises(RecipeError, match='metrics needs "metric" in rows or columns'):
        load_recipe(write_recipe(text, "axis.toml"))


# ------------------------------------------------------------------------------ runs: metric axis, wall time, memory
def test_metric_axis_wall_hours_and_peak_memory_through_the_cli(write_recipe, registry_url):
    text = VIEW.format(
        extra="""
[[tables]]
name = "hours"
rows = ["algorithm"]
columns = []
figure = "wall_hours"

[[tables]]
name = "memory"
rows = ["algorithm"]
columns = []
figure = "peak_memory_mb"
"""
    )
    recipe_path = write_recipe(text, "runs.toml")
    recipe = load_recipe(recipe_path)
    assert [v.name for v in recipe.tables] == ["metrics", "hours", "memory"]
    result = runner.invoke(app, ["run", str(recipe_path), "--registry", registry_url, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    registry = Registry(registry_url)
    runs = registry.runs()
    assert len(runs) == 2 and all(r.status == "done" for r in runs)
    for run in runs:
        value, measure = peak_memory(run.provenance)
        assert measure in ("cpu_peak_rss_growth", "n/a") and (value is None) == (measure == "n/a")
        last = registry.curve(run.id)[-1]
        assert set(last.personal_metrics) == {"auc", "sensitivity", "specificity", "f1"}
    report = runner.invoke(
        app, ["report", "--recipe", str(recipe_path), "--registry", registry_url, "--format", "json"]
    )
    assert report.exit_code == 0, report.output
    tables = {t["table"]: t for t in json.loads(report.stdout)["tables"]}
    cells = {(c["row"], c["column"]): c for c in tables["metrics"]["cells"]}
    assert {c for _, c in cells} == {"Accuracy", "AUC", "F1-score"}
    from fedbench.vocab.metrics import VALIDATION_METRIC, metric_curve

    lgmix = next(r for r in runs if r.labels["algorithm"] == "lgmix")
    rounds = registry.curve(lgmix.id)
    for column, name in (("Accuracy", "personal_mean"), ("AUC", "personal_auc"), ("F1-score", "personal_f1")):
        expected = curves.value_at_best(metric_curve(rounds, name), metric_curve(rounds, VALIDATION_METRIC)) * 100
        assert cells[("lgmix", column)]["mean"] == pytest.approx(expected), column
    hours = {c["row"]: c for c in tables["hours"]["cells"]}
    assert hours["lgmix"]["mean"] == pytest.approx(sum(r.wall_seconds for r in rounds) / 3600)
    memory = {c["row"]: c for c in tables["memory"]["cells"]}
    if peak_memory(lgmix.provenance)[0] is not None:
        assert memory["lgmix"]["mean"] == pytest.approx(peak_memory(lgmix.provenance)[0] / 2**20)
    assert any("peak memory measured as:" in note for note in tables["memory"]["notes"])
    for fmt in ("markdown", "latex", "csv", "html", "rich"):
        out = runner.invoke(app, ["report", "--recipe", str(recipe_path), "--registry", registry_url, "--format", fmt])
        assert out.exit_code == 0, (fmt, out.output)


def test_peak_memory_on_the_cpu_sees_an_allocation():
    memory = PeakMemory(torch.device("cpu"))
    memory.start()
    if memory.start_rss is None:
        pytest.skip(f"peak RSS cannot be reset here: {memory.reason}")
    # 64 MiB of fresh anonymous pages, every page touched: resident whatever the allocator holds in reserve (a
    # numpy array could reuse memory the suite freed earlier, and then the resident set would not grow)
    block = mmap.mmap(-1, 64 * 2**20)
    for offset in range(0, len(block), mmap.PAGESIZE):
        block[offset] = 1
    result = memory.result()
    block.close()
    assert result["measure"] == "cpu_peak_rss_growth" and result["bytes"] >= 60 * 2**20
    again = PeakMemory(torch.device("cpu"))
    again.start()  # the peak is reset: the earlier block does not count
    assert again.result()["bytes"] < 32 * 2**20


def test_peak_memory_on_cuda_is_the_allocators_peak_since_the_run_started(monkeypatch):
    """The CUDA branch without a GPU: the peak statistics are reset when the run starts and read when it ends."""
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append(("reset", device)))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 3 * 2**20)
    device = torch.device("cuda", 0)
    memory = PeakMemory(device)
    memory.start()
    assert ("reset", device) in calls
    assert memory.result() == {"bytes": 3 * 2**20, "measure": "cuda_max_allocated"}
    assert peak_memory({"peak_memory": memory.result()}) == (3 * 2**20, "cuda_max_allocated")
    assert peak_memory({}) == (None, "n/a") and peak_memory(None) == (None, "n/a")


def test_a_run_figure_needs_per_run_summaries(write_recipe):
    text = """
paper = "testpaper"
name = "memory"
[setup]
dataset = "digits"
model = "digits_mlp"
[matrix]
algorithm = ["fedavg"]
[[tables]]
name = "memory"
rows = ["algorithm"]
figure = "peak_memory_mb"
summary = "mean_curve"
"""
    with pytest.raises(RecipeError, match="peak_memory_mb' is a value per run"):
        load_recipe(write_recipe(text, "memory.toml"))


# ------------------------------------------------------------------------------ Retinal: six clients, own split
def test_natural_partition_with_a_count_per_group():
    groups = np.repeat([0, 1, 2, 3], [40, 30, 20, 10])
    rng = np.random.default_rng(0)
    parts = make_partition("natural", groups, groups, 6, rng, {"clients_per_group": [2, 2, 1, 1]})
    assert [len(p) for p in parts] == [20, 20, 15, 15, 20, 10]
    assert [int(np.unique(groups[p])[0]) for p in parts] == [0, 0, 1, 1, 2, 3]
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(100))
    with pytest.raises(ConfigError, match=r"makes 6 clients; num_clients=5"):
        make_partition("natural", groups, groups, 5, rng, {"clients_per_group": [2, 2, 1, 1]})
    with pytest.raises(ConfigError, match="give one count per group"):
        make_partition("natural", groups, groups, 4, rng, {"clients_per_group": [2, 2]})
    with pytest.raises(ConfigError, match="must be ≥ 1"):
        make_partition("natural", groups, groups, 4, rng, {"clients_per_group": [2, 2, 0, 0]})


def retinal_spec(recipe: str = "lgmix_table3.toml", synthetic: bool = False, **changes) -> RunSpec:
    planned = expand(load_recipe(RECIPES / recipe), scale="smoke", synthetic=synthetic)
    spec = next(p.spec for p in planned if p.labels.get("task", "Retinal") == "Retinal")
    return spec.model_copy(update=changes) if changes else spec


def test_the_retinal_task_runs_on_the_four_site_package_with_the_papers_split(tmp_path):
    """Tables 3-4 on files in the DoFE layout (Domain1-4): six clients (REFUGE train and validation two each), every
    client split 0.6 / 0.2 / 0.2 from its pooled train + test files (the natural partition cannot give 6 clients of 4 sites, and the
    package's own train/test split is not the paper's)."""
    sizes = {1: (3, 2), 2: (4, 3), 3: (6, 4), 4: (5, 5)}  # per Domain: (train, test) images
    for site, (n_train, n_test) in sizes.items():
        fx.write_retinal(tmp_path / f"site{site}", sites=1, per_split=max(n_train, n_test), seed=site)
        for split, n in (("train", n_train), ("test", n_test)):
            source = tmp_path / f"site{site}" / "retinal" / "Fundus" / "Domain1" / split / "ROIs"
            target = tmp_path / "retinal" / "Fundus" / f"Domain{site}" / split / "ROIs"
            for kind in ("image", "mask"):
                (target / kind).mkdir(parents=True)
                for path in sorted((source / kind).glob("*.png"))[:n]:
                    path.rename(target / kind / path.name)
    for recipe in ("lgmix_table3.toml", "lgmix_table4.toml", "lgmix_table8_9.toml"):
        spec = retinal_spec(recipe)
        assert spec.num_clients == 6 and spec.client_test == "split"
        data = prepare_data(spec, torch.device("cpu"), tmp_path)
        assert data.info["group_names"] == ["Domain3", "Domain4", "Domain2", "Domain1"]
        pooled = [sum(sizes[3]), sum(sizes[4]), sum(sizes[2]), sum(sizes[1])]  # 10, 10, 7, 5
        assert data.info["client_sizes"] == [5, 5, 5, 5, 7, 5] and sum(data.info["client_sizes"]) == sum(pooled)
        for client, size in enumerate(data.info["client_sizes"]):
            tests, vals = len(data.client_test[client]), len(data.client_val[client])
            assert (tests, vals) == (round(0.2 * size), round(0.2 * size))
            assert tests + vals + len(data.client_train[client]) == size
        assert len(data.tensors.test_y) == 0 and not data.client_test_from_test
    arrays = load_dataset("retinal", tmp_path, sites=["Domain1"], image_size=16, use_prepared=False)
    pooled = load_dataset("retinal", tmp_path, sites=["Domain1"], image_size=16, pool_splits=True, use_prepared=False)
    assert (len(arrays.train_y), len(arrays.test_y)) == sizes[1] and (len(pooled.train_y), len(pooled.test_y)) == (5, 0)
    assert np.array_equal(pooled.train_x, np.concatenate([arrays.train_x, arrays.test_x]))


def test_the_retinal_recipe_trains_on_the_fixture_files_through_the_cli(tmp_path, registry_url):
    for site in range(1, 5):
        fx.write_retinal(tmp_path / f"s{site}", sites=1, per_split=3, seed=site)
        (tmp_path / "retinal" / "Fundus").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"s{site}" / "retinal" / "Fundus" / "Domain1").rename(
            tmp_path / "retinal" / "Fundus" / f"Domain{site}"
        )
    args = ["--scale", "smoke", "--only", "algorithm=lgmix", "--registry", registry_url]
    result = runner.invoke(
        app,
        ["run", str(RECIPES / "lgmix_table3.toml"), *args, "--data-dir", str(tmp_path), "--device", "cpu"],
    )
    assert result.exit_code == 0, result.output
    registry = Registry(registry_url)
    (run,) = registry.runs()
    assert run.status == "done" and not run.synthetic
    last = registry.curve(run.id)[-1]
    assert len(last.personal_per_client) == 6 and len(last.personal_metrics["hausdorff"]) == 6
    report = runner.invoke(
        app, ["report", "--recipe", str(RECIPES / "lgmix_table3.toml"), *args[:2], "--registry", registry_url]
    )
    assert report.exit_code == 0 and "lgmix" in report.output


def test_pooled_splits_leave_no_global_test_set_to_read():
    spec = retinal_spec(synthetic=True, eval_mode="both")
    with pytest.raises(ConfigError, match="no global test set here"):
        prepare_data(spec, torch.device("cpu"))  # the synthetic stand-in follows pool_splits as the files would
    stand_in = synthetic_dataset("retinal", params=retinal_spec().dataset_params)
    assert len(np.unique(stand_in.train_groups)) == 4 and len(stand_in.test_y) == 0
    assert len(np.unique(synthetic_dataset("retinal", image_size=16).train_groups)) == 6  # no sites: the paper's six


# ------------------------------------------------------------------------------ the LG-Mix recipes
def published(name: str, view: str) -> dict:
    return {
        (c.row, c.column): c
        for c in build_table(
            load_recipe(RECIPES / name), load_recipe(RECIPES / name).table(view), EmptyRegistry()
        ).cells.values()
    }


def test_the_eight_derived_published_values_are_marked():
    """Five means rebuilt from the row average and three stds copied from Table 4 (lgmix.md §4 † and ‡)."""
    marked = []
    for name in ("lgmix_table1.toml", "lgmix_table2.toml"):
        recipe = load_recipe(RECIPES / name)
        for view in recipe.tables:
            if view.name.startswith("fedbabu_ft"):
                continue  # Table 1's FedBABU row again (its Office A is marked there too)
            for cell in build_table(recipe, view, EmptyRegistry()).cells.values():
                if cell.published_derived:
                    marked.append((view.name, cell.row, cell.column, "mean", cell.published))
                if cell.published_std_derived:
                    marked.append((view.name, cell.row, cell.column, "std", cell.published_std))
    assert sorted(marked) == sorted(
        [
            ("digits5", "l2sgd", "C", "mean", 96.01),
            ("digits5", "fedbn", "A", "mean", 99.21),
            ("office", "fedbn", "A", "mean", 80.12),
            ("office", "fedbabu", "A", "mean", 77.82),
            ("office", "fedhkd", "A", "mean", 77.14),
            ("digits5", "fedalt", "Avg.", "std", 0.08),
            ("domainnet", "fedbn", "Avg.", "std", 0.69),
            ("camelyon17", "fedalt", "Avg.", "std", 0.06),
        ]
    )
    assert published("lgmix_table1.toml", "fedbabu_ft_office")[("fedbabu", "A")].published_derived


def test_new_tables_place_the_papers_numbers():
    table7 = published("lgmix_table2.toml", "camelyon17_metrics")
    assert table7[("fedhkd", "F1-score")].published == 94.28 and table7[("lgmix", "Sensitivity")].published == 98.63
    hd = published("lgmix_table3.toml", "hausdorff")
    assert hd[("fedfomo", "E")].published == 154.01 and hd[("lgmix", "F")].published_std is None
    assert published("lgmix_table3.toml", "dice")[("perfedavg", "Avg.")].published == 83.82
    assert published("lgmix_table6.toml", "batch_size")[("16", "SVHN")].published == 93.85
    wall = published("lgmix_table8_9.toml", "wall_clock")
    assert wall[("fedhkd", "Digits5")].published == 22.43 and ("fedhkd", "Retinal") not in wall
    assert published("lgmix_table8_9.toml", "peak_memory")[("l2sgd", "DomainNet")].published == 1157.62
    assert published("lgmix_table10.toml", "bci")[("lgmix", "AUC")].published == 78.11


def test_shared_cells_are_the_same_runs():
    """Tables 3, 4, 6, 8-9 and Fig. 2(c) repeat Tables 1-3's settings key by key: their shared cells are the same
    specs."""

    def hashes(name: str) -> dict[str, dict]:
        return {p.spec_hash: p.labels for p in expand(load_recipe(RECIPES / name))}

    tables_1_3 = {**hashes("lgmix_table1.toml"), **hashes("lgmix_table2.toml"), **hashes("lgmix_table3.toml")}
    assert set(hashes("lgmix_table8_9.toml")) <= set(tables_1_3)
    table4 = hashes("lgmix_table4.toml")
    assert {tuple(labels.values()) for h, labels in table4.items() if h not in tables_1_3} == {
        ("Ours w/o history", task) for task in ("Digits5", "Office-Caltech10", "DomainNet", "Camelyon17", "Retinal")
    }
    table6 = {labels["batch_size"] for h, labels in hashes("lgmix_table6.toml").items() if h in tables_1_3}
    assert table6 == {"128"}
    fig2c = hashes("lgmix_fig2c.toml")
    assert {tuple(labels.values()) for h, labels in fig2c.items() if h in tables_1_3} == {
        (algorithm, "5") for algorithm in ("fedavg", "fedbn", "fedalt", "lgmix")
    }


def test_paper_order_of_the_lgmix_recipes():
    from fedbench.report.collect import report_recipes

    names = [r.name for r in report_recipes("lgmix", [], RECIPES)]
    assert names == [
        "lgmix_table1",
        "lgmix_table2",
        "lgmix_table3",
        "lgmix_table4",
        "lgmix_fig2a",
        "lgmix_fig2b",
        "lgmix_fig2c",
        "lgmix_fig3",
        "lgmix_table6",
        "lgmix_fig4",
        "lgmix_table8_9",
        "lgmix_table10",
    ]
