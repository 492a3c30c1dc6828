"""What a method sees, and what the engine and the methods exchange: the server's state, a client's context
(``ClientContext``), what a client sends back (``ClientUpdate``) and the frozen spare models a context lends out.
The engine builds every context from its run state (``fedbench/engine/state.py``)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from fedbench.algorithms.functional import flat_parameters
from fedbench.cost import spec_steps_per_round, steps_per_epoch
from fedbench.data.store import TensorData, cutout, horizontal_flip, random_affine, random_crop
from fedbench.spec import RunSpec


@dataclass
class ClientUpdate:
    """What a client sends back after local training."""

    client_id: int
    params: torch.Tensor  # flat trained parameters w_k
    buffers: dict[str, torch.Tensor]  # BatchNorm running statistics etc.
    num_samples: int  # |D_k| (training samples of the client)
    num_steps: int  # local optimizer steps taken (FedNova's tau_k)
    train_loss: float  # mean training loss over the local steps
    extra: dict[str, Any] = field(default_factory=dict)  # method-specific upload (e.g. delta c_i)


@dataclass
class ServerState:
    """Global weights (flat vector), floating/int buffers, and method-specific server state tensors."""

    params: torch.Tensor
    buffers: dict[str, torch.Tensor]
    state: dict[str, Any] = field(default_factory=dict)


def param_views(vector: torch.Tensor, model: nn.Module) -> list[torch.Tensor]:
    """Views of a flat vector shaped like the model's parameters (no copies)."""
    views, offset = [], 0
    for p in model.parameters():
        views.append(vector[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
    return views


@torch.no_grad()
def load_weights(model: nn.Module, params: torch.Tensor, buffers: dict[str, torch.Tensor] | None = None) -> None:
    """Copy a flat vector (and buffers) into the model. (``nn.utils.vector_to_parameters`` would make
    the parameters *views* of the vector, so training would silently modify the global weights.)"""
    for p, v in zip(model.parameters(), param_views(params, model)):
        p.copy_(v)
    if buffers is not None:
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])


class ClientContext:
    """Everything a client's local training may use. Methods never touch files, the registry or
    other clients' state; their persistent per-client tensors live in ``state`` (checkpointed)."""

    def __init__(
        self,
        *,
        spec: RunSpec,
        client_id: int,
        round_index: int,
        model: nn.Module,
        server: ServerState,
        payload: dict[str, Any],
        state: dict[str, Any],
        data: TensorData,
        indices: torch.Tensor,
        generator: torch.Generator,
        device: torch.device,
        lr: float,
        spare_models: SpareModels | None = None,
        holdout: torch.Tensor | None = None,
        optimizer_options: dict[str, Any] | None = None,
    ):
        self.spec = spec
        self.client_id = client_id
        self.round_index = round_index
        self.model = model
        self.global_params = server.params  # read-only w^t
        self.global_buffers = server.buffers
        self.global_tensors = param_views(server.params, model)  # w^t shaped like the parameters
        self.payload = payload
        self.state = state
        self.data = data
        self.task = data.task  # "classification" or "segmentation" (DatasetMeta.task)
        self.indices = indices  # the client's training samples (``Algorithm.local_split``)
        self.holdout = holdout  # samples the method holds out of training (FedFomo's validation)
        self.num_samples = int(indices.numel())
        self.generator = generator
        self.device = device
        self.lr = lr
        self.spare_models = spare_models
        self.optimizer_options = optimizer_options or {}  # e.g. fused=True on CUDA (``engine/accel.py``)
        self.scratch: dict[str, Any] = {}  # per-client, per-round temporaries (e.g. features)
        self.num_steps = 0
        self._loss_sum = torch.zeros((), device=device)

    # ------------------------------------------------------------------ frozen models
    def frozen_model(
        self, slot: str, params: torch.Tensor, buffers: dict[str, torch.Tensor] | None = None
    ) -> nn.Module:
        """A frozen (eval mode, no grad) model holding ``params``, e.g. MOON's previous local model.
        The engine keeps one spare instance per slot for the whole run: no per-client deep copies."""
        assert self.spare_models is not None, "engine created no spare models"
        return self.spare_models.load(slot, params, buffers)

    def global_model(self) -> nn.Module:
        """The round's global model w^t as a frozen teacher (FedNTD, KD, MOON, FedDr+)."""
        return self.frozen_model("global", self.global_params, self.global_buffers)

    # ------------------------------------------------------------------ training helpers
    def make_optimizer(self, parameters) -> torch.optim.Optimizer:
        """A fresh optimizer each round (as in FedAvg/FedProx/FedDC code bases)."""
        opt = self.spec.optimizer
        params = [p for p in parameters if p.requires_grad]
        if opt.name == "adam":
            return torch.optim.Adam(
                params, lr=self.lr, betas=opt.betas, weight_decay=opt.weight_decay, **self.optimizer_options
            )
        return torch.optim.SGD(
            params,
            lr=self.lr,
            momentum=opt.momentum,
            weight_decay=opt.weight_decay,
            nesterov=opt.nesterov,
            **self.optimizer_options,
        )

    def steps_per_epoch(self) -> int:
        return steps_per_epoch(self.num_samples, self.spec.batch_size, self.spec.drop_last)

    def planned_steps(self) -> int:
        """The round's local steps (``fedbench.cost.local_steps_per_round``, the formula cost figures use too)."""
        return spec_steps_per_round(self.spec, self.num_samples)

    def batches(
        self, indices: torch.Tensor | None = None, epochs: int | None = None, steps: int | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Mini-batches for the local objective: ``local_steps`` steps if set, else ``local_epochs``
        passes over a fresh permutation (``batch_order = "fixed"``: over the samples in their stored order, the
        same every round); each batch is gathered by index and augmented as a batch.
        ``epochs`` or ``steps`` ask for that many passes or steps instead (FedRep's head/body phases,
        FedAlt's split, Per-FedAvg's adaptation step, fine-tuning)."""
        indices = self.indices if indices is None else indices
        size, batch = int(indices.numel()), self.spec.batch_size
        if steps is not None:
            remaining = steps if size else 0
        elif epochs is not None:
            remaining = epochs * steps_per_epoch(size, batch, self.spec.drop_last)
        else:
            remaining = self.planned_steps() if size else 0
        fixed = self.spec.batch_order == "fixed"
        while remaining > 0:
            order = indices if fixed else indices[torch.randperm(size, generator=self.generator, device=indices.device)]
            stop = size - size % batch if self.spec.drop_last and size >= batch else size
            for start in range(0, stop, batch):
                if remaining == 0:
                    return
                chosen = order[start : start + batch]
                if self.task == "segmentation":
                    yield self.augment_with_masks(self.data.train_x[chosen], self.data.train_y[chosen])
                else:
                    yield self.augment(self.data.train_x[chosen]), self.data.train_y[chosen]
                remaining -= 1

    def augment(
        self, x: torch.Tensor, fill: torch.Tensor | float | None = None, cutout_channels: int | None = None
    ) -> torch.Tensor:
        aug = self.spec.augmentation
        fill = self.data.fill if fill is None else fill
        if aug.crop_padding:
            x = random_crop(x, aug.crop_padding, self.generator, fill)
        if aug.horizontal_flip:
            x = horizontal_flip(x, self.generator)
        if aug.affine is not None:
            x = random_affine(x, aug.affine.degrees, aug.affine.translate, aug.affine.scale, self.generator, fill)
        if aug.cutout:  # last, on normalised tensors: the square is 0 after normalisation (DeVries & Taylor 2017)
            x = cutout(x, aug.cutout, self.generator, cutout_channels)
        return x

    def augment_with_masks(self, x: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Segmentation: image and masks get the same crop/flip/affine (one transform of their channel
        concatenation, so the same random draws); masks pad with 0 (background) and are re-binarised
        after the affine's bilinear resampling. Cutout blanks the image only; the masks keep their labels."""
        aug = self.spec.augmentation
        if not (aug.crop_padding or aug.horizontal_flip or aug.affine is not None or aug.cutout):
            return x, masks
        channels = x.shape[1]
        fill = (
            self.data.fill
            if torch.is_tensor(self.data.fill)
            else torch.full((1, channels, 1, 1), float(self.data.fill))
        )
        fill = torch.cat([fill.to(x.device), torch.zeros(1, masks.shape[1], 1, 1, device=x.device)], dim=1)
        both = self.augment(torch.cat([x, masks.to(x.dtype)], dim=1), fill, cutout_channels=channels)
        return both[:, :channels], (both[:, channels:] > 0.5).to(masks.dtype)

    def clip_gradients(self) -> None:
        if self.spec.clip_grad_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.spec.clip_grad_norm)

    def record_step(self, loss: torch.Tensor) -> None:
        self._loss_sum += loss.detach()
        self.num_steps += 1

    def current_params(self) -> torch.Tensor:
        return flat_parameters(self.model.parameters()).detach().clone()

    def current_buffers(self) -> dict[str, torch.Tensor]:
        return {name: b.detach().clone() for name, b in self.model.named_buffers()}

    def make_update(self) -> ClientUpdate:
        mean_loss = (self._loss_sum / max(1, self.num_steps)).item()
        return ClientUpdate(
            client_id=self.client_id,
            params=self.current_params(),
            buffers=self.current_buffers(),
            num_samples=self.num_samples,
            num_steps=self.num_steps,
            train_loss=mean_loss,
        )


class SpareModels:
    """Frozen model instances, one per slot, created on first use from the working model."""

    def __init__(self, template: nn.Module):
        self.template = template
        self.slots: dict[str, nn.Module] = {}

    def load(self, slot: str, params: torch.Tensor, buffers: dict[str, torch.Tensor] | None) -> nn.Module:
        model = self.slots.get(slot)
        if model is None:
            model = copy.deepcopy(self.template)
            for p in model.parameters():
                p.requires_grad_(False)
            self.slots[slot] = model
        load_weights(model, params, buffers)
        return model.eval()
