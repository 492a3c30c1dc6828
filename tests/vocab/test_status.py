"""Run statuses: the values are the strings the registry stores, and the groups partition them as the claim loop,
the batch and the report read them."""

from __future__ import annotations

import json

from fedbench.vocab.status import CLAIMABLE, ENDED, FINISHED, WAITING, RunStatus


def test_statuses_are_the_stored_strings():
    assert [s.value for s in RunStatus] == ["pending", "running", "done", "diverged", "failed", "interrupted"]
    assert RunStatus.DONE == "done" and json.dumps(RunStatus.DIVERGED) == '"diverged"'
    assert RunStatus("failed") is RunStatus.FAILED


def test_groups():
    assert set(FINISHED) == {RunStatus.DONE, RunStatus.DIVERGED}
    # a worker never claims a finished run, and a batch never waits for one
    assert not set(FINISHED) & set(CLAIMABLE) and not set(FINISHED) & set(WAITING)
    assert RunStatus.RUNNING not in CLAIMABLE  # only through a dead holder's stale claim
    assert set(ENDED) | {RunStatus.PENDING, RunStatus.RUNNING} == set(RunStatus)
    assert RunStatus.FAILED in ENDED and RunStatus.FAILED not in WAITING  # no retry loop inside one batch
