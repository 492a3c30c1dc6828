"""The engine ↔ algorithm contract (issue 11, part 4): hooks instead of side effects.

- Methods refactored onto the hooks give the curves and checkpoints of their earlier hand-written versions
  bit for bit; the earlier versions are kept below as test-only references (code as of commit 2106044).
- The spec is bound once; evaluation never changes training state, whatever the method.
"""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import MLP, head_mlp  # noqa: F401  (head_mlp: a fixture)
from conftest import ListSink
from fedbench.algorithms import ALGORITHMS, build_algorithm, finetune_objective
from fedbench.algorithms.context import load_weights
from fedbench.algorithms.dot_regression import FEDDR_PLUS_PARAMS
from fedbench.algorithms.fedfomo import FedFomo
from fedbench.algorithms.fedrep import FedRep
from fedbench.algorithms.losses import task_loss
from fedbench.algorithms.partial import only_trainable, restore_model
from fedbench.algorithms.perfedavg import PerFedAvg
from fedbench.checkpoint.format import load_checkpoint
from fedbench.engine import EngineOptions, personal, run
from fedbench.seeding import torch_generator
from fedbench.spec import FinetuneSpec, RunSpec

DEVICE = torch.device("cpu")
BASE = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 16},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 20},
    "num_clients": 4,
    "clients_per_round": 3,
    "rounds": 3,
    "batch_size": 32,
    "optimizer": {"lr": 0.05, "momentum": 0.5},
    "eval_mode": "both",
    "client_test_fraction": 0.2,
    "client_val_fraction": 0.1,
}
BN = {"model": "fedbn_digit_cnn", "model_params": {}, "local_steps": 2, "batch_size": 16}


def register(monkeypatch, name: str, cls: type) -> str:
    """A test-only algorithm, registered for one test."""
    monkeypatch.setitem(ALGORITHMS._entries, name, cls)
    monkeypatch.setitem(ALGORITHMS._info, name, {"papers": ("tests",)})
    return name


def train(tmp_path, algorithm: str, params: dict | None = None, **overrides):
    spec = RunSpec(algorithm=algorithm, algorithm_params=params or {}, **{**BASE, **overrides})
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


# ------------------------------------------------------------------------ references: the code before the hooks
class FedRepBefore(FedRep):
    """FedRep with its own copy of the local-training skeleton (before ``local_phases``)."""

    def phases(self, ctx):
        head = self.local_parameter_names(ctx.model)
        body = [n for n, _ in ctx.model.named_parameters() if n not in set(head)]
        head_epochs = ctx.spec.local_epochs if self.params.head_epochs is None else self.params.head_epochs
        if ctx.spec.local_steps:
            steps = ctx.spec.local_steps
            head_steps = steps if self.params.head_epochs is None else self.params.head_epochs * steps
            return [(head, ctx.batches(steps=head_steps)), (body, ctx.batches(steps=self.params.body_epochs * steps))]
        return [(head, ctx.batches(epochs=head_epochs)), (body, ctx.batches(epochs=self.params.body_epochs))]

    def local_train(self, ctx):
        ctx.model.train()
        self.begin_local(ctx)
        for names, batches in self.phases(ctx):
            with only_trainable(ctx.model, names):
                self.train_steps(ctx, ctx.make_optimizer(ctx.model.parameters()), batches)
        update = ctx.make_update()
        self.end_local(ctx, update)
        return update


class PerFedAvgBefore(PerFedAvg):
    """Per-FedAvg with its own copy of the local-training skeleton (before ``local_phases``)."""

    def local_train(self, ctx):
        model = ctx.model
        model.train()
        self.begin_local(ctx)
        params = [p for p in model.parameters() if p.requires_grad]
        inner = torch.optim.SGD(params, lr=ctx.lr)
        outer = torch.optim.SGD(params, lr=self.params.beta)
        batches = ctx.batches()
        for first, second in zip(batches, batches):
            start = [p.detach().clone() for p in params]
            self.train_steps(ctx, inner, [first])
            outer.zero_grad(set_to_none=True)
            x, y = second
            self.objective(ctx, x, y, self.forward(ctx, x)).backward()
            ctx.clip_gradients()
            with torch.no_grad():
                for p, p0 in zip(params, start):
                    p.copy_(p0)
            outer.step()
        update = ctx.make_update()
        self.end_local(ctx, update)
        return update


class FedFomoBefore(FedFomo):
    """FedFomo cutting its validation split by rewriting ``ctx.indices`` and ``ctx.num_samples`` in ``begin_local``
    (before ``local_split``), scoring and mixing weights only (before peers' BN buffers were used)."""

    def local_split(self, spec, client_id, indices):
        return indices, None

    def begin_local(self, ctx):
        order = torch.randperm(ctx.num_samples, generator=torch_generator(ctx.spec.seed, "fedfomo-val", ctx.client_id))
        shuffled = ctx.indices[order.to(ctx.indices.device)]
        n_val = max(1, round(self.params.val_fraction * ctx.num_samples))
        val, ctx.indices = shuffled[:n_val], shuffled[n_val:].sort().values
        ctx.num_samples = int(ctx.indices.numel())
        restore_model(ctx, "personal", ctx.model)
        own, buffers = ctx.current_params(), ctx.current_buffers()
        x, y = ctx.data.train_x[val], ctx.data.train_y[val]

        def val_loss(params):
            with torch.no_grad():
                return task_loss(ctx.task, ctx.frozen_model("fedfomo", params, buffers)(x), y).item()

        peers = sorted(
            (j for j in ctx.payload["client_models"] if j != ctx.client_id),
            key=lambda j: (-ctx.payload["affinity"].get((ctx.client_id, j), 0.0), j),
        )[: self.params.m]
        own_loss = val_loss(own)
        weights = {}
        for j in peers:
            theta_j = ctx.payload["client_models"][j][0]
            distance = float(torch.linalg.vector_norm(theta_j - own))
            weights[j] = max(0.0, (own_loss - val_loss(theta_j)) / distance) if distance > 0 else 0.0
        total = sum(weights.values())
        if total > 0:
            weights = {j: w / total for j, w in weights.items()}
            own = own + sum(w * (ctx.payload["client_models"][j][0] - own) for j, w in weights.items())
            load_weights(ctx.model, own)
        ctx.scratch["fomo_weights"] = weights


# ------------------------------------------------------------------------ refactors give identical curves
FINETUNE = {"epochs": 1, "lr": 0.1, "loss": "method", "start": "final"}


@pytest.mark.parametrize(
    "params,overrides",
    [
        ({}, {}),
        ({"head_epochs": 2, "body_epochs": 1}, {"finetune": FINETUNE}),
        ({}, {"local_steps": 3}),
        ({}, {"drop_last": True, "batch_size": 24}),
    ],
    ids=["default", "head2-finetune", "steps", "drop_last"],
)
def test_fedrep_on_local_phases_equals_its_hand_written_loop(tmp_path, monkeypatch, params, overrides):
    old = register(monkeypatch, "fedrep_before", FedRepBefore)
    assert_same_run(train(tmp_path, "fedrep", params, **overrides), train(tmp_path, old, params, **overrides))


@pytest.mark.parametrize(
    "params,overrides",
    [
        ({}, {}),
        ({"beta": 0.1, "adapt_steps": 2}, {"local_epochs": 2, "finetune": FINETUNE}),
    ],
    ids=["default", "two-epochs-finetune"],
)
def test_perfedavg_on_local_phases_equals_its_hand_written_loop(tmp_path, monkeypatch, params, overrides):
    old = register(monkeypatch, "perfedavg_before", PerFedAvgBefore)
    assert_same_run(train(tmp_path, "perfedavg", params, **overrides), train(tmp_path, old, params, **overrides))


@pytest.mark.parametrize(
    "params,overrides",
    [
        ({}, {}),
        ({"m": 2}, {"clients_per_round": 4, "rounds": 4}),
        ({}, {"finetune": FINETUNE}),
    ],
    ids=["partial", "full-m2", "finetune"],
)
def test_fedfomo_with_local_split_equals_rewriting_the_context(tmp_path, monkeypatch, params, overrides):
    """On a model without BatchNorm (the BN fix changes nothing there): the held-out validation split through
    ``local_split`` gives the curves of the earlier ``begin_local`` that rewrote ``ctx.indices``."""
    old = register(monkeypatch, "fedfomo_before", FedFomoBefore)
    assert_same_run(train(tmp_path, "fedfomo", params, **overrides), train(tmp_path, old, params, **overrides))


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
    spec = RunSpec(algorithm=name, **{**BASE, "finetune": FINETUNE})
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


# ------------------------------------------------------------------------ evaluation never changes training state
SETTINGS = {  # methods that need a particular model
    "dot_regression": {"model": MLP, "model_params": {"classifier": "etf"}, "optimizer": {"lr": 1.0}},
    "spherefed": {"model": MLP, "model_params": {"classifier": "orthonormal"}, "optimizer": {"lr": 1.0}},
    "fedetf": {"model": MLP, "model_params": {"classifier": "fedetf"}, "optimizer": {"lr": 0.5}},
    "fedimpro": {"model": "digits_cnn", "model_params": {"width": 4, "hidden": 16}},
    "fedbn": BN,
}


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_personal_evaluation_never_changes_training(tmp_path, algorithm):
    """Every method, 3 of 4 clients per round: evaluating every client's personal model every round or only after
    the last gives the same training (losses, global weights, every client's state)."""
    setting = SETTINGS.get(algorithm, {})
    every_round = train(tmp_path / "a", algorithm, eval_every=1, **setting)
    at_the_end = train(tmp_path / "b", algorithm, eval_every=BASE["rounds"], **setting)
    assert [r.train_loss for r in every_round[0]] == [r.train_loss for r in at_the_end[0]]
    assert curve(every_round[0])[-1] == curve(at_the_end[0])[-1]
    assert_same_tree(every_round[1]["server"], at_the_end[1]["server"], "server")
    assert_same_tree(every_round[1]["client_states"], at_the_end[1]["client_states"], "client_states")
