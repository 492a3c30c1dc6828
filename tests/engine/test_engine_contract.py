"""The engine ↔ algorithm contract: methods receive what they need through hooks, not side effects.

- Methods written on the phase and split hooks keep the results stored for them (``check_reference_run``).
- Fine-tuning objectives are declared by the method that owns them.
- The spec is bound once.

That every method keeps the engine contract ``fedbench check-method`` checks: tests/execution/contract/.
"""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import MLP, check_reference_run, head_mlp  # noqa: F401  (head_mlp: a fixture)
from conftest import ListSink
from fedbench.algorithms import ALGORITHMS, build_algorithm, finetune_objective
from fedbench.algorithms.params import FEDDR_PLUS_PARAMS
from fedbench.checkpoint.format import load_checkpoint
from fedbench.engine import EngineOptions, personal, run
from fedbench.execution.contract import contract_spec
from fedbench.spec import FinetuneSpec

DEVICE = torch.device("cpu")
BN = {"model": "fedbn_digit_cnn", "model_params": {}, "local_steps": 2, "batch_size": 16}


def register(monkeypatch, name: str, cls: type) -> str:
    """A test-only algorithm, registered for one test."""
    monkeypatch.setitem(ALGORITHMS._entries, name, cls)
    monkeypatch.setitem(ALGORITHMS._info, name, {"papers": ("tests",), "params": cls.Params})
    return name


def train(tmp_path, algorithm: str, params: dict | None = None, **overrides):
    spec = contract_spec(algorithm, params, **overrides)
    path = tmp_path / f"{algorithm}-{spec.spec_hash}.pt"
    sink = ListSink()
    result = run(spec, sink, EngineOptions(checkpoint_path=path))
    assert result.status == "done", result.message
    return sink.records, load_checkpoint(path, spec.spec_hash, DEVICE)


def curve(records):
    return [
        (
            r.round,
            r.train_loss,
            r.test_acc,
            r.test_loss,
            r.personal_per_client,
            r.personal_val_per_client,
            r.finetune_per_client,
        )
        for r in records
    ]


def assert_same_tree(a, b, where="") -> None:
    """Equal nested dicts/lists/tuples of tensors and numbers, tensors bit for bit."""
    if torch.is_tensor(a):
        assert torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {set(a) ^ set(b)}"
        for key in a:
            assert_same_tree(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tree(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def assert_same_run(new, old) -> None:
    (new_records, new_ckpt), (old_records, old_ckpt) = new, old
    assert curve(new_records) == curve(old_records)
    assert_same_tree(new_ckpt["server"], old_ckpt["server"], "server")
    assert_same_tree(
        {k: v for k, v in new_ckpt["client_states"].items() if v},
        {k: v for k, v in old_ckpt["client_states"].items() if v},
        "client_states",
    )


# ------------------------------------------------------------------------ rewritten methods keep their results
FINETUNE = {"epochs": 1, "lr": 0.1, "loss": "method", "start": "final"}


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(
    "algorithm,params,overrides",
    [
        ("fedrep", {}, {}),
        ("fedrep", {"head_epochs": 2, "body_epochs": 1}, {"finetune": FINETUNE}),
        ("fedrep", {}, {"local_steps": 3}),
        ("fedrep", {}, {"drop_last": True, "batch_size": 24}),
        ("perfedavg", {}, {}),
        ("perfedavg", {"beta": 0.1, "adapt_steps": 2}, {"local_epochs": 2, "finetune": FINETUNE}),
        ("fedfomo", {}, {}),
        ("fedfomo", {"m": 2}, {"clients_per_round": 4, "rounds": 4}),
        ("fedfomo", {}, {"finetune": FINETUNE}),
    ],
    ids=[
        "fedrep-default",
        "fedrep-head2-finetune",
        "fedrep-steps",
        "fedrep-drop_last",
        "perfedavg-default",
        "perfedavg-two-epochs-finetune",
        "fedfomo-partial",
        "fedfomo-full-m2",
        "fedfomo-finetune",
    ],
)
def test_methods_on_the_phase_and_split_hooks_keep_their_reference_results(
    tmp_path, request, algorithm, params, overrides
):
    """FedRep's head/body phases and Per-FedAvg's meta-steps (``local_phases``) and FedFomo's validation split
    (``local_split``, a model without BatchNorm) give the curves, personal and fine-tuned figures and final
    states stored for them: results stored under their spec hashes stay valid when the methods are rewritten.
    The rules themselves are checked by hand in tests/algorithms/methods/test_fedrep.py, test_perfedavg.py and
    test_fedfomo.py."""
    records, checkpoint = train(tmp_path, algorithm, params, **overrides)
    check_reference_run(f"engine-contract/{request.node.callspec.id}", records, checkpoint)


def test_every_finetune_loss_is_declared_by_exactly_one_method():
    losses = [loss for loss in FinetuneSpec.model_fields["loss"].annotation.__args__ if loss != "method"]
    assert {loss: finetune_objective(loss) for loss in losses} == {
        "ce": ("fedavg", {}),
        "dr": ("dot_regression", {}),
        "dr_plus": ("dot_regression", FEDDR_PLUS_PARAMS),
    }


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize("loss", ["dr", "dr_plus", "ce"])
def test_fine_tuning_objectives_declared_by_their_method_equal_the_engines_old_table(tmp_path, monkeypatch, loss):
    """The engine named ``dot_regression`` for finetune.loss = dr / dr_plus; the method now declares them."""
    overrides = {
        "model": MLP,
        "model_params": {"classifier": "etf"},
        "rounds": 2,
        "finetune": {"epochs": 2, "lr": 0.5, "loss": loss, "start": "best"},
    }
    new = train(tmp_path / "new", "fedavg", **overrides)

    def old_trainer(spec, algorithm):
        table = {"ce": ("fedavg", {}), "dr": ("dot_regression", {}), "dr_plus": ("dot_regression", FEDDR_PLUS_PARAMS)}
        return algorithm if spec.finetune.loss == "method" else build_algorithm(*table[spec.finetune.loss])

    monkeypatch.setattr(personal, "finetune_trainer", old_trainer)
    assert_same_run(new, train(tmp_path / "old", "fedavg", **overrides))
    assert new[0][-1].finetune_per_client is not None


# ------------------------------------------------------------------------ the spec is bound once
def test_the_spec_is_bound_by_bind_model_and_no_other_hook_sets_it(tmp_path, monkeypatch):
    seen = []

    class Watched(build_algorithm("scaffold", {}).__class__):
        def aggregate(self, server, updates, round_index):
            seen.append(self.spec)
            super().aggregate(server, updates, round_index)

    name = register(monkeypatch, "watched", Watched)
    spec = contract_spec(name, finetune=FINETUNE)
    bound = []
    original = Watched.bind_model

    def bind_model(self, *args):
        bound.append((self, args[0]))
        original(self, *args)

    monkeypatch.setattr(Watched, "bind_model", bind_model)
    assert run(spec, ListSink()).status == "done"
    ((algorithm, bound_spec),) = bound
    assert bound_spec == spec and seen == [spec] * spec.rounds
    assert algorithm.spec is bound_spec  # fine-tuning (under a spec of its own) left it alone
