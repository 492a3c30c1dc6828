"""Personalised evaluation and fine-tuning (fedbench/engine/personal.py) against hand computations: the extra
per-client metrics of a binary task counted by hand (sensitivity, specificity, balanced accuracy, macro F1, AUC by
pair counting), the segmentation metrics at the 0.5 thresholds, the primary figure of a client, the validation
accuracy of each client, the best-round rule of ``finetune.start``, the fine-tuning spec, which objective fine-tunes,
and which parameters fine-tuning moves; and on short runs, when fine-tuning is evaluated and that the validation split
is disjoint from the others."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from algorithm_fixtures import head_mlp, linear_model, run_until  # noqa: F401  (fixtures)
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ServerState, load_weights
from fedbench.data.federated import prepare_data
from fedbench.engine import personal, scores
from fedbench.engine.loop import init_model
from fedbench.errors import ConfigError
from fedbench.spec import OptimizerSpec, RunSpec, ScheduleSpec
from personal_run_fixtures import BASE as FOUR_CLIENTS  # the fine-tuning and validation tests: 4 clients, 2 rounds
from personal_run_fixtures import train as train_four_clients
from personal_run_fixtures import train_from

# A binary task: logits (0, s), so p(class 1) = sigmoid(s) and the prediction is 1 iff s > 0.
NEGATIVE_SCORES = [-2.0, -1.0, 0.5, 0.7]  # label 0: two right (TN = 2), two wrong (FP = 2)
POSITIVE_SCORES = [1.0, 2.0, -0.5]  # label 1: two right (TP = 2), one wrong (FN = 1)
SCORES = torch.tensor(NEGATIVE_SCORES + POSITIVE_SCORES, dtype=torch.float64)
LOGITS = torch.stack([torch.zeros_like(SCORES), SCORES], 1)
LABELS = torch.tensor([0] * 4 + [1] * 3)


def test_binary_metrics_by_hand():
    extra = personal.extra_metrics(
        ["auc", "balanced_accuracy", "sensitivity", "specificity", "f1", "dice"], LOGITS, LABELS
    )
    sensitivity, specificity = 2 / 3, 2 / 4  # TP/(TP+FN), TN/(TN+FP)
    assert extra["sensitivity"] == pytest.approx(sensitivity)
    assert extra["specificity"] == pytest.approx(specificity)
    assert extra["balanced_accuracy"] == pytest.approx((sensitivity + specificity) / 2)
    # F1 of class 1: precision 2/4, recall 2/3; of class 0: precision 2/3, recall 2/4 — both 4/7
    assert extra["f1"] == pytest.approx(4 / 7)
    # AUC = share of (positive, negative) pairs ranked right: 4 + 4 + 2 of 12
    pairs = sum(p > n for p in POSITIVE_SCORES for n in NEGATIVE_SCORES)
    assert pairs == 10 and extra["auc"] == pytest.approx(10 / 12)
    assert extra["dice"] is None  # a segmentation metric of a classification task


def test_metrics_of_an_empty_test_split_are_none_and_its_primary_figure_zero():
    empty = personal.extra_metrics(["auc", "f1", "sensitivity"], LOGITS[:0], LABELS[:0])
    assert empty == {"auc": None, "f1": None, "sensitivity": None}
    model = nn.Linear(2, 2).double()
    primary, extra = personal.client_scores(model, LOGITS[:0], LABELS[:0], ["f1"], batch_size=10)
    assert primary == 0.0 and extra == {"f1": None}
    masks = torch.zeros(0, 1, 2, 2)
    primary, extra = personal.client_scores(Identity(), masks, masks, ["dice"], batch_size=10, task="segmentation")
    assert primary == 0.0 and extra == {"dice": None}


class Identity(nn.Module):
    def forward(self, x):
        return x


def test_a_clients_primary_figure_is_its_accuracy_with_or_without_extra_metrics():
    for names in ([], ["f1"]):
        primary, extra = personal.client_scores(Identity(), LOGITS, LABELS, names, batch_size=3)
        assert primary == pytest.approx(4 / 7)  # TP + TN of 7
        assert set(extra) == set(names)


# One image, one channel of 4×4 pixels. The mask is the top-left 2×2 square; the model predicts (sigmoid > 0.5)
# two of its pixels. One more of them has logit exactly 0: sigmoid 0.5, not predicted.
MASK = torch.zeros(1, 1, 4, 4)
MASK[0, 0, :2, :2] = 1.0
SEG_LOGITS = torch.full((1, 1, 4, 4), -5.0)
SEG_LOGITS[0, 0, 0, :2] = 5.0
SEG_LOGITS[0, 0, 1, 0] = 0.0


def test_segmentation_metrics_threshold_the_prediction_and_the_mask_at_one_half():
    extra = personal.extra_metrics(["dice", "iou", "hausdorff", "auc"], SEG_LOGITS, MASK)
    assert extra["dice"] == pytest.approx(2 * 2 / (2 + 4))  # |P ∩ T| = 2, |P| = 2, |T| = 4
    assert extra["iou"] == pytest.approx(2 / 4)
    predicted = np.zeros((1, 1, 4, 4), bool)
    predicted[0, 0, 0, :2] = True
    assert extra["hausdorff"] == scores.hausdorff(predicted, MASK.numpy() > 0)
    assert extra["hausdorff"] > 0  # the unpredicted row of the mask is a pixel away
    assert extra["auc"] is None  # a classification metric of a segmentation task


def test_a_segmentation_clients_primary_figure_is_its_mean_dice():
    primary, extra = personal.client_scores(Identity(), SEG_LOGITS, MASK, ["iou"], batch_size=4, task="segmentation")
    assert primary == pytest.approx(2 / 3) and extra["iou"] == pytest.approx(1 / 2)


def test_predict_batches_and_an_empty_input():
    seen: list[int] = []
    model = nn.Linear(2, 2)
    model.register_forward_hook(lambda module, inputs, output: seen.append(len(inputs[0])))
    x = torch.zeros(1500, 2)
    assert personal.predict(model, x).shape == (1500, 2)
    assert seen == [1000, 500]
    model.train()
    assert personal.predict(model, x[:0]).shape == (0, 2) and model.training


# ------------------------------------------------------------------------------------ finetune.start
def start_rule(start: str | None):
    return SimpleNamespace(finetune=None if start is None else SimpleNamespace(start=start))


def record(round_index: int, test_acc: float | None, val: float | None = None):
    return SimpleNamespace(round=round_index, test_acc=test_acc, personal_val_mean=val)


def test_the_fine_tuning_start_is_the_first_round_reaching_the_best_value():
    server = ServerState(params=torch.zeros(3), buffers={"b": torch.ones(1)})
    spec = start_rule("best")
    kept = None
    for r, acc in [(1, 0.5), (2, 0.7), (3, 0.7), (4, 0.6), (5, None)]:
        server.params.fill_(r)
        kept = personal.track_finetune_start(spec, record(r, acc), server, kept)
    assert kept["round"] == 2 and kept["value"] == 0.7  # round 3 only ties it; round 5 has no figure
    assert torch.equal(kept["params"], torch.full((3,), 2.0))  # a copy taken then, not the live tensor
    assert torch.equal(kept["buffers"]["b"], torch.ones(1))
    by_validation = None
    for r, acc, val in [(1, 0.9, 0.2), (2, 0.1, 0.4)]:
        by_validation = personal.track_finetune_start(
            start_rule("best_val"), record(r, acc, val), server, by_validation
        )
    assert by_validation["round"] == 2  # the best validation figure, not the best test one
    for rule in (start_rule("final"), start_rule(None)):
        assert personal.track_finetune_start(rule, record(1, 0.9, 0.9), server, None) is None


def test_the_fine_tuning_spec():
    spec = RunSpec(
        algorithm="fedavg",
        dataset="digits",
        model="digits_mlp",
        client_test_fraction=0.2,
        local_steps=7,
        batch_size=32,
        lr_schedule={"name": "exponential", "gamma": 0.5},
        finetune={"epochs": 3, "lr": 0.02, "momentum": 0.5, "batch_size": 8},
    )
    tuned = personal.finetune_spec(spec)
    assert (tuned.local_epochs, tuned.local_steps, tuned.batch_size) == (3, None, 8)
    assert tuned.optimizer == OptimizerSpec(name="sgd", lr=0.02, momentum=0.5, weight_decay=spec.finetune.weight_decay)
    assert tuned.lr_schedule == ScheduleSpec()  # a constant lr
    no_batch = spec.model_copy(update={"finetune": spec.finetune.model_copy(update={"batch_size": None})})
    assert personal.finetune_spec(no_batch).batch_size == 32  # the run's own


def test_which_objective_fine_tunes_and_what_is_checked_when_the_run_starts(linear_model):  # noqa: F811
    spec = RunSpec(
        algorithm="dot_regression",
        dataset="digits",
        model=linear_model,
        client_test_fraction=0.2,
        finetune={"loss": "method"},
    )
    method = build_algorithm("dot_regression", {})
    assert personal.finetune_trainer(spec, method) is method
    plain = personal.finetune_trainer(
        spec.model_copy(update={"finetune": spec.finetune.model_copy(update={"loss": "ce"})}), method
    )
    assert type(plain).__name__ == "FedAvg"  # plain CE is FedAvg's objective
    model = init_model(spec, 10, (1, 8, 8), torch.device("cpu"))  # a linear classifier, not a fixed ETF one
    personal.check_finetune(spec, method, model)  # the method's own objective: checked when the run binds it
    dr = spec.model_copy(update={"finetune": spec.finetune.model_copy(update={"loss": "dr"})})
    with pytest.raises(ConfigError, match=r"^finetune\.loss = 'dr' needs a fixed etf classifier"):
        personal.check_finetune(dr, build_algorithm("fedavg", {}), model)


# ------------------------------------------------------------------------------------ engine runs
BASE = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 16},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 20},
    "num_clients": 3,
    "clients_per_round": 3,
    "rounds": 1,
    "local_steps": 2,
    "batch_size": 32,
    "optimizer": {"lr": 0.1},
    "eval_mode": "both",
    "client_test_fraction": 0.2,
}


def train(tmp_path, **overrides):
    return train_from(BASE, tmp_path, **overrides)


def accuracy_by_hand(spec: RunSpec, params: torch.Tensor, buffers, indices_of) -> list[float]:
    from fedbench.data.federated import prepare_data

    data = prepare_data(spec, torch.device("cpu"))
    model = init_model(spec, data.num_classes, data.input_shape, torch.device("cpu"))
    load_weights(model, params, buffers)
    model.eval()
    out = []
    for k in range(spec.num_clients):
        idx = indices_of(data, k)
        with torch.no_grad():
            right = (model(data.tensors.train_x[idx]).argmax(1) == data.tensors.train_y[idx]).sum()
        out.append(int(right) / len(idx))
    return out


def test_each_clients_validation_figure_is_its_accuracy_on_its_validation_split(tmp_path):
    spec, records, ckpt = train(tmp_path, algorithm="fedavg", client_val_fraction=0.2)
    server = ckpt["server"]
    expected = accuracy_by_hand(spec, server["params"], server["buffers"], lambda data, k: data.client_val[k])
    assert records[-1].personal_val_per_client == pytest.approx(expected)
    assert records[-1].personal_val_mean == pytest.approx(np.mean(expected))
    _, without, _ = train(tmp_path, algorithm="fedavg")
    assert without[-1].personal_val_mean is None and without[-1].personal_val_per_client is None


def spy_on_finetuned_models(monkeypatch) -> list[torch.Tensor]:
    """The parameters of the model each client is evaluated with after fine-tuning."""
    seen: list[torch.Tensor] = []
    evaluate = personal.evaluate

    def spy(model, x, y, *args, **kwargs):
        seen.append(nn.utils.parameters_to_vector(model.parameters()).detach().clone())
        return evaluate(model, x, y, *args, **kwargs)

    monkeypatch.setattr(personal, "evaluate", spy)
    return seen


@pytest.mark.parametrize("part", ["head", "body", "full"])
def test_fine_tuning_moves_only_its_part_from_the_start_model(tmp_path, monkeypatch, part):
    seen = spy_on_finetuned_models(monkeypatch)
    spec, records, ckpt = train(
        tmp_path, algorithm="fedavg", rounds=2, finetune={"epochs": 1, "lr": 0.5, "part": part, "start": "final"}
    )
    start = ckpt["server"]["params"]
    model = init_model(spec, 10, (1, 8, 8), torch.device("cpu"))
    head = torch.cat([torch.full((p.numel(),), n in model.head_parameter_names()) for n, p in model.named_parameters()])
    tuned = seen[-spec.num_clients :]  # the fine-tuned models (the evaluations before are the rounds')
    for params in tuned:
        moved = params != start
        assert moved[head].any() == (part in ("head", "full"))
        assert moved[~head].any() == (part in ("body", "full"))
    expected = [
        acc
        for k, params in enumerate(tuned)
        for acc in [accuracy_by_hand(spec, params, ckpt["server"]["buffers"], lambda data, j: data.client_test[j])[k]]
    ]
    assert records[-1].finetune_per_client == pytest.approx(expected)


@pytest.mark.parametrize(
    "algorithm", ["fedavgm", "fedadam", "fedyogi", "fedadagrad", "feddc", "fedsam", "mofedsam", "feddecorr"]
)
def test_any_global_method_is_evaluated_after_fine_tuning_its_final_global_model(tmp_path, monkeypatch, algorithm):
    """Fine-tuning is an evaluation option, not a method (the "+FT" rows of personalised-FL tables): with
    ``finetune`` every client starts from the method's own final global model (0 epochs: that model itself) and
    the fine-tuned figures are the last round's."""
    seen = spy_on_finetuned_models(monkeypatch)
    spec, records, ckpt = train(tmp_path, algorithm=algorithm, finetune={"epochs": 0, "start": "final"})
    for params in seen[-spec.num_clients :]:
        assert torch.equal(params, ckpt["server"]["params"])
    assert records[-1].finetune_per_client == records[-1].personal_per_client  # the same model, the same splits
    spec, records, ckpt = train(tmp_path, algorithm=algorithm, finetune={"epochs": 1, "lr": 0.1, "start": "final"})
    assert all(not torch.equal(params, ckpt["server"]["params"]) for params in seen[-spec.num_clients :])
    assert len(records[-1].finetune_per_client) == spec.num_clients and records[-1].finetune_mean is not None


def test_fine_tuning_starts_from_the_best_rounds_model(tmp_path, monkeypatch):
    seen = spy_on_finetuned_models(monkeypatch)
    spec, records, ckpt = train(
        tmp_path,
        algorithm="fedavg",
        rounds=4,
        optimizer={"lr": 1.5},
        finetune={"epochs": 1, "lr": 0.5, "part": "head", "start": "best"},
    )
    best = ckpt["finetune_start"]
    assert best["round"] < spec.rounds  # this run's last round is not its best (a large lr)
    model = init_model(spec, 10, (1, 8, 8), torch.device("cpu"))
    body = torch.cat([torch.full((p.numel(),), n in model.body_parameter_names()) for n, p in model.named_parameters()])
    for params in seen[-spec.num_clients :]:
        assert torch.equal(params[body], best["params"][body])  # the body is the best round's, untouched


def test_a_method_fine_tunes_with_its_own_round_payload(tmp_path):
    """``finetune.loss = "method"`` with SCAFFOLD: the fine-tuning steps use the server's control variate, which the
    method's payload carries."""
    _, records, _ = train(tmp_path, algorithm="scaffold", finetune={"epochs": 1, "loss": "method", "start": "final"})
    assert len(records[-1].finetune_per_client) == 3


def test_fine_tuning_keeps_what_the_model_fixes_and_trains_a_head_the_method_froze(tmp_path, monkeypatch, head_mlp):  # noqa: F811
    """A fixed ETF classifier stays as it is under whole-model fine-tuning; FedBABU's head, frozen by the method
    during FL, is what head fine-tuning trains."""
    seen = spy_on_finetuned_models(monkeypatch)
    spec, _, ckpt = train(
        tmp_path,
        algorithm="fedavg",
        model=head_mlp,
        model_params={"classifier": "etf"},
        finetune={"epochs": 1, "lr": 0.5, "part": "full", "start": "final"},
    )
    model = init_model(spec, 10, (1, 8, 8), torch.device("cpu"))
    fixed = torch.cat([torch.full((p.numel(),), not p.requires_grad) for p in model.parameters()])
    assert fixed.any() and not fixed.all()
    start = ckpt["server"]["params"]
    for params in seen[-spec.num_clients :]:
        assert torch.equal(params[fixed], start[fixed]) and not torch.equal(params[~fixed], start[~fixed])
    seen.clear()
    spec, _, ckpt = train(
        tmp_path, algorithm="fedbabu", finetune={"epochs": 1, "lr": 0.5, "part": "head", "start": "final"}
    )
    model = init_model(spec, 10, (1, 8, 8), torch.device("cpu"))
    head = torch.cat([torch.full((p.numel(),), n in model.head_parameter_names()) for n, p in model.named_parameters()])
    start = ckpt["server"]["params"]
    for params in seen[-spec.num_clients :]:
        assert not torch.equal(params[head], start[head]) and torch.equal(params[~head], start[~head])


# ------------------------------------------------------------------------------------ evaluation
def test_finetune_with_zero_epochs_equals_global_evaluation(tmp_path):
    _, records, _ = train_four_clients(tmp_path, algorithm="fedavg", finetune={"epochs": 0, "start": "final"})
    last = records[-1]
    assert last.finetune_per_client == last.personal_per_client
    assert last.finetune_mean == pytest.approx(last.personal_mean)
    assert all(r.finetune_mean is None for r in records[:-1])


def test_finetune_head_only_and_best_start(tmp_path):
    _, records, ckpt = train_four_clients(
        tmp_path, algorithm="fedbabu", rounds=3, finetune={"epochs": 2, "lr": 0.05, "part": "head", "start": "best"}
    )
    last = records[-1]
    assert len(last.finetune_per_client) == 4 and 0 <= last.finetune_mean <= 1
    assert ckpt["finetune_start"]["round"] == max(records, key=lambda r: (r.test_acc, -r.round)).round
    # fine-tuning the head (frozen during FedBABU's FL) changes the personalised accuracy
    assert last.finetune_per_client != last.personal_per_client


def test_validation_split_is_recorded_and_disjoint(tmp_path):
    spec, records, _ = train_four_clients(tmp_path, algorithm="fedavg", client_val_fraction=0.2)
    data = prepare_data(spec, torch.device("cpu"))
    for k in range(4):
        parts = [
            set(data.client_train[k].tolist()),
            set(data.client_val[k].tolist()),
            set(data.client_test[k].tolist()),
        ]
        assert all(parts) and not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    # adding a validation split keeps the test split
    plain = prepare_data(RunSpec(**{**FOUR_CLIENTS, "algorithm": "fedavg"}), torch.device("cpu"))
    assert all(torch.equal(a, b) for a, b in zip(plain.client_test, data.client_test))
    assert all(r.personal_val_mean == pytest.approx(np.mean(r.personal_val_per_client)) for r in records)


def test_personal_evaluation_adds_its_diagnostics_beside_the_engines(tmp_path):
    """On a diagnosed round the engine's diagnostics (weight divergence) and personal evaluation's (validation
    loss, personal divergence, activations) are stored together, each with one entry per client it covers."""
    asked = ("weight_divergence", "val_loss", "personal_divergence", "activations")
    _, records, _ = train_four_clients(
        tmp_path, algorithm="fedavg", client_val_fraction=0.2, diagnostics=asked, diagnostics_every=2
    )
    by_round = {r.round: r.diagnostics for r in records}
    assert by_round[1] is None  # not diagnosed: every 2nd round, and the last
    recorded = by_round[2]
    assert set(recorded) == set(asked)
    assert recorded["val_loss"]["clients"] == [0, 1, 2, 3]
    assert recorded["personal_divergence"]["clients"] == [0, 1, 2, 3]
    assert recorded["activations"]["clients"] == [0, 1, 2, 3]
    assert len(recorded["weight_divergence"]["clients"]) == 4  # the round's sampled clients: all four
