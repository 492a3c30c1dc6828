"""``build_tables`` over a generated registry: what the shared work of one report (each recipe expanded once, a cell
resolved once for all its seeds, each run's state and rounds read once for all views, the cycle collector paused)
renders is exactly what building every view on its own, each seed resolved alone, renders.

The registry holds, for a widened quickstart and recipes whose views have columns, the "client", "metric" and
"round" pseudo-axes, seed-mean curves, validation-selected, wall-clock and peak-memory figures: done, diverged and
failed runs, runs never registered, and synthetic runs beside the real ones, each with every round field filled."""

from __future__ import annotations

import gc
import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import insert

from fedbench.errors import FedbenchError
from fedbench.recipes import expand as expansion
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry, tables
from fedbench.report import collect
from fedbench.report.collect import build_tables, report_recipes
from fedbench.report.render import render
from fedbench.report.table import build_table
from fedbench.vocab.metrics import METRICS
from fedbench.vocab.provenance import PEAK_MEMORY

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
# (recipe, scale): views with columns, pseudo-axes, mean curves, per-client metrics, wall time and peak memory
SHOWN = [
    ("fedimpro_table1.toml", "smoke"),
    ("fedtrip_table7.toml", "smoke"),
    ("lgmix_table1.toml", "smoke"),
    ("lgmix_table10.toml", "smoke"),
    ("lgmix_table8_9.toml", "smoke"),
]
STATUSES = ["done", "done", "done", "diverged", "failed", None]  # None: never registered
CLIENT_KEYS = sorted({m.per_client_key for m in METRICS.values() if m.per_client_key})


def _rounds(run_id: int, spec, rounds: int, rng: np.random.Generator) -> list[dict]:
    clients = spec.num_clients
    top = rng.uniform(0.5, 0.95)
    rows = []
    for r in range(1, rounds + 1):
        acc = float(top * (1 - np.exp(-0.3 * r)) + rng.normal(0, 0.01))
        per_client = [float(v) for v in rng.uniform(0.3, 1.0, clients)]
        rows.append(
            {
                "run_id": run_id,
                "round": r,
                "test_acc": acc,
                "test_loss": 1 - acc,
                "train_loss": 1.1 - acc,
                "personal_mean": float(np.mean(per_client)),
                "personal_weighted_mean": float(np.mean(per_client)),
                "personal_std": float(np.std(per_client)),
                "personal_per_client": per_client,
                "personal_val_mean": float(rng.uniform(0.3, 1.0)),
                "personal_val_per_client": [float(v) for v in rng.uniform(0.3, 1.0, clients)],
                "personal_metrics": {k: [float(v) for v in rng.uniform(0.1, 0.9, clients)] for k in CLIENT_KEYS},
                "finetune_mean": float(np.mean(per_client)) if r == rounds else None,
                "finetune_weighted_mean": float(np.mean(per_client)) if r == rounds else None,
                "finetune_std": 0.1 if r == rounds else None,
                "finetune_per_client": per_client if r == rounds else None,
                "wall_seconds": float(rng.uniform(0.1, 2.0)),
                "bytes_up": 1000 * r,
                "bytes_down": 2000 * r,
            }
        )
    return rows


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Registry, list, dict[str, int]]:
    """The registry, the recipes shown ((recipe, scale) pairs) and how many synthetic runs are done."""
    url = f"sqlite:///{tmp_path_factory.mktemp('collect') / 'generated.db'}"
    registry = Registry(url)
    quickstart = load_recipe(RECIPES / "quickstart.toml")
    shown = [(quickstart.model_copy(update={"seeds": list(range(30))}), "full")]
    shown += [(load_recipe(RECIPES / name), scale) for name, scale in SHOWN]
    rng = np.random.default_rng(0)
    now = datetime(2026, 1, 1)
    runs, rounds, synthetic_done = [], [], {}
    for recipe, scale in shown:
        for synthetic in (False, True):
            for p in expand(recipe, scale=scale, synthetic=synthetic, check=False):
                status = STATUSES[rng.integers(len(STATUSES))]
                if status is None:
                    continue
                run_id = len(runs) + 1
                memory = {"bytes": int(rng.integers(2**20, 2**30)), "measure": "torch.cuda.max_memory_allocated"}
                runs.append(
                    {
                        **p.registry_entry(),
                        "id": run_id,
                        "status": status,
                        "rounds_done": p.spec.rounds,
                        "created_at": now,
                        "finished_at": now,
                        "summary": {},
                        "provenance": {PEAK_MEMORY: memory} if rng.random() < 0.8 else {},
                    }
                )
                if synthetic and status == "done":
                    synthetic_done[recipe.name] = synthetic_done.get(recipe.name, 0) + 1
                if status != "failed":
                    length = p.spec.rounds if status == "done" else max(1, p.spec.rounds // 2)
                    rounds += _rounds(run_id, p.spec, length, rng)
    with registry.engine.begin() as connection:
        connection.execute(insert(tables.runs), runs)
        connection.execute(insert(tables.rounds), rounds)
    return registry, shown, synthetic_done


def _plain_tables(shown, registry, synthetic: bool) -> list:
    """Every view built on its own: no cache shared between views, each seed resolved alone."""
    built = []
    for recipe, scale in shown:
        for view in recipe.tables:
            built.append(build_table(recipe, view, registry, scale=scale, synthetic=synthetic, cache=None))
    return built


@pytest.mark.parametrize("synthetic", [False, True], ids=["real", "synthetic"])
def test_a_report_renders_the_same_json_as_every_view_built_alone(generated, monkeypatch, synthetic):
    registry, shown, _ = generated
    by_scale: dict[str, list] = {}
    for recipe, scale in shown:
        by_scale.setdefault(scale, []).append(recipe)
    shared = [
        t
        for scale, recipes in by_scale.items()
        for t in build_tables(recipes, registry, scale=scale, synthetic=synthetic)
    ]
    order = [(recipe, scale) for scale, recipes in by_scale.items() for recipe in recipes]
    with monkeypatch.context() as patch:
        patch.setattr(expansion, "_seed_specs", expansion._each_seed)
        alone = _plain_tables(order, registry, synthetic)
    assert json.loads(render(shared, "json")) == json.loads(render(alone, "json"))
    assert render(shared, "markdown") == render(alone, "markdown")
    assert sum(c.n for t in shared for c in t.cells.values()) > 100  # the runs were found: not two empty reports


def test_a_real_report_counts_the_synthetic_runs_done_of_its_cells(generated):
    registry, shown, synthetic_done = generated
    recipe, scale = shown[0]
    table = build_tables([recipe], registry, scale=scale, table="accuracy")[0]
    assert sum(c.synthetic_available for c in table.cells.values()) == synthetic_done[recipe.name] > 0


def test_building_the_tables_pauses_the_cycle_collector_and_resumes_it(generated, monkeypatch):
    registry, shown, _ = generated
    seen = []
    real_build = collect.build_table
    monkeypatch.setattr(collect, "build_table", lambda *a, **k: seen.append(gc.isenabled()) or real_build(*a, **k))
    assert gc.isenabled()
    build_tables([shown[0][0]], registry, scale=shown[0][1])
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:  # a caller that paused it keeps it paused
        build_tables([shown[0][0]], registry, scale=shown[0][1])
        assert not gc.isenabled()
    finally:
        gc.enable()


RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_a_paper_is_found_by_its_recipes_and_a_folder_without_recipes_says_where_to_look(tmp_path):
    found = report_recipes("fedtrip", [], RECIPES)
    assert found and {r.paper for r in found} == {"fedtrip"}
    assert [(r.order, r.name) for r in found] == sorted((r.order, r.name) for r in found)  # the paper's order
    with pytest.raises(
        FedbenchError, match=r"^--paper 'nope': no recipe in .*recipes/ has paper = 'nope'; papers: .*fedtrip"
    ):
        report_recipes("nope", [], RECIPES)
    # run outside the checkout: recipes/ is relative to the working directory, and there is none there
    with pytest.raises(FedbenchError) as refused:
        report_recipes("fedtrip", [], tmp_path / "recipes")
    assert str(refused.value) == (
        f"--paper 'fedtrip': no recipes in {tmp_path / 'recipes'}/; run from the folder that holds recipes/ or give "
        "--recipes-dir DIR"
    )


def test_a_scale_no_recipe_has_is_refused_even_beside_analytic_tables():
    """``report --paper fedtrip --scale nope`` would otherwise render fedtrip's analytic tables alone, as if the
    runs' tables did not exist: a misspelt scale is an error naming the scales the recipes have."""
    recipes = report_recipes("fedtrip", [], RECIPES)
    assert any(not recipe.setup for recipe in recipes)  # an analytic recipe is among them
    with pytest.raises(FedbenchError) as refused:
        build_tables(recipes, None, scale="nope")
    scales = sorted({name for recipe in recipes if recipe.setup for name in recipe.scale_names()})
    assert str(refused.value) == f"--scale 'nope': no recipe has that scale; theirs: {', '.join(scales)}"
    assert build_tables(recipes, None, scale="smoke")  # a scale they have renders


def test_recipes_without_tables_are_no_table_to_render(write_recipe):
    recipe = load_recipe(write_recipe())
    bare = recipe.model_copy(update={"tables": []})
    with pytest.raises(
        FedbenchError, match=r"^no table to render at scale 'full': the recipes define no \[\[tables\]\]"
    ):
        build_tables([bare], None)
