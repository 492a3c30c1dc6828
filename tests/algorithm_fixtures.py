"""Helpers for the algorithm tests: tiny test-only models, spec building, engine runs that expose
the final server/client state (through the run's checkpoint), runs stopped after a round, and a hand-built client
context."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from fedbench.algorithms.context import ClientContext, ServerState, SpareModels, load_weights, param_views
from fedbench.checkpoint.format import load_checkpoint
from fedbench.data.store import TensorData
from fedbench.engine import EngineOptions, RoundRecord, run
from fedbench.engine.loop import init_model
from fedbench.models import MODELS
from fedbench.models.base import FedModel
from fedbench.models.heads import build_classifier
from fedbench.spec import RunSpec

LINEAR = (
    "test_algorithms_linear"  # registered per test (``linear_model``); hook-level tests build LinearModel themselves
)
MLP = "test_algorithms_mlp"


class LinearModel(FedModel):
    """Softmax regression: features = the flattened input, head = Linear(d, C)."""

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        self.encoder = nn.Flatten()
        self.feature_dim = math.prod(input_shape)
        self.classifier = nn.Linear(self.feature_dim, num_classes)


class HeadMLP(FedModel):
    """Flatten → Linear(d, hidden) → ReLU → classifier of any kind of ``fedbench.models.heads``."""

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], classifier: str = "linear", hidden: int = 16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU())
        self.classifier = build_classifier(classifier, hidden, num_classes)
        self.feature_dim = hidden


def _head_mlp(num_classes: int, input_shape: tuple[int, ...], classifier: str = "linear", hidden: int = 16):
    return HeadMLP(num_classes, input_shape, classifier, hidden)


@pytest.fixture
def linear_model(monkeypatch) -> str:
    """Registers the test-only ``LinearModel`` for one test: a RunSpec resolves its model's parameters, so its
    model name must be registered."""
    monkeypatch.setitem(MODELS._entries, LINEAR, LinearModel)
    monkeypatch.setitem(MODELS._info, LINEAR, {"papers": ("tests",)})
    return LINEAR


@pytest.fixture
def head_mlp(monkeypatch) -> str:
    """Registers the test-only ``HeadMLP`` for one test (not at import: the model-zoo tests are
    parametrised over every registered model and must never see it)."""
    monkeypatch.setitem(MODELS._entries, MLP, _head_mlp)
    monkeypatch.setitem(MODELS._info, MLP, {"papers": ("tests",)})
    return MLP


def make_spec(algorithm: str, params: dict | None = None, **overrides) -> RunSpec:
    setup = dict(
        algorithm=algorithm,
        algorithm_params=params or {},
        dataset="digits",
        model="digits_mlp",
        model_params={"hidden": 16},
        partition="dirichlet",
        partition_params={"alpha": 0.5},
        num_clients=4,
        clients_per_round=4,
        rounds=2,
        batch_size=64,
        optimizer={"lr": 0.05},
    )
    setup.update(overrides)
    if setup["model"] != "digits_mlp" and "model_params" not in overrides:
        setup["model_params"] = {}  # ``hidden`` belongs to digits_mlp
    return RunSpec(**setup)


class Sink:
    def __init__(self):
        self.records = []

    def log_round(self, record) -> None:
        self.records = [r for r in self.records if r.round < record.round] + [record]

    def truncate(self, after_round: int) -> None:
        self.records = [r for r in self.records if r.round <= after_round]


def train(spec: RunSpec, directory: Path, name: str = "run.pt", sink: Sink | None = None, **options):
    """Run the engine (``options``: ``EngineOptions`` fields); return (result, sink, final checkpoint: server
    params/buffers/state, client states)."""
    sink = sink or Sink()
    path = Path(directory) / name
    result = run(spec, sink, EngineOptions(checkpoint_path=path, **options))
    return result, sink, load_checkpoint(path, spec.spec_hash)


class Stopped(Exception):
    """What ``stop_after``'s callback raises. The engine has no stop switch: a test interrupts a run as a kill between
    two rounds would, once a round is logged and checkpointed, and the next run resumes from that checkpoint."""


def stop_after(last_round: int, then: Callable[[RoundRecord], None] | None = None) -> Callable[[RoundRecord], None]:
    """An ``on_round`` callback that stops the run after round ``last_round``; ``then`` hears of every round first."""

    def on_round(record: RoundRecord) -> None:
        if then is not None:
            then(record)
        if record.round == last_round:
            raise Stopped

    return on_round


def run_until(spec: RunSpec, sink, last_round: int, options: EngineOptions | None = None) -> None:
    """Run the engine and stop it after round ``last_round``, before the spec's last round (an unfinished run)."""
    assert 1 <= last_round < spec.rounds
    options = options or EngineOptions()
    with pytest.raises(Stopped):
        run(spec, sink, replace(options, on_round=stop_after(last_round, options.on_round)))
    assert [r.round for r in sink.records][-1] == last_round


def interrupt(
    spec: RunSpec, directory: Path, last_round: int, name: str = "run.pt", sink: Sink | None = None, **options
):
    """``train`` stopped after round ``last_round``; return (sink, the checkpoint it left, of that round)."""
    sink = sink or Sink()
    path = Path(directory) / name
    run_until(spec, sink, last_round, EngineOptions(checkpoint_path=path, **options))
    checkpoint = load_checkpoint(path, spec.spec_hash)
    assert checkpoint["round"] == last_round
    return sink, checkpoint


def initial_model(spec: RunSpec, num_classes: int = 10, input_shape=(1, 8, 8)) -> nn.Module:
    return init_model(spec, num_classes, tuple(input_shape), torch.device("cpu"))


def initial_params(spec: RunSpec) -> torch.Tensor:
    return nn.utils.parameters_to_vector(initial_model(spec).parameters()).detach()


def named_slices(model: nn.Module, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    """The flat vector cut into the model's named parameters."""
    return {name: view for (name, _), view in zip(model.named_parameters(), param_views(flat, model))}


def client_context(
    algorithm,
    spec: RunSpec,
    model: nn.Module,
    server: ServerState,
    data: TensorData,
    indices: torch.Tensor,
    state: dict,
    client_id: int = 0,
    round_index: int = 1,
    spares: SpareModels | None = None,
) -> ClientContext:
    """What the engine does before a client trains: load w^t, build the context."""
    load_weights(model, server.params, server.buffers)
    return ClientContext(
        spec=spec,
        client_id=client_id,
        round_index=round_index,
        model=model,
        server=server,
        payload=algorithm.payload(server, round_index),
        state=state,
        data=data,
        indices=indices,
        generator=torch.Generator().manual_seed(100 * round_index + client_id),
        device=torch.device("cpu"),
        lr=spec.optimizer.lr * spec.lr_schedule.factor(round_index),
        spare_models=spares or SpareModels(model),
    )


def fresh_server(model: nn.Module) -> ServerState:
    return ServerState(
        params=nn.utils.parameters_to_vector(model.parameters()).detach().clone(),
        buffers={name: b.detach().clone() for name, b in model.named_buffers()},
    )
