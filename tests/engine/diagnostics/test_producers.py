"""The engine's per-round diagnostics (``fedbench.engine.diagnostics``): the producers' table, the layers of a model
over its flat vector, FedImpro's layer-wise weight divergence, the clients' validation losses from personal evaluation,
and the rounds that record them. That they never change training, for every method, is the engine contract's
``diagnostics`` property (tests/execution/contract/test_builtin_methods.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from conftest import ListSink
from fedbench.algorithms.context import ClientUpdate
from fedbench.engine import EngineOptions, run
from fedbench.engine.diagnostics.divergence import layer_slices, weight_divergence
from fedbench.engine.loop import client_schedule
from fedbench.execution.contract import contract_spec


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
        self.head = nn.Linear(2, 1, bias=False)


def test_a_layer_is_a_module_holding_parameters_in_flat_vector_order():
    assert layer_slices(Net()) == [("body.0", 0, 8), ("body.1", 8, 12), ("head", 12, 14)]


def test_weight_divergence_is_the_per_layer_distance_of_each_client_to_the_aggregate():
    """FedImpro §5.1: (1/|S|) Σ_i ‖θ̄ − θ_i‖, here per layer."""
    layers = [("a", 0, 2), ("b", 2, 3)]
    global_params = torch.tensor([3.0, 4.0, 1.0])
    updates = [
        ClientUpdate(7, torch.tensor([3.0, 4.0, 3.0]), {}, 1, 1, 0.0),  # distance (0, 2)
        ClientUpdate(1, torch.tensor([0.0, 0.0, 1.0]), {}, 1, 1, 0.0),  # distance (5, 0)
    ]
    value = weight_divergence(layers, updates, global_params)
    assert value == {
        "layers": ["a", "b"],
        "clients": [7, 1],
        "distance": [[0.0, 2.0], [5.0, 0.0]],
        "mean": [2.5, 1.0],
        "global_norm": [5.0, 1.0],
    }


def test_a_run_records_the_diagnostics_asked_on_the_rounds_asked(tmp_path):
    spec = contract_spec(
        "fedavg", rounds=4, diagnostics=["weight_divergence", "val_loss"], diagnostics_every=3, eval_every=2
    )
    sink = ListSink()
    assert run(spec, sink, EngineOptions(checkpoint_path=tmp_path / "c.pt")).status == "done"
    diagnosed = {r.round: r.diagnostics for r in sink.records if r.diagnostics is not None}
    assert sorted(diagnosed) == [3, 4]  # every 3rd round and the last
    assert "val_loss" not in diagnosed[3]  # round 3 is not evaluated: no validation pass to read the loss from
    divergence = diagnosed[3]["weight_divergence"]
    assert divergence["layers"] == ["encoder.1", "classifier"]  # the MLP's hidden and output layers
    assert divergence["clients"] == client_schedule(spec)[2]
    for row in divergence["distance"]:
        assert len(row) == len(divergence["layers"]) and all(v > 0 for v in row)
    assert all(
        math.isclose(m, sum(col) / len(col), rel_tol=1e-5)
        for m, col in zip(divergence["mean"], zip(*divergence["distance"]))
    )
    val = diagnosed[4]["val_loss"]
    assert val["clients"] == list(range(spec.num_clients)) and all(v > 0 for v in val["loss"])
    assert math.isclose(val["mean"], sum(val["loss"]) / len(val["loss"]), rel_tol=1e-5)


def test_personal_divergence_is_each_clients_own_model_against_the_global_one(tmp_path):
    """LG-Mix Fig. 3: per layer ‖w_c − u‖ of every client's own model; FedAvg evaluates clients with u itself."""
    found = {}
    for algorithm in ("fedavg", "lgmix"):
        spec = contract_spec(algorithm, rounds=2, diagnostics=["personal_divergence"])
        sink = ListSink()
        assert run(spec, sink, EngineOptions(checkpoint_path=tmp_path / f"{algorithm}.pt")).status == "done"
        found[algorithm] = sink.records[-1].diagnostics["personal_divergence"]
        assert found[algorithm]["clients"] == list(range(spec.num_clients))
    assert all(v == 0 for row in found["fedavg"]["distance"] for v in row)
    assert all(v > 0 for row in found["lgmix"]["distance"] for v in row)  # personalised in every layer


# ------------------------------------------------------------------------------------------- which diagnostics
def test_a_method_diagnostic_the_method_does_not_report_is_refused_when_the_run_starts():
    from fedbench.algorithms import build_algorithm
    from fedbench.engine.diagnostics import check_diagnostics
    from fedbench.errors import ConfigError

    asked = contract_spec("fedavg", diagnostics=["mixing_weights"])
    with pytest.raises(
        ConfigError,
        match=r"^diagnostic 'mixing_weights' is reported by the method, and fedavg does not report it "
        r"\(methods that do: those whose reported_diagnostics names it, e.g. lgmix, apfl\)$",
    ):
        check_diagnostics(asked, build_algorithm("fedavg", {}))
    check_diagnostics(contract_spec("lgmix", diagnostics=["mixing_weights"]), build_algorithm("lgmix", {}))
    engine_and_evaluation = contract_spec("fedavg", diagnostics=["weight_divergence", "personal_divergence"])
    check_diagnostics(engine_and_evaluation, build_algorithm("fedavg", {}))  # not the method's: never refused
    # the task and the model not given: the needs they decide are not judged
    features = contract_spec("fedavg", diagnostics=["feature_snapshot", "feature_stats"])
    check_diagnostics(features, build_algorithm("fedavg", {}))
    check_diagnostics(features, build_algorithm("fedavg", {}), "classification")
    with pytest.raises(ConfigError, match="^diagnostic 'feature_snapshot' reads FedModel.features"):
        check_diagnostics(features, build_algorithm("fedavg", {}), None, nn.Linear(2, 2))


FEATURES = ("feature_snapshot", "feature_stats")  # the engine's, from the round's models: every setting has them


@pytest.mark.parametrize(
    "algorithm,eval_mode,val_fraction,expected",
    [
        ("fedavg", "global", 0.0, ("weight_divergence", *FEATURES)),
        ("fedavg", "personal", 0.0, ("weight_divergence", "personal_divergence", *FEATURES, "activations")),
        ("fedavg", "both", 0.2, ("weight_divergence", "val_loss", "personal_divergence", *FEATURES, "activations")),
        ("lgmix", "global", 0.0, ("weight_divergence", "mixing_weights", *FEATURES)),
        (
            "lgmix",
            "personal",
            0.2,
            ("weight_divergence", "val_loss", "personal_divergence", "mixing_weights", *FEATURES, "activations"),
        ),
    ],
)
def test_the_diagnostics_a_setting_can_record(algorithm, eval_mode, val_fraction, expected):
    """The engine's always; personal evaluation's where the spec evaluates personally (val_loss also needs a
    validation split); the method's only where the method reports it. In the catalogue's order."""
    from fedbench.engine.diagnostics import diagnostics_of

    spec = contract_spec(algorithm, eval_mode=eval_mode, client_val_fraction=val_fraction)
    assert diagnostics_of(spec) == expected


def test_values_are_stored_to_six_significant_digits():
    from fedbench.engine.diagnostics.validation import val_loss

    assert val_loss([1 / 3, 2 / 3, 123456.789]) == {
        "clients": [0, 1, 2],
        "loss": [0.333333, 0.666667, 123457.0],
        "mean": 41152.6,
    }
    assert val_loss([]) == {"clients": [], "loss": [], "mean": None}


def test_the_method_is_asked_for_exactly_the_diagnostics_it_reports_among_those_asked():
    import types

    from fedbench.algorithms.base import Algorithm
    from fedbench.engine.diagnostics import round_diagnostics
    from fedbench.engine.diagnostics.base import Aggregated

    class Mixing(Algorithm):
        reported_diagnostics = frozenset({"mixing_weights"})

        def __init__(self):
            self.asked = []

        def round_diagnostics(self, names, server, contexts):
            self.asked.append(set(names))
            return {name: {"asked": True} for name in names}

    server = types.SimpleNamespace(params=torch.tensor([1.0, 2.0]))
    updates = [ClientUpdate(0, torch.tensor([1.0, 0.0]), {}, 1, 1, 0.0)]
    layers = [("a", 0, 2)]

    class Silent(Mixing):
        reported_diagnostics = frozenset()  # its hook would answer, but it reports none: never asked

    method = Silent()
    out = round_diagnostics(
        Aggregated(types.SimpleNamespace(diagnostics=["mixing_weights"]), None, method, layers, server, updates, [])
    )  # type: ignore[arg-type]
    assert method.asked == [] and out == {}
    for asked, called, keys in (
        (["weight_divergence"], [], ["weight_divergence"]),
        (["mixing_weights"], [{"mixing_weights"}], ["mixing_weights"]),
        (["weight_divergence", "mixing_weights"], [{"mixing_weights"}], ["weight_divergence", "mixing_weights"]),
    ):
        method = Mixing()
        spec = types.SimpleNamespace(diagnostics=asked)
        out = round_diagnostics(Aggregated(spec, None, method, layers, server, updates, []))  # type: ignore[arg-type]
        assert method.asked == called and sorted(out) == sorted(keys)


# ------------------------------------------------------------------------------------------- the producers' table
def test_the_producers_are_keyed_exactly_by_the_catalogue_each_where_its_entry_says():
    from fedbench.engine.diagnostics import PRODUCERS
    from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES, DIAGNOSTICS

    assert list(PRODUCERS) == list(DIAGNOSTIC_NAMES)  # one producer per entry, none of another name
    with pytest.raises(dataclasses.FrozenInstanceError):  # a table read by every run: nothing rebinds a producer
        PRODUCERS[DIAGNOSTIC_NAMES[0]].after_aggregation = None  # type: ignore[misc]
    for name, producer in PRODUCERS.items():
        in_evaluation = DIAGNOSTICS[name].source == "evaluation"
        assert (producer.in_evaluation is not None) == in_evaluation, name
        assert (producer.after_aggregation is not None) != in_evaluation, name


def test_what_a_producer_sees_it_cannot_rebind():
    """The round and the client evaluation a producer reads are frozen: a producer only reads."""
    from fedbench.engine.diagnostics.base import Aggregated, Evaluated

    aggregated = Aggregated(None, None, None, [], None, [], [])  # type: ignore[arg-type]
    evaluated = Evaluated(0, nn.Linear(1, 1), torch.zeros(0), torch.zeros(0), 1, None)
    for seen, field in ((aggregated, "updates"), (evaluated, "val_loss")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(seen, field, None)


def _typed_keys(value, typed, where: str) -> list[str]:
    """Where ``value`` (a stored JSON object) lacks a required key of the TypedDict ``typed`` or has one it does not
    declare, nested TypedDicts included."""
    from typing import get_type_hints, is_typeddict

    problems = []
    keys = set(value)
    if not typed.__required_keys__ <= keys or not keys <= typed.__required_keys__ | typed.__optional_keys__:
        problems.append(f"{where}: keys {sorted(keys)}, {typed.__name__} declares {sorted(get_type_hints(typed))}")
    for key, hint in get_type_hints(typed).items():
        if is_typeddict(hint) and key in value:
            problems += _typed_keys(value[key], hint, f"{where}.{key}")
    return problems


def test_every_value_a_run_stores_has_the_keys_of_its_catalogued_type(tmp_path):
    """Every diagnostic at once, on a method that reports its own (LG-Mix): each round's stored value (through JSON,
    as the registry holds it) has exactly the keys of the catalogue's TypedDict."""
    import json

    from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES, DIAGNOSTICS

    spec = contract_spec(
        "lgmix", rounds=2, eval_mode="both", client_val_fraction=0.2, diagnostics=list(DIAGNOSTIC_NAMES)
    )
    sink = ListSink()
    assert run(spec, sink, EngineOptions()).status == "done"
    problems = []
    for record in sink.records:
        stored = json.loads(json.dumps(record.diagnostics))
        assert set(stored) == set(DIAGNOSTIC_NAMES), record.round  # every one
        for name, value in stored.items():
            problems += _typed_keys(value, DIAGNOSTICS[name].value, f"round {record.round} {name}")
    assert not problems, "\n".join(problems)


def test_personal_evaluation_shows_each_collector_every_client_with_its_validation_loss_or_none(monkeypatch):
    """A collector sees every client once per evaluated round, its validation loss where the spec has validation
    splits and None where it has none; what it returns is what the round stores."""
    from fedbench.engine.diagnostics import PRODUCERS
    from fedbench.engine.diagnostics.base import Producer

    seen = []

    class Recorder:
        def __init__(self, run):
            self.clients = []

        def add(self, client):
            seen.append(client.val_loss)
            self.clients.append(client.client)

        def value(self):
            return {"clients": self.clients}

    monkeypatch.setitem(PRODUCERS, "activations", Producer(in_evaluation=Recorder))
    for fraction, validated in ((0.0, False), (0.2, True)):
        seen.clear()
        spec = contract_spec(
            "fedavg", rounds=1, eval_mode="personal", client_val_fraction=fraction, diagnostics=["activations"]
        )
        sink = ListSink()
        run(spec, sink, EngineOptions())
        (record,) = sink.records
        assert record.diagnostics == {"activations": {"clients": list(range(spec.num_clients))}}
        assert len(seen) == spec.num_clients
        assert all(isinstance(v, float) for v in seen) if validated else all(v is None for v in seen)
