"""Helpers for the algorithm tests: tiny test-only models, spec building, engine runs that expose
the final server/client state (through the run's checkpoint), runs stopped after a round, a hand-built client
context, and the stored reference results of whole runs (``check_reference_run``)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
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
from fedbench.settings import Settings
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


SETTING_NAMES = frozenset(f.name for f in dataclasses.fields(Settings))


def engine_options(**given) -> EngineOptions:
    """``EngineOptions`` from its fields and settings named alone (``packing="packed"``), so a test names only what
    it changes."""
    settings = {name: given.pop(name) for name in list(given) if name in SETTING_NAMES}
    return EngineOptions(**given).with_settings(**settings)


def train(spec: RunSpec, directory: Path, name: str = "run.pt", sink: Sink | None = None, **options):
    """Run the engine (``options``: ``EngineOptions`` fields or settings, see ``engine_options``); return (result, sink, final checkpoint: server
    params/buffers/state, client states)."""
    sink = sink or Sink()
    path = Path(directory) / name
    result = run(spec, sink, engine_options(checkpoint_path=path, **options))
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
    run_until(spec, sink, last_round, engine_options(checkpoint_path=path, **options))
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


# ------------------------------------------------------------------------------------------- stored reference runs
# A method whose code is rewritten (moved onto a new hook, split, simplified) must keep the results stored under
# its spec hashes; a change of result needs a new ``result_revision`` of the method's ``Params``. ``check_reference_run`` pins that:
# a short float64 run's whole curve and a digest of every final tensor (server weights, buffers and state, every
# client's state) against the values stored in fixtures/reference_runs.json. float64, because two float64 runs
# on different CPU kernels agree to ~1e-12 (conftest.F64_ATOL), while any change of what a method computes moves
# them far more. After a deliberate change of result (with its result revision), regenerate the stored values:
#     FEDBENCH_WRITE_REFERENCE_RUNS=1 python -m pytest tests/engine/test_engine_contract.py tests/algorithms/methods/test_lgmix.py -k reference
REFERENCE_RUNS = Path(__file__).resolve().parent / "fixtures" / "reference_runs.json"
REFERENCE_TOLERANCE = {"rel": 1e-9, "abs": 1e-9}


def _digest(tensor: torch.Tensor) -> list:
    """A tensor as a few numbers any change of a value or of the order moves: its values when integral, else
    (Σ w, Σ w², Σ w_i·sin(i+1)) in float64."""
    if not tensor.is_floating_point():
        return tensor.flatten().tolist()
    w = tensor.detach().double().flatten()
    weights = torch.sin(torch.arange(1, w.numel() + 1, dtype=torch.float64))
    return [float(w.sum()), float((w * w).sum()), float(w @ weights)]


def _flatten(node, path: str, out: dict) -> dict:
    if torch.is_tensor(node):
        out[path] = _digest(node)
    elif isinstance(node, dict):
        for key in sorted(node, key=str):
            _flatten(node[key], f"{path}/{key}", out)
    elif isinstance(node, (list, tuple)):
        for i, item in enumerate(node):
            _flatten(item, f"{path}[{i}]", out)
    else:
        out[path] = node
    return out


def run_fingerprint(records, checkpoint: dict) -> dict:
    """A run's result as plain JSON values: every round record (wall time left out, and diagnostics where the run
    records none: the stored fingerprints predate them) and every final tensor's digest, keyed by its path in the
    checkpoint."""
    curve = [
        {
            k: v
            for k, v in dataclasses.asdict(r).items()
            if k != "wall_seconds" and not (k == "diagnostics" and v is None)
        }
        for r in records
    ]
    return {
        "curve": _flatten(curve, "curve", {}),
        "server": _flatten(checkpoint["server"], "server", {}),
        "client_states": _flatten(checkpoint["client_states"], "client_states", {}),
    }


def check_reference_run(name: str, records, checkpoint: dict) -> None:
    """The run's fingerprint equals the one stored under ``name`` (to REFERENCE_TOLERANCE); with
    FEDBENCH_WRITE_REFERENCE_RUNS=1 it is stored instead."""
    actual = json.loads(json.dumps(run_fingerprint(records, checkpoint)))  # tuples → lists, keys → str
    stored = json.loads(REFERENCE_RUNS.read_text()) if REFERENCE_RUNS.exists() else {}
    if os.environ.get("FEDBENCH_WRITE_REFERENCE_RUNS") == "1":
        stored[name] = actual
        REFERENCE_RUNS.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        return
    assert name in stored, f"no stored reference for {name}: see tests/algorithm_fixtures.py to record one"
    expected = stored[name]
    for part in ("curve", "server", "client_states"):
        assert set(actual[part]) == set(expected[part]), f"{name} {part}: {set(actual[part]) ^ set(expected[part])}"
        for path, value in expected[part].items():
            numeric = isinstance(value, (int, float, list)) and not isinstance(value, bool)
            expected_value = pytest.approx(value, **REFERENCE_TOLERANCE) if numeric else value
            assert actual[part][path] == expected_value, f"{name}: {path}"


def random_masks(shape, seed=0) -> torch.Tensor:
    """Binary segmentation masks (disc, cup) of ``shape``, about 30 % foreground, channel 1 of the first empty."""
    masks = torch.from_numpy(np.random.default_rng(seed).random(shape) < 0.3).float()
    masks[0, 1] = 0.0  # an empty channel (an image without cup)
    return masks


# A few rounds of the digits MLP on five Dirichlet clients, three per round, with momentum (engine runs).
BASE = dict(
    dataset="digits",
    model="digits_mlp",
    model_params={"hidden": 32},
    partition="dirichlet",
    partition_params={"alpha": 0.5, "min_size": 5},
    num_clients=5,
    clients_per_round=3,
    rounds=3,
    batch_size=32,
    optimizer={"lr": 0.1, "momentum": 0.5},
)


def final_params(spec, tmp_path, sink, **kwargs):
    """Train ``spec`` to its end; (its result, its final checkpoint)."""
    path = tmp_path / f"{spec.spec_hash}.pt"
    result = run(spec, sink, engine_options(checkpoint_path=path, **kwargs))
    return result, load_checkpoint(path, spec.spec_hash, torch.device("cpu"))


# The settings the methods that need a particular model train in (the engine contract's checks on every method,
# their client-state tests): MLP is the head_mlp fixture's model.
BN = {"model": "fedbn_digit_cnn", "model_params": {}, "local_steps": 2, "batch_size": 16}
SETTINGS = {
    "dot_regression": {"model": MLP, "model_params": {"classifier": "etf"}, "optimizer": {"lr": 1.0}},
    "spherefed": {"model": MLP, "model_params": {"classifier": "orthonormal"}, "optimizer": {"lr": 1.0}},
    "fedetf": {"model": MLP, "model_params": {"classifier": "fedetf"}, "optimizer": {"lr": 0.5}},
    "fedimpro": {"model": "digits_cnn", "model_params": {"width": 4, "hidden": 16}},
    "fedbn": BN,
}
