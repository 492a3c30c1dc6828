"""The contract's training runs (``fedbench.execution.contract.runs``): the sink, the dtype, the history of a run."""

from __future__ import annotations

import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.engine.loop import RoundRecord
from fedbench.execution.contract.check import check_method
from fedbench.execution.contract.properties import (
    PROPERTIES,
)
from fedbench.execution.contract.runs import Checker, _Run, _Sink
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


def test_the_sink_keeps_one_record_per_round_as_a_registry_does():
    def record(round_, loss):
        return RoundRecord(round=round_, train_loss=loss, wall_seconds=0.0, bytes_up=0, bytes_down=0)

    sink = _Sink()
    for round_, loss in [(1, 0.5), (2, 0.4), (3, 0.3)]:
        sink.log_round(record(round_, loss))
    sink.truncate(1)
    sink.log_round(record(2, 0.25))  # a resumed run redoes round 2
    sink.log_round(record(2, 0.2))  # and logs it again: the last one stays
    assert [(r.round, r.train_loss) for r in sink.records] == [(1, 0.5), (2, 0.2)]


def test_the_checks_runs_train_in_the_default_dtype_unless_asked_for_float64(tmp_path):
    checker = Checker(contract_spec("fedavg", rounds=1), tmp_path)
    assert checker.options.device == "cpu"
    assert checker.reference().server.params.dtype == torch.float32
    assert checker.train(checker.spec, float64=True).server.params.dtype == torch.float64


def test_a_run_trained_with_history_keeps_the_global_model_of_every_round_and_where_each_parameter_lies(tmp_path):
    checker = Checker(contract_spec("fedavg", rounds=3), tmp_path)
    run = checker.train(checker.spec, history=True)
    assert [r.round for r in run.records] == [1, 2, 3] and len(run.history) == 4  # w^0, then every round's
    assert torch.equal(run.history[-1].params, run.server.params) and run.history[-1].buffers == run.server.buffers
    assert all(not torch.equal(a.params, b.params) for a, b in zip(run.history, run.history[1:]))
    assert run.parameters == [
        ("encoder.1.weight", 0, 1024),
        ("encoder.1.bias", 1024, 1040),
        ("classifier.weight", 1040, 1200),
        ("classifier.bias", 1200, 1210),
    ]
    assert run.parameters[-1][2] == run.server.params.numel()
    assert torch.equal(run.history[0].params, checker.train(checker.spec, stop_after=1, history=True).history[0].params)
    stopped = checker.train(checker.spec, stop_after=2, history=True)  # a stop still stops, with the rounds it trained
    assert stopped.result is None and len(stopped.history) == 3
    assert torch.equal(stopped.history[2].params, run.history[2].params)
    plain = checker.train(checker.spec)
    assert (plain.history, plain.parameters) == ([], [])
    by_hand = _Run(None, [], plain.server, {})  # as the comparisons' tests build runs: no history unless given
    assert (by_hand.history, by_hand.parameters) == ([], [])
