"""Shared pieces of the personalised-FL methods: per-client models kept in ``ctx.state``, parameter
masks over the flat weight vector, and scoped freezing of parameter groups.

Personal models live in ``ctx.state`` as flat parameter vectors plus buffers (checkpointed with the run);
they are evaluated by loading them into the working model, never by per-client deep copies.
``PartialPersonalization`` is the common shape of FedPer, FedRep, FedAlt and FedBN: some parameters
(and buffers) stay on the client, the rest is FedAvg.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from fedbench.algorithms.base import Algorithm, only_trainable  # noqa: F401  (only_trainable: re-exported)
from fedbench.algorithms.context import ClientContext, ServerState, load_weights
from fedbench.models.base import FedModel


# ------------------------------------------------------------------------------ per-client models
def store_model(ctx: ClientContext, key: str, params: torch.Tensor, buffers: dict[str, torch.Tensor]) -> None:
    ctx.state[f"{key}_params"] = params.detach().clone()
    ctx.state[f"{key}_buffers"] = {name: b.detach().clone() for name, b in buffers.items()}


def restore_model(ctx: ClientContext, key: str, model: nn.Module) -> bool:
    """Load the client's stored model ``key`` into ``model``; False if the client has none yet."""
    if f"{key}_params" not in ctx.state:
        return False
    load_weights(model, ctx.state[f"{key}_params"], ctx.state[f"{key}_buffers"])
    return True


def remember_initial_model(server: ServerState) -> None:
    """Keep w^0 on the server: personal models (Ditto, APFL, L2SGD) start from it on first participation."""
    server.state["initial_params"] = server.params.clone()
    server.state["initial_buffers"] = {name: b.clone() for name, b in server.buffers.items()}


def initial_model_payload(server: ServerState) -> dict:
    return {"initial_params": server.state["initial_params"], "initial_buffers": server.state["initial_buffers"]}


def restore_or_initial(ctx: ClientContext, key: str, model: nn.Module) -> None:
    if not restore_model(ctx, key, model):
        load_weights(model, ctx.payload["initial_params"], ctx.payload["initial_buffers"])


class WithClassifier(FedModel):
    """A model's own encoder (shared, not copied) under another classifier: a personalised model whose head is not
    the model's (FedProto's nearest prototype, FedRoD's two heads), still a FedModel for evaluation and its
    diagnostics."""

    def __init__(self, model: FedModel, classifier: nn.Module):
        super().__init__()
        self.encoder = model.encoder
        self.classifier = classifier
        self.feature_dim = model.feature_dim


# ------------------------------------------------------------------------------ parameter groups
def parameter_mask(model: nn.Module, names: Iterable[str]) -> torch.Tensor:
    """Boolean mask over the flat parameter vector selecting the named parameters."""
    chosen = set(names)
    return torch.cat(
        [
            torch.full((p.numel(),), name in chosen, dtype=torch.bool, device=p.device)
            for name, p in model.named_parameters()
        ]
    )


# ------------------------------------------------------------------------------ partial personalisation
class PartialPersonalization(Algorithm):
    """The parameters named by ``local_parameter_names`` (and buffers by ``local_buffer_names``) stay on
    each client; the server averages and broadcasts the rest. On first participation a client's local
    part is the server's copy, which is never averaged and so stays w^0 (every client starts alike)."""

    def local_parameter_names(self, model: nn.Module) -> list[str]:
        raise NotImplementedError

    def local_buffer_names(self, model: nn.Module) -> list[str]:
        return []

    def bind_model(self, spec, model, input_shape, num_classes):
        """The local part is fixed by the model: its mask over the flat vector and its buffer names, bound once
        (the server's ``aggregate`` reads them)."""
        super().bind_model(spec, model, input_shape, num_classes)
        self._mask = parameter_mask(model, self.local_parameter_names(model))
        self._local_buffers = tuple(self.local_buffer_names(model))

    def local_mask(self, model: nn.Module) -> torch.Tensor:
        if getattr(self, "_mask", None) is None:  # hook-level use without bind_model (tests)
            self._mask = parameter_mask(model, self.local_parameter_names(model))
        return self._mask

    def load_personal(self, ctx: ClientContext) -> None:
        """Global weights (already in ``ctx.model``) with the client's own local part put back."""
        if "local_params" not in ctx.state:
            return
        params = ctx.current_params()
        params[self.local_mask(ctx.model)] = ctx.state["local_params"]
        buffers = dict(ctx.current_buffers(), **ctx.state["local_buffers"])
        load_weights(ctx.model, params, buffers)

    def begin_local(self, ctx):
        self.load_personal(ctx)

    def end_local(self, ctx, update):
        ctx.state["local_params"] = update.params[self.local_mask(ctx.model)].clone()
        ctx.state["local_buffers"] = {n: update.buffers[n].clone() for n in self.local_buffer_names(ctx.model)}

    def aggregate(self, server, updates, round_index):
        mask = self._mask
        kept_params = server.params.clone()
        kept_buffers = {n: server.buffers[n] for n in self._local_buffers}
        super().aggregate(server, updates, round_index)
        server.params[mask] = kept_params[mask]  # the local part is never averaged
        server.buffers.update(kept_buffers)

    def eval_model(self, ctx):
        self.load_personal(ctx)
        return ctx.model
