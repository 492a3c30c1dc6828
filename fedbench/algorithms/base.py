"""The Algorithm base class *is* FedAvg; every other method overrides only the hooks where it differs.

Server side: ``bind_model`` (once: binds ``self.spec``) → ``init_server`` → per round ``payload`` → clients'
``local_train`` → ``aggregate`` → ``after_aggregation`` per participating client (with the new global weights).
Client side, ``local_train`` runs the ``local_phases`` (default: E epochs, or a fixed number of steps, of the
client optimizer over every trainable parameter) and calls, for every mini-batch: ``loss`` (objective),
``adjust_gradients`` (after backward, before the optimizer step: e.g. SCAFFOLD's correction), ``after_step``.
``begin_local``/``end_local`` bracket a client's training (e.g. snapshot a teacher, update a control variate).
``eval_model`` gives the model a client is evaluated with (personalised FL); the default is the global model.
It gets a copy of the client's state: evaluation never changes training state.

Weights travel as one flat parameter vector per model (``torch.nn.utils.parameters_to_vector``
order); floating-point buffers (BatchNorm running statistics) travel separately as a dict, so methods
can treat them explicitly (FedBN keeps them local, FedNova/LG-Mix mix them).

Every method's ``Params`` accepts ``regularizers`` (``fedbench.algorithms.regularizers``): prox, kd, ntd,
ld and fd terms that ``objective`` adds to the method's own ``loss``, so any method can carry them
(FedDr+ Table 1). ``teacher_outputs`` gives the round's global model's logits and features for a batch
(computed once per batch, shared by FedNTD, MOON and the regularizers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedbench.algorithms import regularizers as reg
from fedbench.algorithms.context import ClientContext, ClientUpdate, ServerState  # noqa: F401  (ClientUpdate: re-exported)
from fedbench.algorithms.functional import masked_cross_entropy, proximal
from fedbench.algorithms.losses import task_loss
from fedbench.algorithms.params import NoParams, RegularizerSpec
from fedbench.spec import RunSpec

Batches = Iterable[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class LocalPhase:
    """One phase of a client's local training (``Algorithm.local_phases``): its mini-batches, the parameters it
    trains (``None``: every trainable one; others are frozen for the phase, left out of its optimizer), and how it
    steps (``None``: ``Algorithm.train_steps`` with a fresh ``ctx.make_optimizer``; else ``step(ctx, batches)``,
    e.g. Per-FedAvg's meta-step over pairs of batches)."""

    batches: Batches
    parameters: Sequence[str] | None = None
    step: Callable[[ClientContext, Batches], None] | None = None


@contextmanager
def only_trainable(model: torch.nn.Module, names: Iterable[str], respect_frozen: bool = True) -> Iterator[None]:
    """Within the block only the named parameters get gradients (the others are left out of an optimizer
    made inside it); parameters frozen before (fixed ETF classifiers) stay frozen unless
    ``respect_frozen`` is False. The previous flags come back afterwards: the working model is shared."""
    chosen = set(names)
    before = {name: p.requires_grad for name, p in model.named_parameters()}
    for name, p in model.named_parameters():
        p.requires_grad_(name in chosen and (before[name] or not respect_frozen))
    try:
        yield
    finally:
        for name, p in model.named_parameters():
            p.requires_grad_(before[name])


class Algorithm:
    """FedAvg (McMahan et al., 2017): sample-weighted averaging of locally trained models."""

    #: The method's hyperparameters; a method that sets its own also declares ``params: <its Params>`` (typed hooks).
    Params: ClassVar[type[NoParams]] = NoParams

    def __init__(self, params: NoParams):
        self.params = params
        # The run's spec, bound once by ``bind_model``: server hooks read N, the optimizer and the lr schedule
        # from it. Client hooks read ``ctx.spec`` (fine-tuning trains under a spec of its own).
        self.spec: RunSpec | None = None

    # ---------------------------------------------------------------- server side
    def bind_model(self, spec: RunSpec, model: torch.nn.Module, input_shape: tuple[int, ...], num_classes: int) -> None:
        """Called once by the engine, before ``init_server``, with the run's spec and initialised model: binds the
        spec, and builds state shaped by the model (FedImpro's per-class feature statistics at a split,
        PartialPersonalization's mask of the local part). Overrides call ``super().bind_model``."""
        self.spec = spec

    def check_model(self, model: torch.nn.Module, setting: str) -> None:
        """Raise a ConfigError naming ``setting`` (``"dot_regression"``, ``"finetune.loss = 'dr'"``) unless the model
        suits this method's objective (e.g. a fixed classifier). The engine calls it when a run starts, for the
        run's method and for the objective of fine-tuning, so that a bad model fails before round 1."""

    def init_server(self, server: ServerState) -> None:
        """Create server state (control variates, momentum, ...) in ``server.state``."""

    def payload(self, server: ServerState, round_index: int) -> dict[str, Any]:
        """What clients receive besides the global weights."""
        return {}

    def aggregation_weights(self, updates: list[ClientUpdate]) -> torch.Tensor:
        """p_k = n_k / Σ n, or 1 / |S_t| under the spec's ``client_weighting = "uniform"`` (float64, so that the
        weights sum to 1 to within float32 rounding)."""
        if self.spec is not None and self.spec.client_weighting == "uniform":
            return torch.full((len(updates),), 1.0 / len(updates), dtype=torch.float64)
        sizes = torch.tensor([float(u.num_samples) for u in updates], dtype=torch.float64)
        return sizes / sizes.sum()

    def aggregate(self, server: ServerState, updates: list[ClientUpdate], round_index: int) -> None:
        """w ← Σ_k p_k · w_k (``aggregation_weights``), and the same weighting for floating-point buffers."""
        server.params = weighted_average([u.params for u in updates], self.aggregation_weights(updates))
        server.buffers = average_buffers(updates, self.aggregation_weights(updates))

    def after_aggregation(self, ctx: ClientContext, server: ServerState) -> None:
        """Per participating client, once the round is aggregated: ``ctx`` is the client's context of this round
        (its ``state`` and ``scratch``; ``ctx.global_params`` is still w^t, and ``ctx.model`` no longer holds this
        client's model) and ``server`` holds w^{t+1}. For client-side steps that need the new global model
        (LG-Mix Eq. 2's (1 − λ)Δu); the client's state is complete when the round ends."""

    #: The diagnostics of source "method" (``fedbench/vocab/diagnostics.py``) that ``round_diagnostics`` reports: a
    #: spec asking another method for one is refused when the run starts.
    reported_diagnostics: ClassVar[frozenset[str]] = frozenset()

    def round_diagnostics(
        self, names: frozenset[str], server: ServerState, contexts: Sequence[ClientContext]
    ) -> dict[str, Any]:
        """{name: JSON value} of the diagnostics among ``names`` this method reports (``reported_diagnostics``), once
        the round is aggregated: ``contexts`` are the contexts of the round's clients (their ``state`` complete) and
        ``server`` holds w^{t+1}. The engine calls it only on the rounds the spec diagnoses. It only reads: it draws
        nothing from a training stream and changes no state. Default: nothing."""
        return {}

    def resume_states(
        self,
        server: ServerState,
        client_states: MutableMapping[int, dict[str, Any]],
        round_index: int,
        last_clients: list[int],
    ) -> None:
        """Called once when a run resumes from a checkpoint written after round ``round_index`` (``last_clients``
        trained in it): bring client states written by an earlier fedbench up to date, or raise a FedbenchError
        saying why they cannot be resumed."""

    # ---------------------------------------------------------------- client side
    def local_split(
        self, spec: RunSpec, client_id: int, indices: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(training indices, held-out indices or None) of a client's training split: a method that holds data out
        of local training (FedFomo's validation split) returns the rest as ``ctx.indices`` — the client's sample
        count |D_k| and step count follow it — and the held-out part as ``ctx.holdout``. Default: all of it."""
        return indices, None

    def begin_local(self, ctx: ClientContext) -> None:
        """Called after the global weights are loaded into ``ctx.model``, before the first step."""

    def loss(self, ctx: ClientContext, x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """The method's own local objective L_base (regularizers are added by ``objective``): cross-entropy, or
        the Dice loss on a segmentation task (``ctx.task``; ``fedbench.algorithms.losses``)."""
        return task_loss(ctx.task, logits, y)

    def forward(self, ctx: ClientContext, x: torch.Tensor) -> torch.Tensor:
        """Model output for a training batch; the penultimate features go to ``ctx.scratch["features"]``
        for ``loss`` and the regularizers."""
        logits, ctx.scratch["features"] = model_outputs(ctx.model, x)
        return logits

    def objective(self, ctx: ClientContext, x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """L_base plus the configured regularizers, convex (FedDr+ Eq. 4 style) or added."""
        base = self.loss(ctx, x, y, logits)
        specs = self.params.regularizers
        if not specs:
            return base
        convex = sum(r.weight for r in specs if r.mode == "convex")
        total = (1.0 - convex) * base if convex else base
        for r in specs:
            total = total + r.weight * self.regularizer(ctx, r, x, y, logits)
        return total

    def regularizer(self, ctx: ClientContext, r: RegularizerSpec, x, y, logits) -> torch.Tensor | float:
        if r.name == "prox":
            return 0.5 * proximal(ctx.model.parameters(), ctx.global_tensors)  # ½‖Θ − Θ_g‖² (FedProx Eq. 2 without μ)
        teacher_logits, teacher_features = self.teacher_outputs(ctx, x)
        if r.name == "kd":
            return reg.distillation(logits, teacher_logits, r.tau)
        if r.name == "ntd":
            return reg.not_true_distillation(logits, teacher_logits, y, r.tau)
        if r.name == "ld":
            return reg.logit_matching(logits, teacher_logits)
        assert teacher_features is not None  # fd compares features: every fedbench model has a features/head split
        return reg.feature_distillation(ctx.scratch["features"], teacher_features)

    def teacher_outputs(self, ctx: ClientContext, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits and features of the round's global model w^t (frozen, eval mode) for this batch;
        computed once per batch however many terms use them."""
        cached = ctx.scratch.get("teacher_batch")
        if cached is None or cached[0] is not x:
            if "teacher" not in ctx.scratch:
                ctx.scratch["teacher"] = ctx.global_model()
            with torch.no_grad():
                cached = (x, *model_outputs(ctx.scratch["teacher"], x))
            ctx.scratch["teacher_batch"] = cached
        return cached[1], cached[2]

    def adjust_gradients(self, ctx: ClientContext) -> None:
        """After ``backward``, before the optimizer step (gradient corrections pass through momentum)."""

    def after_step(self, ctx: ClientContext) -> None:
        """After each optimizer step."""

    def end_local(self, ctx: ClientContext, update: ClientUpdate) -> None:
        """After local training; may update ``ctx.state`` and add to ``update.extra``."""

    def local_train(self, ctx: ClientContext) -> ClientUpdate:
        """A client's round: ``begin_local``, each of ``local_phases`` in turn, then the update and ``end_local``."""
        ctx.model.train()
        self.begin_local(ctx)  # before the optimizer, so that parameters frozen here are left out of it
        for phase in self.local_phases(ctx):
            scope = nullcontext() if phase.parameters is None else only_trainable(ctx.model, phase.parameters)
            with scope:
                if phase.step is not None:
                    phase.step(ctx, phase.batches)
                else:
                    self.train_steps(ctx, ctx.make_optimizer(ctx.model.parameters()), phase.batches)
        update = ctx.make_update()
        self.end_local(ctx, update)
        return update

    def local_phases(self, ctx: ClientContext) -> Iterable[LocalPhase]:
        """The phases of local training, in order (evaluated after ``begin_local``). Default: one phase, the
        round's ``local_epochs`` (or ``local_steps``) over every trainable parameter. FedRep: head epochs, then
        body epochs; FedAlt: a split of the steps; Per-FedAvg: one phase with its own meta-step."""
        return [LocalPhase(ctx.batches())]

    def train_steps(self, ctx: ClientContext, optimizer: torch.optim.Optimizer, batches: Batches) -> None:
        """The step loop of a phase, reusable for a second pass (Ditto's personal model, Per-FedAvg's
        adaptation before evaluation)."""
        for x, y in batches:
            logits = self.forward(ctx, x)
            loss = self.objective(ctx, x, y, logits)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.adjust_gradients(ctx)
            ctx.clip_gradients()
            optimizer.step()
            ctx.record_step(loss)
            self.after_step(ctx)

    def eval_model(self, ctx: ClientContext) -> torch.nn.Module:
        """Model a client is evaluated with in personalised evaluation (default: the global model)."""
        return ctx.model

    # ---------------------------------------------------------------- packed local step (``engine/packed.py``)
    #: A method class sets this on *itself* (it is not inherited: a subclass may change the local step) when its
    #: default local training (one phase of ``train_steps`` with SGD) is expressed by the three hooks below; the
    #: packed path then trains a round's clients at once (``fedbench.engine.packed.choose_training_path``).
    packed_step: ClassVar[bool] = False

    def packed_inputs(self, ctx: ClientContext) -> dict[str, torch.Tensor]:
        """Per-client tensors the packed hooks read (e.g. SCAFFOLD's c − c_i), taken from ``ctx`` as ``begin_local``
        would; it also creates the client state ``end_local`` reads. A tensor every client shares (the same object,
        e.g. ``ctx.global_params``) is passed once, unbatched."""
        return {}

    def packed_objective(self, call, params: torch.Tensor, inputs: dict[str, torch.Tensor], x, y, mask) -> torch.Tensor:
        """One client's ``objective`` for one batch, inside ``vmap``: ``params`` is its flat parameter vector,
        ``call(fn, params, x)`` runs ``fn(model, x)`` with them, ``mask`` marks the batch's real samples (a short
        last batch is padded). Default: FedAvg's mean cross-entropy."""
        return masked_cross_entropy(call(_logits, params, x), y, mask)

    def packed_adjust_gradients(
        self, inputs: dict[str, torch.Tensor], params: torch.Tensor, grad: torch.Tensor
    ) -> torch.Tensor:
        """``adjust_gradients`` of one client on its flat gradient (inside ``vmap``); returns the new gradient."""
        return grad

    # ---------------------------------------------------------------- accounting
    def extra_upload_floats(self, model_params: int) -> int:
        """Floats a client sends besides its model (SCAFFOLD: a control variate)."""
        return 0

    def extra_download_floats(self, model_params: int) -> int:
        return 0

    def attach_flops_per_round(
        self, *, steps: int, samples: int, batch_size: int, num_params: int, forward_flops: float, backward_flops: float
    ) -> float:
        """FLOPs a client adds to FedAvg's local training in one round ("attaching operations",
        FedTrip Table VIII; K = steps, n = samples, M = batch size, |w| = num_params, FP/BP per sample)."""
        return 0.0


def _logits(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model_outputs(model, x)[0]


def model_outputs(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logits, penultimate features) of a FedModel (head ∘ features); (logits, None) for others."""
    if hasattr(model, "features") and hasattr(model, "head"):
        # torch types a submodule or attribute as Tensor | Module, so mypy cannot see these two as methods
        features = model.features(x)  # type: ignore[operator]
        return model.head(features), features  # type: ignore[operator]
    return model(x), None


def weighted_average(vectors: list[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """Σ_k p_k·v_k, accumulated in float64 one vector at a time: averaging identical vectors (a frozen
    classifier every client holds) returns them bit for bit, and no K×P stack is materialised."""
    total = torch.zeros_like(vectors[0], dtype=torch.float64)
    for weight, vector in zip(weights.tolist(), vectors):
        total.add_(vector.to(torch.float64), alpha=weight)
    return total.to(vectors[0].dtype)


def mixing_weights(contexts: Sequence[ClientContext], key: str, symbol: str) -> dict[str, Any]:
    """The ``mixing_weights`` diagnostic: the scalar ``ctx.state[key]`` of each of the round's clients that holds
    one (a client that took no step may not), named ``symbol``."""
    held = [ctx for ctx in contexts if key in ctx.state]
    return {
        "clients": [ctx.client_id for ctx in held],
        "weight": [float(ctx.state[key]) for ctx in held],
        "symbol": symbol,
    }


def average_buffers(updates: list[ClientUpdate], weights: torch.Tensor) -> dict[str, torch.Tensor]:
    """Floating buffers are averaged with the model weights; integer ones (num_batches_tracked) are
    taken from the first client (they are equal when clients take the same number of steps)."""
    result: dict[str, torch.Tensor] = {}
    for name, first in updates[0].buffers.items():
        if first.is_floating_point():
            result[name] = weighted_average([u.buffers[name] for u in updates], weights)
        else:
            result[name] = first.clone()
    return result
