"""The runs a diagnostics view draws from, read from a real registry: rounds written by hand with the values of a
per-round diagnostic on some of them, then ``diagnostic_runs`` (the finished runs of the view's seeds and labels that
recorded it, with their values by round, in the recipe's order), ``diagnostic_table`` (the one line the text reports
show: how many of the selected runs recorded it, how many finished) and ``figure_and_line`` (how a run's series is
grouped into figures and lines)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.views import TableView
from fedbench.registry import Registry
from fedbench.report.diagnostics.series import diagnostic_runs, diagnostic_table, figure_and_line

RECIPE = """
paper = "testpaper"
name = "diag"
seeds = [0, 1]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 16 }
partition = "iid"
num_clients = 3
clients_per_round = 3
rounds = 3
batch_size = 32
local_steps = 2
optimizer = { lr = 0.1 }
eval_mode = "personal"
client_test_fraction = 0.2
client_val_fraction = 0.2
diagnostics = ["val_loss", "personal_divergence"]

[matrix]
algorithm = ["fedavg", "fedprox"]
lr = [{ label = "small", optimizer = { lr = 0.1 } }, { label = "large", optimizer = { lr = 0.5 } }]

[scale.smoke]
seeds = [0]

[[tables]]
name = "loss"
title = "Validation loss"
kind = "diagnostics"
diagnostic = "val_loss"
rows = ["algorithm"]
"""


def val_loss(mean: float) -> dict:
    """A stored val_loss value (``fedbench/vocab/diagnostics.py``'s layout)."""
    return {"clients": [0, 1, 2], "loss": [mean] * 3, "mean": mean}


def divergence() -> dict:
    return {"layers": ["fc"], "clients": [0], "distance": [[1.0]], "mean": [1.0], "global_norm": [1.0]}


# Per (algorithm, lr, seed): the run's status and its diagnostics on each of its 3 rounds (None: a round that
# diagnosed nothing); a run not listed stays pending. The value's mean names the run, so a test can tell them apart.
RUNS = {
    ("fedavg", "small", 0): ("done", [{"val_loss": val_loss(1.0)}, None, {"val_loss": val_loss(1.3)}]),
    # finished, but it recorded another diagnostic only: counted, never drawn
    ("fedavg", "small", 1): ("done", [{"personal_divergence": divergence()}, None, None]),
    ("fedavg", "large", 0): ("done", [None, {"val_loss": val_loss(2.0)}, None]),
    ("fedavg", "large", 1): ("done", [None, {"val_loss": val_loss(2.1)}, None]),
    ("fedprox", "small", 0): ("diverged", [{"val_loss": val_loss(3.0)}, None, None]),  # diverged is finished
    ("fedprox", "small", 1): ("failed", [{"val_loss": val_loss(3.1)}, None, None]),  # failed is not
    ("fedprox", "large", 0): ("done", [{"val_loss": val_loss(4.0)}, None, None]),
    # ("fedprox", "large", 1): still pending, nothing stored
}


@pytest.fixture
def stored(write_recipe, registry_url):
    """(recipe, registry) with the runs of RUNS."""
    recipe = load_recipe(write_recipe(RECIPE))
    registry = Registry(registry_url)
    planned = expand(recipe, check=False)
    registry.ensure_runs([p.registry_entry() for p in planned])
    for p in planned:
        key = (p.labels["algorithm"], p.labels["lr"], p.spec.seed)
        if key not in RUNS:
            continue
        status, diagnosed = RUNS[key]
        run_id = registry.claim(p.spec_hash)
        for i, diagnostics in enumerate(diagnosed):
            registry.log_round(run_id, RoundRecord(i + 1, 0.1, 1.0, 0, 0, diagnostics=diagnostics))
        registry.finish(run_id, status)
    return recipe, registry


def diagnostics_view(recipe, **fields) -> TableView:
    return TableView(**{**recipe.tables[0].model_dump(), **fields})


def drawn(runs) -> list[tuple[str, str, int, dict[int, float]]]:
    """Each run as (algorithm, lr, seed, {round: the mean of its value})."""
    return [
        (run.labels["algorithm"], run.labels["lr"], run.seed, {r: value["mean"] for r, value in run.rounds.items()})
        for run in runs
    ]


def test_the_finished_runs_that_recorded_the_diagnostic_in_the_recipes_order(stored):
    recipe, registry = stored
    runs = diagnostic_runs(recipe, diagnostics_view(recipe), registry)
    assert drawn(runs) == [
        ("fedavg", "small", 0, {1: 1.0, 3: 1.3}),  # only the rounds that recorded it
        ("fedavg", "large", 0, {2: 2.0}),
        ("fedavg", "large", 1, {2: 2.1}),
        ("fedprox", "small", 0, {1: 3.0}),
        ("fedprox", "large", 0, {1: 4.0}),
    ]
    assert runs[0].labels == {"algorithm": "fedavg", "lr": "small"}


def test_a_runs_values_cannot_be_changed_by_a_drawer(stored):
    """The runs one read gives are shared by the drawers of a view's figures: frozen."""
    recipe, registry = stored
    run = diagnostic_runs(recipe, diagnostics_view(recipe), registry)[0]
    with pytest.raises(FrozenInstanceError):
        run.seed = 1  # type: ignore[misc]


def test_the_views_where_and_the_reports_seeds_and_only_select_the_runs(stored):
    recipe, registry = stored
    view = diagnostics_view(recipe, where={"lr": "large"})
    assert [(a, lr, s) for a, lr, s, _ in drawn(diagnostic_runs(recipe, view, registry))] == [
        ("fedavg", "large", 0),
        ("fedavg", "large", 1),
        ("fedprox", "large", 0),
    ]
    view = diagnostics_view(recipe)
    assert [(a, lr, s) for a, lr, s, _ in drawn(diagnostic_runs(recipe, view, registry, seeds=[1]))] == [
        ("fedavg", "large", 1)
    ]
    only = {"algorithm": "fedprox"}
    assert [(a, lr, s) for a, lr, s, _ in drawn(diagnostic_runs(recipe, view, registry, only=only))] == [
        ("fedprox", "small", 0),
        ("fedprox", "large", 0),
    ]
    assert diagnostic_runs(recipe, view, registry, scale="smoke") == []  # its runs are other specs: none stored
    assert diagnostic_runs(recipe, view, registry, synthetic=True) == []  # runs on stand-in data: none stored


def test_the_table_is_one_line_counting_the_runs_that_recorded_it_and_those_that_finished(stored):
    recipe, registry = stored
    view = diagnostics_view(recipe)
    table = diagnostic_table(recipe, view, registry)
    assert (table.recipe, table.paper, table.view, table.scale, table.synthetic) == (
        "diag",
        "testpaper",
        view,
        "full",
        False,
    )
    assert table.rows == [] and table.columns == [] and table.cells == {} and table.unit == ""  # no numbers
    # 8 planned; finished: 4 fedavg and 2 fedprox (the failed and the pending one are not); 5 recorded val_loss
    assert table.notes == [
        "a figure of the per-round diagnostic 'val_loss' (per client), drawn by --plots and the HTML report: 5 of 8 "
        "runs recorded it (6 finished); the paper publishes no numbers for it."
    ]
    (line,) = diagnostic_table(recipe, view, registry, seeds=[1], only={"lr": "large"}).notes
    assert "1 of 2 runs recorded it (1 finished)" in line
    (line,) = diagnostic_table(recipe, diagnostics_view(recipe, where={"lr": "small"}), registry).notes
    assert "2 of 4 runs recorded it (3 finished)" in line
    (line,) = diagnostic_table(recipe, view, registry, scale="smoke").notes
    assert "0 of 4 runs recorded it (0 finished)" in line  # the smoke scale's one seed, its specs not stored


def test_a_view_with_a_layout_says_it_and_synthetic_data_is_said_first(stored):
    recipe, registry = stored
    view = diagnostics_view(recipe, diagnostic="personal_divergence", layout="per_layer")
    (line,) = diagnostic_table(recipe, view, registry).notes
    assert "per-round diagnostic 'personal_divergence', layout per_layer (per layer)" in line
    assert "1 of 8 runs recorded it (6 finished)" in line
    synthetic = diagnostic_table(recipe, view, registry, synthetic=True)
    assert synthetic.synthetic and synthetic.notes[0].startswith("SYNTHETIC DATA")
    assert "0 of 8 runs recorded it (0 finished)" in synthetic.notes[1]


class Spy:
    """A registry that counts what it is asked (``diagnostic_runs`` needs only its run_states and
    diagnostic_values)."""

    def __init__(self, registry):
        self.registry, self.asked = registry, []

    def run_states(self, hashes):
        self.asked.append(("run_states", len(hashes)))
        return self.registry.run_states(hashes)

    def diagnostic_values(self, ids, name):
        self.asked.append(("diagnostic_values", name))
        return self.registry.diagnostic_values(ids, name)


def test_the_registry_is_asked_once_for_the_states_and_once_for_the_values_of_the_finished_runs(stored):
    recipe, registry = stored
    spy = Spy(registry)
    diagnostic_runs(recipe, diagnostics_view(recipe), spy)
    assert spy.asked == [("run_states", 8), ("diagnostic_values", "val_loss")]
    spy = Spy(registry)
    assert diagnostic_runs(recipe, diagnostics_view(recipe), spy, synthetic=True) == []
    assert spy.asked == [("run_states", 8)]  # nothing finished: no values to read


@pytest.mark.parametrize(
    "fields,labels,expected",
    [
        # the method axis among the keys: a figure per value of the others, a line per method
        ({"rows": ["algorithm"]}, {"algorithm": "fedavg", "lr": "small"}, ("all", "fedavg")),
        ({"rows": ["lr"], "columns": ["algorithm"]}, {"algorithm": "fedavg", "lr": "small"}, ("small", "fedavg")),
        (
            {"rows": ["algorithm", "lr"], "columns": ["dataset"]},
            {"algorithm": "fedprox", "lr": "large", "dataset": "C"},
            ("large / C", "fedprox"),
        ),
        # another method axis; without it a figure per row and a line per column, or the other way round
        ({"rows": ["algorithm"], "baseline_axis": "lr"}, {"algorithm": "fedavg", "lr": "small"}, ("fedavg", "")),
        ({"rows": ["lr"], "columns": ["dataset"]}, {"lr": "small", "dataset": "C"}, ("small", "C")),
        (
            {"rows": ["lr"], "columns": ["dataset"], "plot_by": "columns"},
            {"lr": "small", "dataset": "C"},
            ("C", "small"),
        ),
        # several keys on one side: their labels joined
        (
            {"rows": ["lr", "dataset"], "columns": ["partition", "scale"]},
            {"lr": "small", "dataset": "C", "partition": "iid", "scale": "x2"},
            ("small / C", "iid / x2"),
        ),
        # keys the run has no label of are left out
        ({"rows": ["lr", "seed"], "columns": ["dataset", "x"]}, {"lr": "small", "dataset": "C"}, ("small", "C")),
    ],
)
def test_figure_and_line_group_a_runs_series(fields, labels, expected):
    view = TableView(name="v", kind="diagnostics", diagnostic="val_loss", **fields)
    assert figure_and_line(view, labels) == expected
