"""A batch of planned runs (``fedbench/execution/batch.py``): what ``prepare_batch`` trains, skips or puts back (bad input changes nothing in the registry), ``preflight`` loading each
distinct data set and partition once, and the outcome's counts and last error lines."""

from __future__ import annotations

import pytest

from conftest import TINY_RECIPE
from fedbench.errors import FedbenchError
from fedbench.execution import batch
from fedbench.execution.batch import preflight, prepare_batch
from fedbench.execution.options import ExecutionOptions
from fedbench.execution.selection import select_runs
from fedbench.registry import Registry
from registry_fixtures import finish_run


def test_finished_runs_are_skipped_or_with_force_put_back(write_recipe, registry_url):
    planned = select_runs([write_recipe()], scale="smoke")
    options = ExecutionOptions(registry_url=registry_url, device="cpu")
    first = prepare_batch(planned, options)
    assert [p.spec_hash for p in first.todo] == [p.spec_hash for p in planned] and not first.skipped
    finish_run(registry_url, planned[0].spec_hash, "done")
    again = prepare_batch(planned, options)
    assert [p.spec_hash for p in again.todo] == [planned[1].spec_hash]
    assert [p.spec_hash for p in again.skipped] == [planned[0].spec_hash] and not again.rerun
    forced = prepare_batch(planned, options, force=True)
    assert len(forced.todo) == 2 and [p.spec_hash for p in forced.rerun] == [planned[0].spec_hash]
    assert Registry(registry_url).statuses([planned[0].spec_hash]) == {planned[0].spec_hash: "pending"}
    assert forced.options.registry_url == Registry(registry_url).url  # what every worker opens


def test_bad_input_changes_nothing_in_the_registry(write_recipe, tmp_path):
    recipe = write_recipe().read_text().replace("num_clients = 4", "num_clients = 100000")
    planned = select_runs([write_recipe(recipe, "big.toml")], scale="smoke")
    url = f"sqlite:///{tmp_path / 'untouched.db'}"
    with pytest.raises(FedbenchError):
        prepare_batch(planned, ExecutionOptions(registry_url=url, device="cpu"))
    assert not (tmp_path / "untouched.db").exists()


def test_preflight_loads_each_data_set_and_partition_once(write_recipe, monkeypatch):
    planned = select_runs([write_recipe()], scale="smoke")  # two methods, one data set and one partition
    built = []
    original = batch.partition_clients
    monkeypatch.setattr(
        batch, "partition_clients", lambda spec, arrays: built.append(spec.seed) or original(spec, arrays)
    )
    assert preflight(planned) == []
    assert built == [0]


def test_the_outcome_counts_statuses_and_gives_each_failures_last_line(write_recipe, registry_url):
    planned = select_runs([write_recipe()], scale="smoke")
    work = prepare_batch(planned, ExecutionOptions(registry_url=registry_url, device="cpu"))
    finish_run(registry_url, planned[0].spec_hash, "failed", error="Traceback …\n  line 3\nValueError: bad value\n")
    outcome = work.outcome()
    assert outcome.counts == {"failed": 1, "pending": 1}
    assert [(f.spec_hash, f.error) for f in outcome.failed] == [(planned[0].spec_hash, "ValueError: bad value")]
    assert outcome.registry_url == Registry(registry_url).display_url


@pytest.mark.parametrize(
    ("eval_mode", "warned"),
    [(None, True), ('"both"', False), ('"personal"', False)],
    ids=["global", "both", "personal"],
)
def test_client_test_sets_without_a_personal_evaluation_are_one_warning_line(write_recipe, eval_mode, warned):
    """Client test sets from the global test set are read by personal evaluation only: under the default
    ``eval_mode = "global"`` (and no fine-tuning) ``client_test`` changes nothing the run scores, which the README's
    own-data example once did silently."""
    setting = 'client_test = "class_matched"\n' + (f"eval_mode = {eval_mode}\n" if eval_mode else "")
    planned = select_runs([write_recipe(TINY_RECIPE.replace("targets = [50]\n", f"targets = [50]\n{setting}"))])
    expected = (
        "client_test = 'class_matched' does nothing under eval_mode = 'global' (only the global model is scored, on "
        "the global test set); set eval_mode = 'personal' or 'both' to score each client on its own test set"
    )
    assert preflight(planned) == ([expected] if warned else [])  # once, for the batch's two methods
