"""``fedbench.algorithms.base``, the hooks every method shares: the weighted average and its client weights, the
scoped training of a parameter subset, ``model_outputs``, and each Table VIII method's attaching FLOPs."""

from __future__ import annotations

import pytest
import torch

from fedbench.algorithms.base import weighted_average
from global_formula_fixtures import algorithm_flops
from pfl_formula_fixtures import etf_model


@pytest.mark.usefixtures("linear_model")
def test_weighted_average_of_identical_vectors_is_exact():
    v = torch.randn(1000)
    weights = torch.tensor([211.0, 263.0, 496.0], dtype=torch.float64)
    assert torch.equal(weighted_average([v, v.clone(), v.clone()], weights / weights.sum()), v)


@pytest.mark.parametrize("method", ["fedavg", "fedprox", "feddyn", "scaffold"])
@pytest.mark.usefixtures("linear_model", "float64")
def test_the_server_average_weights_clients_by_samples_or_uniformly_as_the_spec_says(method):
    """Three clients holding 1, 3 and 6 samples send w_k = 0, 10 and 20 in every coordinate: weighted by samples
    (FedAvg Eq. 1, every paper's default) the average is (0 + 30 + 120) / 10 = 15; weighted uniformly
    (PersonalizedFL's client_weights = 1/n) it is 10. Methods with a server step of their own take the same weights."""
    from algorithm_fixtures import LINEAR, LinearModel, fresh_server, make_spec
    from fedbench.algorithms import build_algorithm
    from fedbench.algorithms.context import ClientUpdate

    averages = {}
    for weighting in ("samples", "uniform"):
        spec = make_spec(method, model=LINEAR, num_clients=3, clients_per_round=3, client_weighting=weighting)
        algorithm = build_algorithm(method, {})
        model = LinearModel(2, (3,))
        algorithm.bind_model(spec, model, (3,), 2)
        server = fresh_server(model)
        algorithm.init_server(server)
        updates = [
            ClientUpdate(k, torch.full_like(server.params, value), {}, size, 1, 0.0)
            for k, (value, size) in enumerate([(0.0, 1), (10.0, 3), (20.0, 6)])
        ]
        for update in updates:  # SCAFFOLD's Δc_i, which moves its control variate, not the model
            update.extra["control_delta"] = torch.zeros_like(server.params)
        weights = algorithm.aggregation_weights(updates)
        averages[weighting] = weights.tolist()
        if method != "feddyn":  # the plain average (SCAFFOLD's at η_g = 1); FedDyn's moves by its h / α
            algorithm.aggregate(server, updates, 1)
            assert torch.allclose(
                server.params, torch.full_like(server.params, 15.0 if weighting == "samples" else 10.0)
            )
    assert averages == {"samples": pytest.approx([0.1, 0.3, 0.6]), "uniform": pytest.approx([1 / 3] * 3)}


def test_client_weighting_keeps_the_hash_of_every_earlier_spec_at_its_default():
    from algorithm_fixtures import make_spec

    spec = make_spec("fedavg")
    assert "client_weighting" not in spec.canonical_json()
    assert make_spec("fedavg", client_weighting="samples").spec_hash == spec.spec_hash
    assert make_spec("fedavg", client_weighting="uniform").spec_hash != spec.spec_hash


# ------------------------------------------------------------------------------------------- cost formulas
@pytest.mark.usefixtures("linear_model", "float64")
def test_attaching_flops_of_every_table_viii_method():
    """Table VIII with K = 5, M = 50, n = 250, |w| = 1000, FP = 300: FedProx 2K|w|, FedDyn and FedTrip 4K|w|,
    MOON K·M·(1+p)·FP, SCAFFOLD 2(K+1)|w| (option II), FedAvg and SlowMo 0."""
    K, M, w, FP = 5, 50, 1000, 300.0
    expected = {
        "fedavg": 0,
        "slowmo": 0,
        "fedprox": 2 * K * w,
        "feddyn": 4 * K * w,
        "fedtrip": 4 * K * w,
        "moon": K * M * 2 * FP,
        "scaffold": 2 * (K + 1) * w,
    }
    assert {name: algorithm_flops(name) for name in expected} == expected


def test_only_trainable_scopes_the_trained_parameters_and_keeps_frozen_ones_frozen():
    """Inside the block only the named parameters train; a parameter frozen before (a fixed ETF classifier) stays
    frozen unless ``respect_frozen=False``; every flag comes back afterwards."""
    from fedbench.algorithms.base import only_trainable

    model = etf_model()
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    assert flags["classifier.weight"] is False and flags["encoder.1.weight"] is True
    with only_trainable(model, ["classifier.weight", "encoder.1.weight"]):
        assert {n for n, p in model.named_parameters() if p.requires_grad} == {"encoder.1.weight"}
    assert {name: p.requires_grad for name, p in model.named_parameters()} == flags
    with only_trainable(model, ["classifier.weight"], respect_frozen=False):
        assert {n for n, p in model.named_parameters() if p.requires_grad} == {"classifier.weight"}
    assert {name: p.requires_grad for name, p in model.named_parameters()} == flags


def test_model_outputs_needs_both_halves_of_the_split():
    """(logits, penultimate features) for a model with ``features`` and ``head``; a model with only one of them (a
    torchvision VGG has a ``features`` block but no ``head``) is run whole and has no penultimate features."""
    from fedbench.algorithms.base import model_outputs

    vgg_like = torch.nn.Sequential()
    vgg_like.features = torch.nn.Linear(3, 3)
    x = torch.randn(2, 3)
    logits, features = model_outputs(vgg_like, x)
    assert features is None and torch.equal(logits, vgg_like(x))


def test_a_method_reports_only_the_method_diagnostics_it_declares():
    """``reported_diagnostics`` is what a spec may ask a method for: a frozenset of diagnostics of source "method"
    (never an engine one), empty unless the method declares them, so a spec asking FedAvg for LG-Mix's mixing
    weights is refused when the run starts."""
    from algorithm_fixtures import make_spec
    from fedbench.algorithms import ALGORITHMS, build_algorithm
    from fedbench.algorithms.base import Algorithm
    from fedbench.engine.diagnostics import check_diagnostics
    from fedbench.errors import ConfigError
    from fedbench.vocab.diagnostics import DIAGNOSTICS

    assert Algorithm.reported_diagnostics == frozenset()
    for name in ALGORITHMS.names():
        declared = build_algorithm(name, {}).reported_diagnostics
        assert isinstance(declared, frozenset), name
        assert all(DIAGNOSTICS[d].source == "method" for d in declared), name
    spec = make_spec("fedavg", diagnostics=("mixing_weights",))
    with pytest.raises(ConfigError, match="diagnostic 'mixing_weights' is reported by the method, and fedavg does not"):
        check_diagnostics(spec, build_algorithm("fedavg", {}))


def test_mixing_weights_are_those_of_the_round_s_clients_that_hold_one():
    from types import SimpleNamespace

    from fedbench.algorithms.base import mixing_weights

    contexts = [
        SimpleNamespace(client_id=3, state={"lambda": torch.tensor(0.25)}),
        SimpleNamespace(client_id=5, state={}),  # took no step: holds no weight
        SimpleNamespace(client_id=7, state={"lambda": 0.75}),
    ]
    assert mixing_weights(contexts, "lambda", "λ") == {"clients": [3, 7], "weight": [0.25, 0.75], "symbol": "λ"}
