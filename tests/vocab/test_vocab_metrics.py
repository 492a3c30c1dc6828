"""The metric catalogue: the engine's RoundRecord, the registry's rounds columns and the
catalogue's round fields are one list; every curve metric a recipe may name is read from real runs by the one
accessor, and renders in tables, plots and `show` with the catalogue's unit (×100 exactly for % metrics).
Also: the report modules import one another without a circle."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import textwrap
import typing
from pathlib import Path

import numpy as np
import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.errors import RecipeError
from fedbench.execution.local import execute
from fedbench.execution.options import ExecutionOptions
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.views import TableView
from fedbench.registry import Registry
from fedbench.registry.tables import rounds
from fedbench.report.plots import curve_series, plot_table
from fedbench.report.render import render
from fedbench.report.run_view import CURVE_FIELDS, run_details, run_json
from fedbench.report.table import build_table, figure_of
from fedbench.vocab.metrics import (
    CLIENT_METRICS,
    CURVE_METRICS,
    EVAL_METRICS,
    METRICS,
    PERCENT,
    ROUND_FIELDS,
    axis_label,
    display_factor,
    display_unit,
    format_percent,
    markdown_table,
    metric_curve,
    metric_label,
    metric_value,
    to_percent,
)

ROOT = Path(__file__).resolve().parents[2]

CLASSIFICATION = """
paper = "catalogue"
name = "cls"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 16 }
partition = "dirichlet"
partition_params = { alpha = 1.0, min_size = 20 }
num_clients = 3
clients_per_round = 3
rounds = 3
batch_size = 32
optimizer = { lr = 0.1 }
eval_mode = "both"
client_test_fraction = 0.3
client_val_fraction = 0.2
eval_metrics = ["auc", "balanced_accuracy", "sensitivity", "specificity", "f1"]  # sensitivity, specificity: none here
finetune = { epochs = 1, lr = 0.01, start = "best_val" }

[matrix]
algorithm = ["fedavg"]

[[tables]]
name = "auc"                      # LG-Mix Table 7's view (its --plots crashed with AttributeError)
rows = ["algorithm"]
columns = []
figure = "val_selected"
metric = "personal_auc"

[[tables]]
name = "auc_clients"
rows = ["algorithm"]
columns = ["client"]
clients = ["A", "B", "C"]
figure = "val_selected"
metric = "personal_auc"
"""

SEGMENTATION = """
paper = "catalogue"
name = "seg"
seeds = [0]

[setup]
dataset = "retinal"
dataset_params = { image_size = 16 }
model = "unet"
model_params = { init_features = 2 }
partition = "natural"
num_clients = 6
clients_per_round = 6
rounds = 2
local_steps = 1
batch_size = 8
optimizer = { name = "adam", lr = 1e-3 }
eval_mode = "both"
client_test = "natural"
client_val_fraction = 0.2
eval_metrics = ["dice", "iou", "hausdorff"]
finetune = { epochs = 0 }

[matrix]
algorithm = ["fedavg"]

[[tables]]
name = "dice"
rows = ["algorithm"]
columns = []
figure = "final"
metric = "personal_dice"
"""


BINARY = """
paper = "catalogue"
name = "binary"
seeds = [0]

[setup]
dataset = "bci"
model = "mlp"
model_params = { hidden = [16] }
partition = "natural"
num_clients = 4
clients_per_round = 4
rounds = 2
batch_size = 32
optimizer = { lr = 0.05 }
eval_mode = "personal"
client_test = "natural"
client_val_fraction = 0.2
eval_metrics = ["sensitivity", "specificity"]

[matrix]
algorithm = ["fedavg"]
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One real tiny run per task in one registry, and a two-class one (sensitivity, specificity):
    {"classification" | "segmentation" | "binary": (recipe, synthetic, run row)}."""
    folder = tmp_path_factory.mktemp("catalogue")
    url = f"sqlite:///{folder / 'fedbench.db'}"
    registry = Registry(url)
    out = {}
    for task, text, synthetic in (
        ("classification", CLASSIFICATION, False),
        ("segmentation", SEGMENTATION, True),
        ("binary", BINARY, True),
    ):
        path = folder / f"{task}.toml"
        path.write_text(textwrap.dedent(text))
        recipe = load_recipe(path)
        planned = expand(recipe, synthetic=synthetic)
        registry.ensure_runs([p.registry_entry() for p in planned])
        execute(planned, ExecutionOptions(registry_url=url, device="cpu"), 1, lambda event: None)
        run = registry.get_run(planned[0].spec_hash)
        assert run.status == "done", run.error
        out[task] = (recipe, synthetic, run)
    return registry, out


def task_of(name: str) -> str:
    """The fixture's run that records ``name``."""
    return "binary" if METRICS[name].binary else METRICS[name].tasks[0]


# ------------------------------------------------------------------------------------------ one list of fields
def test_round_fields_are_the_engine_record_and_the_registry_columns():
    record = [f.name for f in dataclasses.fields(RoundRecord)]
    columns = [c.name for c in rounds.columns if c.name != "run_id"]
    assert sorted(record) == sorted(ROUND_FIELDS), "a RoundRecord field without a catalogue entry (or the reverse)"
    assert columns == list(ROUND_FIELDS), "the rounds table and the catalogue list the fields in the same order"


def test_every_field_is_a_metric_column_or_explicitly_not_a_metric():
    columns = [m.column for m in METRICS.values() if m.column is not None]
    assert len(columns) == len(set(columns))
    for name, entry in ROUND_FIELDS.items():
        assert entry.kind in ("key", "metric", "spread", "per_client", "cost", "diagnostics")
        assert (entry.kind == "metric") == (name in columns), name
        assert entry.kind == "metric" or entry.meaning, f"{name}: a non-metric field says what it holds"
    for m in METRICS.values():
        assert m.column is not None or m.per_client is not None, f"{m.name} is read from nowhere"
        assert m.per_client is None or ROUND_FIELDS[m.per_client].kind == "per_client", m.name
        assert (m.per_client_key is not None) == (m.per_client == "personal_metrics"), m.name
        assert m.per_client_key is None or m.per_client_key in CLIENT_METRICS
        assert m.unit and m.meaning and m.segmentation and m.tasks
        assert m.percent == (m.unit == "fraction"), f"{m.name}: fractions, and only they, are shown ×100"
        assert m.unit != "loss" or not m.higher_is_better, f"{m.name}: a lower loss is better"


def test_recipes_and_specs_accept_exactly_the_catalogue_names(write_recipe):
    from fedbench.spec import EVAL_METRICS as SPEC_EVAL_METRICS
    from fedbench.spec import RunSpec

    assert typing.get_args(TableView.model_fields["metric"].annotation) == CURVE_METRICS
    assert SPEC_EVAL_METRICS == EVAL_METRICS  # until spec.py imports it from the catalogue
    assert typing.get_args(typing.get_args(RunSpec.model_fields["eval_metrics"].annotation)[0]) == EVAL_METRICS
    assert all(f"personal_{name}" in METRICS for name in EVAL_METRICS)
    text = textwrap.dedent(CLASSIFICATION).replace('metric = "personal_auc"', 'metric = "personal_std"', 1)
    with pytest.raises(RecipeError, match="metric"):
        load_recipe(write_recipe(text, "bad.toml"))


# ------------------------------------------------------------------------------------------ read from real runs
@pytest.mark.parametrize("name", CURVE_METRICS)
def test_every_metric_is_read_from_a_real_run(runs, name):
    registry, by_task = runs
    metric = METRICS[name]
    for task, (_, _, run) in by_task.items():
        if task == "binary" and not metric.binary:
            continue  # the two-class run is there for the binary metrics
        rows = registry.curve(run.id)
        curve = metric_curve(rows, name)
        if not (task == "binary" if metric.binary else task in metric.tasks):
            assert curve == [], f"{name} is not recorded on a {task} run"
            continue
        assert curve, f"{name} has no value in any round of the {task} run"
        assert all(np.isfinite(v) and (v >= 0) for _, v in curve)
        if metric.percent:
            assert all(v <= 1 for _, v in curve), f"{name} is stored as a fraction"
        row = next(x for x in rows if x.round == curve[-1][0])
        if metric.per_client is None:
            continue
        per_client = [metric_value(row, name, client) for client in range(run.spec["num_clients"])]
        assert all(v is not None for v in per_client), name
        if metric.column is None:  # the mean over clients of the per-client values
            assert metric_value(row, name) == pytest.approx(float(np.mean(per_client)))


def test_figures_follow_the_metric_direction():
    curve = [(1, 2.0), (2, 0.5), (3, 0.8), (4, 0.4)]
    view = TableView(name="t", metric="test_loss", figure="best")
    assert figure_of(view, curve) == 0.4  # the lowest loss, not the highest
    assert figure_of(view.model_copy(update={"figure": "best_round"}), curve) == 4
    assert figure_of(view.model_copy(update={"figure": "rounds_to_target", "target": 0.6}), curve) == 2
    accuracy = TableView(name="t", metric="test_acc", figure="best")
    assert figure_of(accuracy, [(1, 0.5), (2, 0.7), (3, 0.6)]) == pytest.approx(70.0)


# ------------------------------------------------------------------------------------------ tables and plots
@pytest.mark.parametrize("percent", [True, False])
@pytest.mark.parametrize("name", CURVE_METRICS)
def test_percent_metrics_render_x100_in_tables_and_plots(runs, name, percent):
    registry, by_task = runs
    recipe, synthetic, run = by_task[task_of(name)]
    factor = 100.0 if percent and METRICS[name].percent else 1.0
    assert display_factor(name, percent) == factor
    view = TableView(name=f"{name}_view", rows=["algorithm"], columns=[], figure="final", metric=name, percent=percent)
    curve = metric_curve(registry.curve(run.id), name)

    table = build_table(recipe, view, registry, synthetic=synthetic)
    cell = table.cells[("fedavg", "")]
    assert cell.mean == pytest.approx(factor * curve[-1][1])
    assert table.unit == ("%" if factor == 100 else "px" if METRICS[name].unit == "px" else "")
    assert table.unit == display_unit(name, percent)
    markdown = render([table], "markdown")
    assert f"{factor * curve[-1][1]:.2f} (n=1)" in markdown

    series = curve_series(recipe, view, registry, synthetic=synthetic)
    # one figure ("all": the view has no key besides the method axis), a line per method
    assert series == {"all": {"fedavg": [[(r, factor * v) for r, v in curve]]}}


def test_personal_auc_view_renders_as_table_per_client_and_plots(runs, tmp_path):
    """Regression: `metric = "personal_auc"` rendered as a table, but `report --plots` crashed with
    AttributeError: 'RoundRow' object has no attribute 'personal_auc'."""
    registry, by_task = runs
    recipe, _, run = by_task["classification"]
    rows = registry.curve(run.id)
    chosen = max((x for x in rows if x.personal_val_mean is not None), key=lambda x: (x.personal_val_mean, -x.round))
    auc = chosen.personal_metrics["auc"]

    table = build_table(recipe, recipe.table("auc"), registry)
    assert table.unit == "%"
    assert table.cells[("fedavg", "")].mean == pytest.approx(100 * float(np.mean(auc)))
    per_client = build_table(recipe, recipe.table("auc_clients"), registry)
    assert per_client.columns == ["A", "B", "C", "Avg."]
    for index, name in enumerate("ABC"):
        assert per_client.cells[("fedavg", name)].mean == pytest.approx(100 * auc[index])
    for fmt in ("markdown", "json", "html", "latex", "csv"):
        assert render([table, per_client], fmt)

    for view in recipe.tables:
        written = plot_table(recipe, view, registry, tmp_path / "plots")
        assert written and all(path.stat().st_size > 0 for path in written), view.name
        box = plot_table(recipe, view.model_copy(update={"plot": "box"}), registry, tmp_path / "box")
        assert box and all(path.stat().st_size > 0 for path in box), view.name


def test_report_plots_through_the_cli_with_personal_auc(runs, tmp_path):
    from typer.testing import CliRunner

    from fedbench.cli import app

    registry, by_task = runs
    recipe, _, _ = by_task["classification"]
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--recipe",
            str(recipe.source),
            "--registry",
            registry.url,
            "--format",
            "markdown",
            "--plots",
            str(tmp_path / "plots"),
        ],
    )
    assert result.exit_code == 0, result.output
    markdown = result.output.split("\nwrote ")[0]  # the report, without the plots' paths
    assert "personal AUC (%) at the best mean-validation round" in markdown  # its human name, not its key
    assert "personal_auc" not in markdown
    assert len(list((tmp_path / "plots").glob("*.png"))) == 2


def test_plots_draw_only_the_runs_of_the_view(runs):
    registry, by_task = runs
    recipe, _, _ = by_task["classification"]
    view = recipe.table("auc")
    assert curve_series(recipe, view, registry)
    elsewhere = view.model_copy(update={"where": {"algorithm": "another"}})  # as LG-Mix's one view per data set
    assert curve_series(recipe, elsewhere, registry) == {}


# ------------------------------------------------------------------------------------------ show / runs
def test_run_details_hold_every_round_field_and_metric(runs):
    registry, by_task = runs
    for _, _, run in by_task.values():
        details = run_details(registry, run.id)
        assert details == run_details(registry, run.spec_hash[:8])
        json.dumps(details)  # JSON as it is
        assert {k: v for k, v in details.items() if k != "curve"} == run_json(registry.get_run(run.id))
        rows = registry.curve(run.id)
        assert [entry["round"] for entry in details["curve"]] == [row.round for row in rows]
        for entry, row in zip(details["curve"], rows):
            assert tuple(entry) == CURVE_FIELDS
            assert set(CURVE_METRICS) <= set(entry)
            for name in CURVE_METRICS:
                assert entry[name] == metric_value(row, name)


def test_show_json_prints_what_run_details_gives(runs):
    """Every key `fedbench show --json` prints has the value run_details gives (equal once show calls it)."""
    from typer.testing import CliRunner

    from fedbench.cli import app

    registry, by_task = runs
    run = by_task["classification"][2]
    result = CliRunner().invoke(app, ["show", str(run.id), "--json", "--registry", registry.url])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    details = json.loads(json.dumps(run_details(registry, run.id)))
    for key, value in shown.items():
        if key != "curve":
            assert details[key] == value, key
    for printed, entry in zip(shown["curve"], details["curve"], strict=True):
        assert {k: entry[k] for k in printed} == printed


# ------------------------------------------------------------------------------------------ docs
def test_docs_cli_lists_the_show_curve_fields():
    text = (ROOT / "docs" / "cli.md").read_text()
    match = re.search(r"`curve`: one entry per round with (.*?)\(", text, re.DOTALL)
    assert match, "docs/cli.md: the show --json curve sentence moved"
    listed = [name.strip() for name in match.group(1).replace("`", "").replace("\n", " ").split(",")]
    assert tuple(name for name in listed if name) == CURVE_FIELDS


def test_docs_recipes_hold_the_catalogue_table():
    assert markdown_table() in (ROOT / "docs" / "recipes.md").read_text(), (
        "regenerate the metric table of docs/recipes.md from fedbench.vocab.metrics.markdown_table()"
    )


# ------------------------------------------------------------------------------------------ part 5: no circle
def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):  # function-level imports count too
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_report_modules_import_without_a_circle():
    folder = ROOT / "fedbench" / "report"
    modules = {}
    for path in folder.rglob("*.py"):  # the render package's modules too (its __init__: the package itself)
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name != "fedbench.report":
            modules[name] = path
    graph = {name: {m for m in _imports(path) if m in modules} for name, path in modules.items()}
    assert "fedbench.report.table" not in graph["fedbench.report.static"]
    assert "fedbench.report.stats" not in graph["fedbench.report.cells"], "the statistics import the cell types"
    assert "fedbench.report.render.text" in graph["fedbench.report.render"]
    done: set[str] = set()

    def visit(name: str, stack: tuple[str, ...]) -> None:
        assert name not in stack, "import circle: " + " → ".join((*stack, name))
        if name not in done:
            for target in graph[name]:
                visit(target, (*stack, name))
            done.add(name)

    for name in graph:
        visit(name, ())


# ------------------------------------------------------------------------------------------ older registries
ADDED_AFTER_0_1_0 = ("diagnostics",)  # rounds columns of later migrations (0004: per-round diagnostics)


def test_a_registry_written_by_fedbench_0_1_0_reads_through_the_catalogue(tmp_path):
    """A 0.1.0 registry's rounds table has the catalogue's fields but those later migrations added (and no other),
    and once opened (migrated) every run of it reads through run_details and metric_value."""
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as connection:
        connection.executescript((ROOT / "tests" / "fixtures" / "registry_v0.1.0.sql").read_text())
        stored = [row[1] for row in connection.execute("PRAGMA table_info(rounds)") if row[1] != "run_id"]
    assert stored == [name for name in ROUND_FIELDS if name not in ADDED_AFTER_0_1_0]
    registry = Registry(f"sqlite:///{path}")
    runs = registry.runs()
    assert runs
    for run in runs:
        details = run_details(registry, run.id)
        assert len(details["curve"]) == len(registry.curve(run.id))
        for entry in details["curve"]:
            assert tuple(entry) == CURVE_FIELDS
        if run.status == "done":  # evaluated: some curve metric has values (test_acc, or personal_* alone)
            assert any(metric_curve(registry.curve(run.id), name) for name in CURVE_METRICS), run.id


def test_every_metric_has_a_human_name_for_each_task():
    for name, metric in METRICS.items():
        assert metric.label and metric.segmentation_label and "_" not in metric.label + metric.segmentation_label, name
    assert axis_label("test_acc") == "test accuracy (%)" and axis_label("personal_hausdorff") == "personal HD95 (px)"
    assert metric_label("personal_mean", ("segmentation",)) == "personal Dice"  # what it measures there
    # a table holding both tasks' runs (LG-Mix Table 4) names both
    assert metric_label("personal_mean", ("classification", "segmentation")) == "personal accuracy / personal Dice"


def test_fractions_become_percentages_in_one_place():
    assert PERCENT == 100.0
    assert to_percent(0.9583333333333334) == 0.9583333333333334 * 100.0 and to_percent(1) == 100.0
    assert to_percent(0.29) == 28.999999999999996  # the arithmetic the stored summary and the report share
    assert format_percent(0.9583333333333334) == "95.83" and format_percent(0.0) == "0.00"
    assert format_percent(None) == "–"
    assert display_factor("test_acc") == PERCENT and display_factor("test_acc", percent=False) == 1.0
    assert display_factor("test_loss") == 1.0
