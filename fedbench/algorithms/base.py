"""The Algorithm base class *is* FedAvg; every other method overrides only the hooks where it differs.

Server side: ``init_server`` → per round ``payload`` → clients' ``local_train`` → ``aggregate``.
Client side, ``local_train`` runs E epochs (or a fixed number of steps) of the client optimizer and
calls, for every mini-batch: ``loss`` (objective), ``adjust_gradients`` (after backward, before the
optimizer step: e.g. SCAFFOLD's correction), ``after_step``. ``begin_local``/``end_local`` bracket a
client's training (e.g. snapshot a teacher, update a control variate). ``eval_model`` gives the model
a client is evaluated with (personalised FL); the default is the global model.

Weights travel as one flat parameter vector per model (``torch.nn.utils.parameters_to_vector``
order); floating-point buffers (BatchNorm running statistics) travel separately as a dict, so methods
can treat them explicitly (FedBN keeps them local, FedNova/LG-Mix mix them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict

from fedbench.engine.context import ClientContext, ServerState


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class ClientUpdate:
    """What a client sends back after local training."""

    client_id: int
    params: torch.Tensor                       # flat trained parameters w_k
    buffers: dict[str, torch.Tensor]           # BatchNorm running statistics etc.
    num_samples: int                           # |D_k| (training samples of the client)
    num_steps: int                             # local optimizer steps taken (FedNova's tau_k)
    train_loss: float                          # mean training loss over the local steps
    extra: dict[str, Any] = field(default_factory=dict)   # method-specific upload (e.g. delta c_i)


class Algorithm:
    """FedAvg (McMahan et al., 2017): sample-weighted averaging of locally trained models."""

    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel):
        self.params = params

    # ---------------------------------------------------------------- server side
    def init_server(self, server: ServerState) -> None:
        """Create server state (control variates, momentum, ...) in ``server.state``."""

    def payload(self, server: ServerState, round_index: int) -> dict[str, Any]:
        """What clients receive besides the global weights."""
        return {}

    def aggregation_weights(self, updates: list[ClientUpdate]) -> torch.Tensor:
        sizes = torch.tensor([float(u.num_samples) for u in updates], dtype=torch.float64)
        return (sizes / sizes.sum()).float()

    def aggregate(self, server: ServerState, updates: list[ClientUpdate], round_index: int) -> None:
        """w ← Σ_k (n_k / Σ n) · w_k, and the same weighting for floating-point buffers."""
        server.params = weighted_average([u.params for u in updates], self.aggregation_weights(updates))
        server.buffers = average_buffers(updates, self.aggregation_weights(updates))

    # ---------------------------------------------------------------- client side
    def begin_local(self, ctx: ClientContext) -> None:
        """Called after the global weights are loaded into ``ctx.model``, before the first step."""

    def loss(self, ctx: ClientContext, x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, y)

    def forward(self, ctx: ClientContext, x: torch.Tensor) -> torch.Tensor:
        """Model output for a training batch. Methods that need features call ``ctx.model.features``
        here and keep them in ``ctx.scratch`` for ``loss``."""
        return ctx.model(x)

    def adjust_gradients(self, ctx: ClientContext) -> None:
        """After ``backward``, before the optimizer step (gradient corrections pass through momentum)."""

    def after_step(self, ctx: ClientContext) -> None:
        """After each optimizer step."""

    def end_local(self, ctx: ClientContext, update: ClientUpdate) -> None:
        """After local training; may update ``ctx.state`` and add to ``update.extra``."""

    def local_train(self, ctx: ClientContext) -> ClientUpdate:
        model = ctx.model
        model.train()
        optimizer = ctx.make_optimizer(model.parameters())
        self.begin_local(ctx)
        for x, y in ctx.batches():
            logits = self.forward(ctx, x)
            loss = self.loss(ctx, x, y, logits)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.adjust_gradients(ctx)
            ctx.clip_gradients()
            optimizer.step()
            ctx.record_step(loss)
            self.after_step(ctx)
        update = ctx.make_update()
        self.end_local(ctx, update)
        return update

    def eval_model(self, ctx: ClientContext) -> torch.nn.Module:
        """Model a client is evaluated with in personalised evaluation (default: the global model)."""
        return ctx.model

    # ---------------------------------------------------------------- accounting
    def extra_upload_floats(self, model_params: int) -> int:
        """Floats a client sends besides its model (SCAFFOLD: a control variate)."""
        return 0

    def extra_download_floats(self, model_params: int) -> int:
        return 0


def weighted_average(vectors: list[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    stacked = torch.stack(vectors)
    return (weights.to(stacked.device, stacked.dtype)[:, None] * stacked).sum(0)


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
