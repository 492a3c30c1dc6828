"""Progress events (``fedbench/execution/events.py``): plain, frozen, picklable data — a local worker process puts
them on a queue for its parent, and every executor emits the same ones."""

from __future__ import annotations

import dataclasses
import pickle
import typing

import pytest

from fedbench.execution.events import Event, Note, RoundDone, RunEnded, RunStarted, RunWarning

EVENTS = [
    RunStarted("abc", rounds=5),
    RoundDone("abc", round=2, test_acc=None, seconds=0.5),
    RoundDone("abc", round=3, test_acc=0.75, seconds=0.25),
    RunWarning("abc", "checkpoint not used"),
    RunEnded("abc", "failed", error="ValueError: x", final=None),
    Note("2 jobs submitted"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_an_event_crosses_a_process_boundary_unchanged_and_cannot_change(event):
    assert pickle.loads(pickle.dumps(event)) == event
    field = dataclasses.fields(event)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, field, "other")


def test_a_run_ends_without_error_or_final_figure_unless_given():
    ended = RunEnded("abc", "done")
    assert (ended.error, ended.final) == (None, None)
    assert RunEnded("abc", "done", final=0.5) != ended  # events compare by value


def test_event_is_exactly_the_five_kinds():
    assert set(typing.get_args(Event)) == {RunStarted, RoundDone, RunWarning, RunEnded, Note}
