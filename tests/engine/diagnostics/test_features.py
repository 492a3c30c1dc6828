"""The feature diagnostics (``fedbench.engine.diagnostics.features``): FedDr+'s observed/unobserved-class statistics of
each sampled client's local model against the global model it started from (Figs. 2–5), and LG-Mix's last-layer
activations of each client's own model (Fig. 2(b)). Checked against values computed here independently, on a round
trained by hand; that recording them never changes training is the engine contract's ``diagnostics`` property, run
for every method (tests/execution/contract/test_builtin_methods.py), and checked bit for bit below as well."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from conftest import ListSink, float64_mode
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientUpdate, load_weights
from fedbench.engine import EngineOptions, run
from fedbench.engine.diagnostics import check_diagnostics, diagnostics_of
from fedbench.engine.diagnostics import features as feature_producers
from fedbench.engine.diagnostics.base import DIGITS
from fedbench.engine.diagnostics.features import (
    QUANTILES,
    QUANTITIES,
    SPLITS,
    activation_summary,
    feature_stats,
    features_and_logits,
    sample_indices,
)
from fedbench.engine.loop import resume, set_up
from fedbench.errors import ConfigError
from fedbench.execution.contract import contract_spec
from fedbench.models.base import FedModel
from fedbench.seeding import numpy_rng

STORED = 0.5 * 10 ** (1 - DIGITS)  # the relative error of a value stored to DIGITS significant digits


def trained_round(spec, round_index: int = 1):
    """Round ``round_index``'s sampled clients trained from w^0 as the loop trains them: (training, updates, their
    contexts)."""
    training = set_up(spec, EngineOptions())
    state, algorithm = training.state, training.algorithm
    payload = algorithm.payload(state.server, round_index)
    updates, contexts = [], []
    for client in training.schedule[round_index - 1]:
        ctx = state.client_context(algorithm, client, round_index, lr=spec.optimizer.lr, payload=payload)
        updates.append(algorithm.local_train(ctx))
        contexts.append(ctx)
    return training, updates, contexts


@pytest.fixture(scope="module")
def round_one():
    """Round 1 trained in float64: the engine's batched passes and this file's whole-set passes then agree to far
    below the stored 6 significant digits, and no near tie of two logits can flip a prediction between them."""
    spec = contract_spec("fedavg", diagnostics=["feature_stats"], partition_params={"alpha": 0.1, "min_size": 20})
    with pytest.MonkeyPatch.context() as patch, float64_mode(patch):
        training, updates, contexts = trained_round(spec)
        return spec, training, updates, contexts, feature_stats(spec, updates, contexts, 1000)


def test_observed_classes_are_the_classes_of_the_samples_the_client_trained_on(round_one):
    spec, training, updates, contexts, value = round_one
    data = training.state.data
    test_y = data.tensors.test_y[sample_indices(spec, len(data.tensors.test_y))]
    assert value["clients"] == [u.client_id for u in updates]
    assert value["test_points"] == len(test_y)
    for k, client in enumerate(value["clients"]):
        classes = set(data.tensors.train_y[data.client_train[client]].tolist())
        assert value["observed_classes"][k] == len(classes)
        in_observed = sum(int(label) in classes for label in test_y.tolist())
        assert value["observed"]["count"][k] == in_observed
        assert value["unobserved"]["count"][k] == len(test_y) - in_observed
    # a Dirichlet(0.1) split leaves some client without some class: the unobserved split is not empty everywhere
    assert any(value["unobserved"]["count"])


def test_accuracy_and_alignment_equal_those_computed_independently(round_one):
    """On O^i (and U^i): the share of the split's test points the uploaded model classifies right, and the mean
    cosine of its features to the classifier row of the true class; the gaps subtract the global model's."""
    spec, training, updates, contexts, value = round_one
    state = training.state
    chosen = sample_indices(spec, len(state.data.tensors.test_y))
    x, y = state.data.tensors.test_x[chosen], state.data.tensors.test_y[chosen]
    model = state.model
    load_weights(model, contexts[0].global_params, contexts[0].global_buffers)
    with torch.no_grad():
        global_correct = (model(x).argmax(1) == y).double()
        global_cos = torch.nn.functional.cosine_similarity(model.features(x), model.classifier.weight[y], dim=1)
    for k, (update, ctx) in enumerate(zip(updates, contexts)):
        load_weights(model, update.params, update.buffers)
        observed = torch.unique(state.data.tensors.train_y[ctx.indices])
        with torch.no_grad():
            correct = (model(x).argmax(1) == y).double()
            cos = torch.nn.functional.cosine_similarity(model.features(x), model.classifier.weight[y], dim=1)
        for split, mask in zip(SPLITS, (torch.isin(y, observed), ~torch.isin(y, observed))):
            if not mask.any():
                assert value[split]["accuracy"][k] is None and value[split]["alignment"][k] is None
                continue
            # stored to DIGITS = 6 significant digits: within half a unit of the 6th, 5e-6 of the value
            assert value[split]["accuracy"][k] == pytest.approx(float(correct[mask].mean()), rel=STORED)
            gap = float((correct - global_correct)[mask].mean())
            assert value[split]["accuracy_gap"][k] == pytest.approx(gap, rel=STORED, abs=1e-12)
            assert value[split]["alignment"][k] == pytest.approx(float(cos[mask].mean()), rel=STORED)
            gap = float((cos - global_cos)[mask].mean())
            assert value[split]["alignment_gap"][k] == pytest.approx(gap, rel=STORED, abs=1e-12)


def test_the_mean_is_over_the_sampled_clients_with_points_of_the_split(round_one):
    value = round_one[4]
    for split in SPLITS:
        for quantity in QUANTITIES:
            present = [v for v in value[split][quantity] if v is not None]
            assert value["mean"][split][quantity] == pytest.approx(sum(present) / len(present), rel=1e-5)


def test_angles_are_radians_between_0_and_pi_and_distances_norms_are_nonnegative(round_one):
    value = round_one[4]
    for split in SPLITS:
        angles = [v for v in value[split]["angle"] if v is not None]
        assert angles and all(0 <= v <= math.pi for v in angles)
        assert all(v >= 0 for v in value[split]["distance"] if v is not None)
        assert all(v >= 0 for v in value[split]["norm"] if v is not None)
    assert any(v > 0 for v in value["observed"]["angle"])  # a round of training moves the features


def test_a_local_model_equal_to_the_global_one_is_at_distance_zero(round_one):
    """θ_r^i = θ_{r−1}^g: no feature distance, angle, norm difference, nor any gap."""
    spec, training, updates, contexts, _ = round_one
    unchanged = [
        ClientUpdate(u.client_id, ctx.global_params.clone(), dict(ctx.global_buffers), u.num_samples, 0, 0.0)
        for u, ctx in zip(updates, contexts)
    ]
    value = feature_stats(spec, unchanged, contexts, 1000)
    for split in SPLITS:
        for quantity in ("distance", "norm_gap", "accuracy_gap", "alignment_gap"):
            assert all(v == 0 for v in value[split][quantity] if v is not None), (split, quantity)
        assert all(v < 1e-3 for v in value[split]["angle"] if v is not None)  # arccos near 1: float32 rounding


def test_the_test_sample_is_bounded_fixed_and_drawn_from_its_own_stream(monkeypatch, round_one):
    spec, training, updates, contexts, _ = round_one
    assert torch.equal(sample_indices(spec, 50), torch.arange(50))  # a small test set: all of it
    # 2,000 points: CIFAR-100's 10,000 test points give ~200 of a client's 10 observed classes (shard s = 10)
    assert torch.equal(sample_indices(spec, 2000), torch.arange(2000)) and len(sample_indices(spec, 10_000)) == 2000
    monkeypatch.setattr(feature_producers, "FEATURE_SAMPLE", 100)
    chosen = sample_indices(spec, 5000)
    assert len(chosen) == 100 and len(set(chosen.tolist())) == 100 and bool((chosen.diff() > 0).all())
    assert torch.equal(chosen, sample_indices(spec, 5000))  # every round, every method of a seed: the same points
    assert not torch.equal(chosen, sample_indices(spec.model_copy(update={"seed": spec.seed + 1}), 5000))
    value = feature_stats(spec, updates, contexts, 1000)
    assert value["test_points"] == 100
    assert all(o + u == 100 for o, u in zip(value["observed"]["count"], value["unobserved"]["count"]))
    # bounded size: a few hundred bytes per sampled client, whatever the test set
    assert len(json.dumps(value)) < 200 + 400 * len(updates)


def test_the_test_sample_is_the_runs_feature_sample_stream(monkeypatch, round_one):
    """The sample is part of every recorded feature_stats value: it is the draw of the run seed's documented stream
    "feature-sample", as in every version, so rounds recorded before and after an upgrade (or a resume) are
    computed on the same test points."""
    spec = round_one[0]
    monkeypatch.setattr(feature_producers, "FEATURE_SAMPLE", 100)
    drawn = numpy_rng(spec.seed, "feature-sample").choice(5000, 100, replace=False)
    assert sample_indices(spec, 5000).tolist() == sorted(drawn.tolist())


def test_a_round_of_one_sampled_client_has_that_clients_statistics(round_one):
    """Each client's statistics depend on its own model and the global one only: a round that samples one client
    records what that client has in a round of several."""
    spec, _, updates, contexts, value = round_one
    with pytest.MonkeyPatch.context() as patch, float64_mode(patch):
        alone = feature_stats(spec, updates[:1], contexts[:1], 1000)
    assert alone["clients"] == value["clients"][:1] and alone["test_points"] == value["test_points"]
    for split in SPLITS:
        assert alone[split]["count"] == value[split]["count"][:1]
        for quantity in QUANTITIES:
            assert alone[split][quantity] == value[split][quantity][:1], (split, quantity)


class Identity(FedModel):
    """Features = the input (a feature map as large as one likes, built by hand)."""

    def __init__(self, width: int):
        super().__init__()
        self.encoder, self.classifier, self.feature_dim = torch.nn.Identity(), torch.nn.Identity(), width


@pytest.mark.parametrize("training", [True, False])
def test_features_and_logits_cover_every_point_in_batches_and_keep_the_models_mode(training):
    model = Identity(5).train(training)
    x = torch.randn(50, 5)
    features, logits = features_and_logits(model, x, batch_size=7)  # 8 batches, the last of 1 point
    assert torch.equal(features, x) and torch.equal(logits, x)
    assert model.training is training


def test_opposite_features_are_at_an_angle_of_pi_not_nan():
    """cos(f, −c·f) rounds to slightly below −1 in float64 for many f; the angle is still π, never arccos's NaN."""
    x, y = torch.randn(1000, 7, dtype=torch.float64), torch.zeros(1000, dtype=torch.long)
    local = feature_producers._Model(Identity(7), x, y, 1000)
    start = feature_producers._Model(Identity(7), -3 * x, y, 1000)
    assert bool((torch.nn.functional.cosine_similarity(local.features, start.features, dim=1) < -1).any())
    angles = feature_producers._per_point(local, start)["angle"]
    assert angles is not None and torch.allclose(angles, torch.full_like(angles, math.pi))


def test_a_head_that_is_not_one_linear_map_has_no_alignment(head_mlp):
    spec = contract_spec(
        "fedetf",
        model=head_mlp,
        model_params={"classifier": "fedetf"},
        optimizer={"lr": 0.5},
        diagnostics=["feature_stats"],
    )
    _, updates, contexts = trained_round(spec)
    value = feature_stats(spec, updates, contexts, 1000)
    assert all(v is None for v in value["observed"]["alignment"]) and value["mean"]["observed"]["alignment"] is None
    assert all(v is not None for v in value["observed"]["accuracy"])


def test_feature_stats_needs_class_labels():
    spec = contract_spec("fedavg", diagnostics=["feature_stats"])
    fedavg = build_algorithm("fedavg", {})
    check_diagnostics(spec, fedavg, "classification")
    message = (
        "^diagnostic 'feature_stats' tells the test points apart by class: dataset 'digits' is a segmentation task$"
    )
    with pytest.raises(ConfigError, match=message):  # the whole one-line error
        check_diagnostics(spec, fedavg, "segmentation")


# ------------------------------------------------------------------------ activations
def test_activation_summary_is_the_distribution_of_the_last_hidden_layer_values(round_one, monkeypatch):
    _, training, _, _, _ = round_one
    model, x = training.state.model, training.state.data.tensors.test_x[:50]
    features, _ = features_and_logits(model, x)
    values = features.double().flatten().numpy()
    summary = activation_summary(model, x, batch_size=7)  # batch by batch
    assert summary["mean"] == pytest.approx(values.mean(), rel=1e-5)
    assert summary["std"] == pytest.approx(values.std(), rel=1e-5)
    assert summary["zero_fraction"] == pytest.approx((values == 0).mean(), rel=1e-5)
    assert summary["quantiles"] == pytest.approx(list(np.quantile(values, QUANTILES)), rel=1e-5, abs=1e-9)
    assert summary["zero_fraction"] > 0 and summary["quantiles"][0] == 0  # after a ReLU
    # more values than QUANTILE_VALUES: the quantiles of every k-th, the moments still of all of them
    monkeypatch.setattr(feature_producers, "QUANTILE_VALUES", 100)
    strided = activation_summary(model, x, batch_size=7)
    step = -(-values.size // 100)
    assert strided["quantiles"] == pytest.approx(list(np.quantile(values[::step], QUANTILES)), rel=1e-5, abs=1e-9)
    assert strided["mean"] == summary["mean"] and strided["std"] == pytest.approx(summary["std"], rel=1e-5)
    one_by_one = activation_summary(model, x, batch_size=1)  # the batches change nothing, one point each too
    assert one_by_one["quantiles"] == pytest.approx(strided["quantiles"], rel=1e-4, abs=1e-7)  # float32 sums
    # a stride that does not divide a batch's values: every k-th of the whole set still, across the batches
    monkeypatch.setattr(feature_producers, "QUANTILE_VALUES", -(-values.size // 5))
    step = 5
    assert (7 * values.size // 50) % step != 0  # a batch of 7 points
    uneven = activation_summary(model, x, batch_size=7)
    assert uneven["quantiles"] == pytest.approx(list(np.quantile(values[::step], QUANTILES)), rel=1e-5, abs=1e-9)
    empty = {"mean": None, "std": None, "zero_fraction": None, "quantiles": None}
    assert activation_summary(model, x[:0]) == empty


def test_the_quantiles_of_a_large_feature_map_are_of_at_most_2_to_the_22_values():
    """A segmentation model's feature maps hold millions of values per test set: the quantiles are of every k-th
    (at most 4,194,304 of them, a bounded memory), the mean and std of all."""
    x = torch.zeros(5, 1_000_000)  # 5,000,000 values: every 2nd one is kept
    x[:, 1::2] = 1.0
    summary = activation_summary(Identity(1_000_000), x, batch_size=2)
    assert summary["quantiles"] == [0.0] * len(QUANTILES)  # the even positions only
    assert summary["mean"] == 0.5 and summary["zero_fraction"] == 0.5


def test_activations_are_each_clients_own_model_on_its_test_set_on_evaluated_diagnosed_rounds(tmp_path):
    spec = contract_spec("local", rounds=3, eval_every=2, diagnostics=["activations"])
    sink = ListSink()
    options = EngineOptions(checkpoint_path=tmp_path / "c.pt")
    assert run(spec, sink, options).status == "done"
    recorded = {r.round: (r.diagnostics or {}).get("activations") for r in sink.records}
    assert recorded[1] is None  # not evaluated: no personal evaluation pass to read
    value = recorded[3]
    assert value["clients"] == list(range(spec.num_clients)) and value["quantile_levels"] == list(QUANTILES)
    training = set_up(spec, options)  # back at the end of round 3, from its checkpoint
    assert resume(training, ListSink()) == 3
    ctx = training.state.client_context(training.algorithm, 2, 3, purpose="eval", lr=0.0)
    own = training.algorithm.eval_model(ctx)  # client 2's own (local-only) model
    x, _ = training.state.data.client_test_data(2)
    assert value["mean"][2] == activation_summary(own, x)["mean"]
    assert value["mean"][2] != value["mean"][1]  # another client, another model and test set


# ------------------------------------------------------------------------ never changing training
@pytest.mark.parametrize("algorithm", ["fedavg", "lgmix", "local"])
def test_recording_them_trains_bit_for_bit_as_without(tmp_path, algorithm):
    names = ["feature_stats", "activations"]
    spec = contract_spec(algorithm)
    assert set(names) <= set(diagnostics_of(spec))  # so the engine contract checks them for every method
    curves = []
    for diagnostics in ([], names):
        sink = ListSink()
        diagnosed = spec.model_copy(update={"diagnostics": tuple(diagnostics)})
        assert run(diagnosed, sink, EngineOptions(checkpoint_path=tmp_path / f"{len(diagnostics)}.pt")).status == "done"
        curves.append([(r.train_loss, r.test_acc, r.test_loss, r.personal_per_client) for r in sink.records])
        if diagnostics:
            assert all(set(names) <= set(r.diagnostics) for r in sink.records)
    assert curves[0] == curves[1]
