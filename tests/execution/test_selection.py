"""The runs a command is about (``fedbench/execution/selection.py``): recipes compiled with filters, the device
checked (torch only where a device needs it), and the dry run's statuses read without creating a registry."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fedbench.errors import FedbenchError
from fedbench.execution import selection
from fedbench.execution.selection import dry_run, select_runs
from fedbench.registry import Registry
from registry_fixtures import finish_run


def test_only_filters_select_runs_and_one_that_keeps_nothing_names_the_filters(write_recipe, monkeypatch):
    recipe = write_recipe()
    assert len(select_runs([recipe], scale="smoke")) == 2
    (kept,) = select_runs([recipe], scale="smoke", only={"algorithm": {"fedprox"}})
    assert kept.labels["algorithm"] == "fedprox"
    # filters whose combination matches no cell (each value exists, as the compiler checks)
    monkeypatch.setattr(selection, "compile_recipes", lambda *args, **kwargs: [])
    with pytest.raises(FedbenchError, match=r"^no runs match --only algorithm=fedavg\|fedprox seed=3: check the"):
        select_runs([recipe], only={"algorithm": {"fedprox", "fedavg"}, "seed": {"3"}})
    assert select_runs([recipe]) == []  # recipes without runs (analytic tables only): nothing to train, no error


def test_a_dry_run_reads_statuses_without_creating_a_registry(write_recipe, registry_url, tmp_path):
    planned = select_runs([write_recipe()], scale="smoke")
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    assert [row.status for row in dry_run(planned, missing)] == ["new", "new"]
    assert not (tmp_path / "none.db").exists()
    Registry(registry_url).ensure_runs([p.registry_entry() for p in planned])
    finish_run(registry_url, planned[0].spec_hash, "done")
    rows = dry_run(planned, registry_url)
    assert [(r.spec_hash, r.status, r.rounds, r.seed) for r in rows] == [
        (planned[0].spec_hash, "done", 2, 0),
        (planned[1].spec_hash, "pending", 2, 0),
    ]


def test_a_device_this_machine_lacks_is_refused_and_auto_or_cpu_need_no_torch(write_recipe, monkeypatch):
    recipe = write_recipe()
    checked = []
    monkeypatch.setattr(selection, "check_device", lambda name: checked.append(name))
    select_runs([recipe], scale="smoke", device="cuda:3")
    assert checked == ["cuda:3"]  # every plan checks its device
    monkeypatch.undo()
    with pytest.raises(FedbenchError, match=r"^--device"):
        select_runs([recipe], scale="smoke", device="no-such-device")
    probe = (
        "import sys\n"
        "from fedbench.execution.selection import select_runs\n"
        f"select_runs([{str(recipe)!r}], scale='smoke', device=sys.argv[1])\n"
        "print('torch' in sys.modules)"
    )
    # meta: a device that exists on every machine, and that only torch can tell from a typo
    for device, imports_torch in (("auto", False), ("cpu", False), ("meta", True)):
        done = subprocess.run([sys.executable, "-c", probe, device], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [str(imports_torch)], device
