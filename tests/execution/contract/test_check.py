"""``check_method`` (``fedbench.execution.contract.check``): the runs' options, each result heard as it is done, bad
input as one line, results as values and JSON."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.errors import ConfigError
from fedbench.execution.contract.check import PropertyResult, check_method
from fedbench.execution.contract.properties import (
    PROPERTIES,
)
from fedbench.execution.contract.setting import contract_spec


def register(monkeypatch, name: str, cls: type, **info) -> str:
    """A test-only method, registered for one test (as a plug-in registers, with its info)."""
    monkeypatch.setitem(ALGORITHMS._entries, name, cls)
    monkeypatch.setitem(ALGORITHMS._info, name, {"papers": ("tests",), "params": cls.Params, **info})
    return name


def check(name: str, *properties: str, **setup) -> dict[str, object]:
    results = check_method(contract_spec(name, **setup), properties or None)
    assert [r.name for r in results] == list(properties or PROPERTIES)
    return {r.name: r for r in results}


def test_the_checks_train_on_the_cpu_with_the_callers_data_options_and_one_thread_by_default(monkeypatch):
    """The caller's data root and verification reach the runs (nothing else of theirs); the runs use ``threads``
    threads (1 unless told) and leave the process's setting as it was."""
    from fedbench.execution.contract import runs

    seen = []

    def set_up(spec, options):  # the preflight's set-up: stop there
        seen.append((options.settings.data_root, options.settings.verify, options.device, torch.get_num_threads()))
        raise ConfigError("stop")

    monkeypatch.setattr(runs, "set_up", set_up)
    before = torch.get_num_threads()
    for kwargs in ({}, {"data_root": "/data", "verify": False, "threads": 2}):
        with pytest.raises(ConfigError, match="^stop$"):
            check_method(contract_spec("fedavg"), ["evaluation"], **kwargs)
        assert torch.get_num_threads() == before
    assert seen == [(None, True, "cpu", 1), ("/data", False, "cpu", 2)]


def test_each_result_is_heard_as_it_is_done_and_times_its_own_check():
    heard = []
    began = time.perf_counter()
    results = check_method(
        contract_spec("fedavg", rounds=1, num_clients=1), ["resume", "empty-client"], on_result=heard.append
    )
    took = time.perf_counter() - began
    assert heard == results
    assert [(r.status, r.detail) for r in results] == [
        ("skip", "needs 2 rounds or more (--rounds)"),
        ("skip", "needs 2 clients or more (--clients)"),
    ]
    assert all(0 <= r.seconds <= took for r in results)


def test_a_result_and_a_property_are_values_nobody_changes():
    result = PropertyResult("resume", "t", "pass", "d", 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "fail"
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROPERTIES["resume"].check = lambda checker: "pass"
    assert len({result, PropertyResult("resume", "t", "pass", "d", 0.0)}) == 1  # hashable, equal by value


def test_an_unknown_property_is_a_config_error_naming_the_properties():
    with pytest.raises(ConfigError, match="^unknown property 'speed'; expected one of evaluation, keyed-streams"):
        check_method(contract_spec("fedavg"), ["speed"])


def test_a_model_the_method_cannot_take_is_the_callers_error():
    with pytest.raises(ConfigError, match="dot_regression needs a fixed etf classifier"):
        check_method(contract_spec("dot_regression"), ["evaluation"])


def test_a_result_has_failed_only_when_its_property_fails():

    assert [PropertyResult("resume", "t", status, "", 0.0).failed for status in ("pass", "skip", "fail")] == [
        False,
        False,
        True,
    ]


def test_a_result_reads_as_one_json_object():
    """``check-method --json`` writes each result as this object: the property, its title, status, detail and the
    seconds it took (to the millisecond)."""
    assert PropertyResult("resume", "t", "pass", "d", 1.23456).as_dict() == {
        "property": "resume",
        "title": "t",
        "status": "pass",
        "detail": "d",
        "seconds": 1.235,
    }
