"""``fedbench.engine.state``: ``RunState.client_context`` builds every context a method's hook receives: the server's
weights and the client's split loaded, each purpose's own keyed random streams (``fedbench.seeding``), and training's
own client state against evaluation's and fine-tuning's copies."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from algorithm_fixtures import make_spec
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ServerState, SpareModels
from fedbench.data.federated import FederatedData
from fedbench.data.store import TensorData
from fedbench.engine.state import RunState
from fedbench.seeding import derive_seed, torch_generator

D = torch.float64


def _spec(**overrides):
    return make_spec("fedavg", **overrides)


def _data(n: int) -> TensorData:
    """Sample i is the constant image i (1×2×2) with label i."""
    x = torch.arange(n, dtype=D)[:, None, None, None].expand(n, 1, 2, 2).clone()
    y = torch.arange(n)
    return TensorData(train_x=x, train_y=y, test_x=x, test_y=y, fill=0.0, task="classification")


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([1.0, -2.0], dtype=D))
        self.b = nn.Parameter(torch.tensor([0.5], dtype=D))
        self.register_buffer("count", torch.tensor([3.0], dtype=D))


def _run_state(spec, client_states=None):
    data = _data(12)
    federated = FederatedData(
        tensors=data,
        client_train=[torch.arange(0, 6), torch.arange(6, 12)],
        client_test=[torch.arange(0, 2), torch.arange(2, 4)],
        num_classes=12,
        input_shape=(1, 2, 2),
        info={},
    )
    model = Tiny()
    server = ServerState(params=torch.tensor([0.0, 1.0, 2.0], dtype=D), buffers={"count": torch.tensor([5.0], dtype=D)})
    return RunState(
        spec=spec,
        data=federated,
        model=model,
        server=server,
        device=torch.device("cpu"),
        spare_models=SpareModels(model),
        client_states=client_states or {},
    )


def _draws(generator: torch.Generator) -> list[float]:
    return torch.rand(3, generator=generator, dtype=D).tolist()


def _expected(seed, stream, *keys) -> list[float]:
    return _draws(torch_generator(seed, stream, *keys))


def _dropout(seed, stream, *keys) -> list[float]:
    return torch.rand(3, generator=torch.Generator().manual_seed(derive_seed(seed, stream, *keys)), dtype=D).tolist()


@pytest.mark.parametrize(
    ("purpose", "streams", "keyed_by_round"),
    [
        ("train", ("client", "dropout"), True),
        ("eval", ("eval", "eval-dropout"), True),
        ("finetune", ("finetune", "finetune-dropout"), False),
    ],
)
def test_every_purpose_has_its_own_keyed_streams(purpose, streams, keyed_by_round):
    spec = _spec(seed=11, batch_size=4)
    run = _run_state(spec)
    algorithm = build_algorithm("fedavg", {})
    ctx = run.client_context(algorithm, 1, 4, purpose=purpose, lr=0.3)
    keys = (4, 1) if keyed_by_round else (1,)
    assert torch.rand(3, dtype=D).tolist() == _dropout(11, streams[1], *keys)  # torch's global RNG: dropout
    assert _draws(ctx.generator) == _expected(11, streams[0], *keys)
    # a spec the client trains under (fine-tuning's) changes neither stream: both stay the run's
    other = run.client_context(algorithm, 1, 4, purpose=purpose, lr=0.3, spec=_spec(seed=99, batch_size=2))
    assert other.spec.batch_size == 2 and _draws(other.generator) == _expected(11, streams[0], *keys)


def test_client_context_loads_the_servers_weights_and_the_clients_split():
    spec = _spec(batch_size=4)
    run = _run_state(spec)
    algorithm = build_algorithm("fedavg", {})
    with torch.no_grad():
        run.model.w.add_(10.0)
    ctx = run.client_context(algorithm, 1, 2, lr=0.3)
    assert run.model.w.tolist() == [0.0, 1.0] and run.model.b.item() == 2.0 and run.model.count.item() == 5.0
    assert ctx.model is run.model and ctx.client_id == 1 and ctx.round_index == 2 and ctx.lr == 0.3
    assert ctx.indices.tolist() == list(range(6, 12)) and ctx.num_samples == 6 and ctx.holdout is None
    assert ctx.payload == {} and ctx.spec is spec and ctx.spare_models is run.spare_models
    assert torch.equal(ctx.global_params, run.server.params)
    other = ServerState(params=torch.tensor([7.0, 8.0, 9.0], dtype=D), buffers={"count": torch.tensor([1.0], dtype=D)})
    ctx = run.client_context(algorithm, 0, 2, lr=0.3, payload={"a": 1}, server=other, purpose="eval")
    assert run.model.w.tolist() == [7.0, 8.0] and run.model.count.item() == 1.0 and ctx.payload == {"a": 1}
    assert torch.equal(ctx.global_params, other.params) and ctx.indices.tolist() == list(range(6))


def test_training_gets_the_clients_state_and_evaluation_and_finetuning_a_copy():
    run = _run_state(_spec(), client_states={0: {"c": torch.zeros(2)}})
    algorithm = build_algorithm("fedavg", {})
    for purpose in ("eval", "finetune"):
        ctx = run.client_context(algorithm, 0, 1, purpose=purpose, lr=0.1)
        ctx.state["c"].add_(1.0)
        ctx.state["new"] = 1
        assert run.client_states.peek(0).keys() == {"c"} and run.client_states.peek(0)["c"].tolist() == [0.0, 0.0]
    assert run.client_context(algorithm, 1, 1, purpose="eval", lr=0.1).state == {}
    ctx = run.client_context(algorithm, 0, 1, lr=0.1)
    ctx.state["c"].add_(1.0)
    assert run.client_states.peek(0)["c"].tolist() == [1.0, 1.0]
    fresh = run.client_context(algorithm, 1, 1, lr=0.1)
    fresh.state["x"] = 2
    assert run.client_states.peek(1) == {"x": 2}
    assert math.isfinite(ctx.lr)


def test_a_hand_built_run_state_evaluates_in_batches_of_a_thousand_and_fixes_no_parameter():
    state = _run_state(_spec())
    assert state.eval_batch_size == 1000 and state.frozen is None
    assert state.optimizer_options == {}  # no accelerated optimizer: the client optimizers' defaults
    ctx = state.client_context(build_algorithm("fedavg", {}), 0, 1, lr=0.1)
    assert ctx.optimizer_options == {}


class _HoldsOut:
    """A method that holds the last two of a client's samples out of training (as FedFomo's validation split)."""

    def local_split(self, spec, client_id, indices):
        return indices[:-2], indices[-2:]


def test_the_context_carries_the_methods_holdout_device_and_a_fresh_scratch():
    run = _run_state(_spec())
    ctx = run.client_context(_HoldsOut(), 1, 1, lr=0.1)
    assert ctx.indices.tolist() == [6, 7, 8, 9] and ctx.holdout.tolist() == [10, 11] and ctx.num_samples == 4
    assert ctx.device == torch.device("cpu") and ctx.task == "classification"
    assert ctx.scratch == {}
    ctx.scratch["features"] = 1
    assert run.client_context(_HoldsOut(), 1, 1, lr=0.1).scratch == {}
