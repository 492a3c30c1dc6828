"""The contract between a run's stored summary and its stored curve: one finished run of every kind the package's
recipes make (a global model, personalised evaluation with and without the global model's, fine-tuning, per-round
diagnostics, segmentation) is trained through the command line, and every summary field equals the one recomputed
from the stored test-accuracy curve; ``fedbench show`` (its text and ``--json``), ``runs --json`` and ``export``
carry that summary, and ``fedbench report`` finds the same figures in its per-seed values."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.registry import Registry
from fedbench.vocab.metrics import to_percent

runner = CliRunner()

# Targets in % as recipes write them: 1 is reached at round 1 by any run, 100 by none, the others in between.
TARGETS = [1, 40, 60, 100]
# The report views that recompute each summary field: (table name, figure settings, summary key, target).
VIEWS = [
    ("best", 'figure = "best"', "best", None),
    ("best_round", 'figure = "best_round"', "best_round", None),
    ("final", 'figure = "final"', "final", None),
    ("last5", 'figure = "last_k_mean"\nk = 5', "last5_mean", None),
    ("last10", 'figure = "last_k_mean"\nk = 10', "last10_mean", None),
    *((f"to_{t}", f'figure = "rounds_to_target"\ntarget = {t}', "rounds_to_target", t) for t in TARGETS),
]
TABLES = "".join(
    f'\n[[tables]]\nname = "{name}"\nrows = ["algorithm"]\ncolumns = []\n{figure}\n' for name, figure, _, _ in VIEWS
)
DIGITS = """
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 32 }
partition = "iid"
num_clients = 3
clients_per_round = 3
rounds = 6
batch_size = 32
local_steps = 3
optimizer = { lr = 0.1 }
"""
# {kind: (recipe setup and matrix, synthetic data)}; every recipe gets the targets (in its setup) and the report views.
KINDS = {
    "global": (f"[setup]{DIGITS}\n[matrix]\nalgorithm = ['fedavg']\n", False),
    "personal": (
        f"""[setup]{DIGITS}eval_mode = "both"
client_test_fraction = 0.2

[matrix]
algorithm = ["ditto", "local"]

[overrides.algorithm.local]
eval_mode = "personal"
""",
        False,
    ),
    "finetuned": (
        f"""[setup]{DIGITS}eval_mode = "both"
client_test_fraction = 0.2
client_val_fraction = 0.2
finetune = {{ epochs = 1, lr = 0.01, start = "best_val" }}

[matrix]
algorithm = ["fedavg"]
""",
        False,
    ),
    "diagnostics": (
        f'[setup]{DIGITS}diagnostics = ["weight_divergence"]\n\n[matrix]\nalgorithm = ["fedprox"]\n',
        False,
    ),
    "segmentation": (
        """[setup]
dataset = "retinal"
dataset_params = { image_size = 16 }
model = "unet"
model_params = { init_features = 4 }
partition = "natural"
num_clients = 6
clients_per_round = 6
rounds = 3
local_steps = 2
batch_size = 8
optimizer = { name = "adam", lr = 1e-2 }
client_test = "natural"

[matrix]
algorithm = ["fedavg"]
""",
        True,
    ),
}


def invoke(*args: str, **kwargs) -> str:
    result = runner.invoke(app, list(args), **kwargs)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One registry holding a finished run of every kind; {kind: (recipe path, synthetic)} and its URL."""
    folder = tmp_path_factory.mktemp("summaries")
    url = f"sqlite:///{folder / 'registry.db'}"
    recipes = {}
    for kind, (body, synthetic) in KINDS.items():
        recipe = folder / f"{kind}.toml"
        setup = body.replace("[setup]", f"[setup]\ntargets = {TARGETS}", 1)
        recipe.write_text(f'paper = "contract"\nname = "{kind}"\nseeds = [0]\n\n{setup}{TABLES}')
        invoke("run", str(recipe), "--registry", url, "--device", "cpu", *(["--synthetic"] if synthetic else []))
        recipes[kind] = (recipe, synthetic)
    return recipes, url


def recomputed(curve: list[tuple[int, float]]) -> dict:
    """The summary of a stored curve of fractions, computed here from its definition (docs/cli.md)."""
    values = [v for _, v in curve]
    if not values:
        return dict.fromkeys(("best", "best_round", "final", "last5_mean", "last10_mean")) | {
            "rounds_to_target": {f"{t}": None for t in TARGETS},
            "evaluated_rounds": 0,
        }
    top = max(values)
    return {
        "best": top,
        "best_round": next(r for r, v in curve if v == top),
        "final": values[-1],
        "last5_mean": sum(values[-5:]) / len(values[-5:]),
        "last10_mean": sum(values[-10:]) / len(values[-10:]),
        "rounds_to_target": {f"{t}": next((r for r, v in curve if to_percent(v) >= t), None) for t in TARGETS},
        "evaluated_rounds": len(values),
    }


def test_every_stored_summary_equals_the_one_recomputed_from_its_curve(finished):
    _, url = finished
    registry = Registry(url)
    runs = registry.runs(paper="contract")
    assert len(runs) == 6 and all(run.status == "done" for run in runs), [(r.labels, r.error) for r in runs]
    reached = []
    for run in runs:
        curve = [(row.round, row.test_acc) for row in registry.curve(run.id) if row.test_acc is not None]
        expected, stored = recomputed(curve), run.summary
        assert set(stored) == set(expected), run.recipe
        for key in ("best", "best_round", "final", "evaluated_rounds", "rounds_to_target"):
            assert stored[key] == expected[key], (run.recipe, run.labels, key)
        for key in ("last5_mean", "last10_mean"):
            assert stored[key] == (None if expected[key] is None else pytest.approx(expected[key], rel=1e-12))
        reached += list(stored["rounds_to_target"].values())
    # not a check of nulls against nulls: targets are reached, at different rounds, and missed
    assert 1 in reached and None in reached and len(set(reached) - {None}) > 1, reached
    # the run evaluated personally only has no global curve: its summary says so
    assert [run.summary["evaluated_rounds"] for run in runs if run.labels["algorithm"] == "local"] == [0]


def report_values(recipe, synthetic: bool, url: str) -> dict[str, dict[str, float | None]]:
    """{table name: {algorithm: the report's value for its one seed}}."""
    document = json.loads(
        invoke("report", "--recipe", str(recipe), "--registry", url, "--format", "json", *(["--synthetic"] * synthetic))
    )
    out: dict[str, dict[str, float | None]] = {}
    for table in document["tables"]:
        for cell in table["cells"]:
            assert cell["n"] == 1 and cell["seeds"] == [0], (table["table"], cell)
            out.setdefault(table["table"], {})[cell["row"]] = cell["values"][0]
    return out


def shown_targets(text: str) -> dict[str, int | None]:
    """``fedbench show``'s "rounds to T %: R" parts as {T: R}."""
    found = re.findall(r"rounds to (\S+) %: (\d+|not reached)", text)
    return {target: None if reached == "not reached" else int(reached) for target, reached in found}


@pytest.mark.parametrize("kind", KINDS)
def test_show_runs_and_export_carry_the_summary_the_report_recomputes(finished, kind):
    recipes, url = finished
    recipe, synthetic = recipes[kind]
    listed = {r["id"]: r for r in json.loads(invoke("runs", "--paper", "contract", "--json", "--registry", url))}
    exported = [json.loads(line) for line in invoke("export", "--recipe", str(recipe), "--registry", url).splitlines()]
    exported_by_hash = {line["spec_hash"]: line for line in exported[1:]}
    values = report_values(recipe, synthetic, url)
    runs = [run for run in Registry(url).runs(paper="contract") if run.recipe == kind]
    assert runs and len(exported_by_hash) == len(runs)
    for run in runs:
        summary = run.summary
        shown = json.loads(invoke("show", str(run.id), "--json", "--registry", url))
        assert shown["summary"] == listed[run.id]["summary"] == exported_by_hash[run.spec_hash]["summary"] == summary
        algorithm = run.labels["algorithm"]
        for name, _, key, target in VIEWS:
            reported = values[name][algorithm]
            if target is not None:
                assert summary[key][f"{target}"] == reported, (kind, algorithm, name)
            elif key in ("best", "final"):  # ×100 keeps the order of values: the same best, the same last
                assert reported == (None if summary[key] is None else to_percent(summary[key])), (kind, name)
            elif key == "best_round":
                assert summary[key] == reported, (kind, algorithm, name)
            else:
                assert reported == (None if summary[key] is None else pytest.approx(to_percent(summary[key])))
        text = invoke("show", str(run.id), "--registry", url, env={"COLUMNS": "400"})
        if summary["best"] is None and run.spec["eval_mode"] == "personal":  # no global figure to show: it says so
            assert "not evaluated: eval_mode = personal" in text and shown_targets(text) == {}, text
            assert all(values[f"to_{t}"][algorithm] is None for t in TARGETS)
            continue
        assert shown_targets(text) == {f"{t}": values[f"to_{t}"][algorithm] for t in TARGETS}, text
