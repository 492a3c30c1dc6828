"""The packed training path: the participating clients of one round trained at once, with stacked parameters.

The sequential path (``engine/loop.py``) trains a round's K clients one after another, each with many small
kernels; for the small models of FedTrip/FedTR/digits tables a GPU then idles. Here the K clients' parameters are
one (K, P) tensor, a step's K mini-batches one (K, B, ...) tensor, and one ``torch.vmap`` of
``torch.func.grad_and_value`` over ``torch.func.functional_call`` computes all K gradients in the kernels of one
(batched) model. SGD (momentum, weight decay, Nesterov: ``torch.optim.SGD``'s update, written out) runs on the
stacked tensors.

The result equals the sequential path's up to floating-point summation order (``tests/engine/test_packed.py`` compares
the two in float64), because everything that decides a client's result is the sequential path's own:

- the batches: each client's ``ClientContext.batches`` (its keyed generator stream, ``fedbench.seeding``;
  augmentation included), drawn in the same order; the round's steps follow ``cost.local_steps_per_round``;
- unequal clients: a client whose steps are done leaves the stack (only the active rows step); a short last batch
  is padded (with copies of its own first sample) and the loss is the per-client mean over the real samples;
- client state: ``packed_inputs`` reads it as the method's ``begin_local`` does, and the method's own
  ``end_local`` writes it back from an ordinary ``ClientUpdate``.

Which runs can be packed is decided in one place, ``choose_training_path``, with a reason a user can read (recorded
in each run's provenance): the method must declare ``packed_step`` on its own class (an inherited declaration
does not count: a subclass may change the local step), and the model must have no BatchNorm buffers, no dropout
and no frozen parameters; the optimizer must be SGD without gradient clipping. ``auto`` packs on CUDA only:
on a CPU the per-client kernels already keep the core busy, and the packed path measured slower
(``benchmarks/gpu_throughput.py``, README "Benchmarks").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from fedbench.algorithms.context import ClientContext, ClientUpdate
from fedbench.settings import Packing

if TYPE_CHECKING:
    from fedbench.engine.state import RunState
    from fedbench.spec import RunSpec


@dataclass(frozen=True)
class TrainingPath:
    """Which path trains a run's clients, and why (``provenance["packing"]``)."""

    path: str  # "packed" or "sequential"
    reason: str

    @property
    def packed(self) -> bool:
        return self.path == Packing.PACKED

    def as_dict(self) -> dict[str, str]:
        return {"executor": self.path, "reason": self.reason}  # the recorded provenance keeps its key


def declares_packed_step(algorithm: Any) -> bool:
    """True when the algorithm's own class (not a parent) declares ``packed_step = True``."""
    return bool(type(algorithm).__dict__.get("packed_step", False))


def unpackable_reason(algorithm: Any, spec: RunSpec, model: nn.Module) -> str | None:
    """Why this run's local step cannot be packed, or None when it can."""
    name = spec.algorithm
    if not declares_packed_step(algorithm):
        return f"method {name} does not declare a packed local step"
    if getattr(algorithm.params, "regularizers", ()):
        return f"method {name} carries regularizers, which the packed step does not express"
    if spec.optimizer.name != "sgd":
        return f"optimizer {spec.optimizer.name} (the packed step implements SGD)"
    if spec.clip_grad_norm:
        return "gradient clipping (clip_grad_norm) is not packed"
    if any(True for _ in model.buffers()):
        return f"model {spec.model} has buffers (BatchNorm running statistics), which are not packed"
    if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return f"model {spec.model} has dropout, whose per-client random masks the packed step cannot reproduce"
    if any(not p.requires_grad for p in model.parameters()):
        return f"model {spec.model} has frozen parameters"
    return None


def choose_training_path(
    requested: Packing, algorithm: Any, spec: RunSpec, model: nn.Module, device: torch.device
) -> TrainingPath:
    """The one decision of which path trains a run (``Settings.packing``: auto, packed or sequential). A run that
    cannot be packed falls back to the sequential path, whatever was requested, with the reason."""
    if requested == Packing.SEQUENTIAL:
        return TrainingPath("sequential", "requested")
    reason = unpackable_reason(algorithm, spec, model)
    if reason is not None:
        return TrainingPath("sequential", f"fallback: {reason}")
    if spec.clients_per_round < 2:
        return TrainingPath("sequential", "one client per round: nothing to pack")
    if requested == Packing.AUTO and device.type != "cuda":
        # the recorded reason's wording is kept, so that reports of earlier runs read alike
        return TrainingPath("sequential", "auto: the packed executor is used on CUDA only (slower on a CPU)")
    return TrainingPath("packed", "requested" if requested == Packing.PACKED else "auto: CUDA, packable run")


# ------------------------------------------------------------------------------------------ the packed step
class _Call(nn.Module):
    """Lets ``functional_call`` run any function of the model (``features``, an encoder slice), not only forward."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, fn: Callable[[nn.Module, torch.Tensor], Any], x: torch.Tensor) -> Any:
        return fn(self.model, x)


class ModelCall:
    """``call(fn, flat, x)``: ``fn(model, x)`` with the model's parameters taken from one client's flat vector (the
    ``parameters_to_vector`` order), inside ``vmap``."""

    def __init__(self, model: nn.Module):
        self.wrapper = _Call(model)
        self.layout = [(f"model.{name}", p.numel(), p.shape) for name, p in model.named_parameters()]

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        views, offset = {}, 0
        for name, size, shape in self.layout:
            views[name] = flat[offset : offset + size].view(shape)
            offset += size
        return views

    def __call__(self, fn: Callable[[nn.Module, torch.Tensor], Any], flat: torch.Tensor, x: torch.Tensor) -> Any:
        return functional_call(self.wrapper, self.views(flat), (fn, x))


def _stack_batches(batches: list[tuple[torch.Tensor, torch.Tensor]], dtype: torch.dtype):
    """(K, B, ...) inputs, (K, B) labels and (K, B) mask: a short batch padded with copies of its first sample."""
    size = max(int(x.shape[0]) for x, _ in batches)
    xs, ys, masks = [], [], []
    for x, y in batches:
        short = size - int(x.shape[0])
        mask = torch.ones(size, dtype=dtype, device=x.device)
        if short:
            x = torch.cat([x, x[:1].expand(short, *x.shape[1:])])
            y = torch.cat([y, y[:1].expand(short)])
            mask[size - short :] = 0
        xs.append(x)
        ys.append(y)
        masks.append(mask)
    return torch.stack(xs), torch.stack(ys), torch.stack(masks)


def sgd_update(
    params: torch.Tensor, grad: torch.Tensor, buffer: torch.Tensor | None, lr: float, spec: RunSpec
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One ``torch.optim.SGD`` step (dampening 0) on stacked rows. A fresh optimizer's first step sets the
    momentum buffer to d_p; starting from a zero buffer, m·0 + d_p = d_p exactly."""
    opt = spec.optimizer
    d_p = grad
    if opt.weight_decay:
        d_p = d_p.add(params, alpha=opt.weight_decay)
    if opt.momentum:
        assert buffer is not None
        buffer = buffer.mul(opt.momentum).add(d_p)
        d_p = d_p.add(buffer, alpha=opt.momentum) if opt.nesterov else buffer
    return params.add(d_p, alpha=-lr), buffer


def train_round(
    state: RunState, algorithm: Any, clients: list[int], round_index: int, lr: float, payload: dict[str, Any]
) -> tuple[list[ClientUpdate], list[ClientContext]]:
    """Train ``clients`` of round ``round_index`` at once; returns their updates and contexts as the sequential loop
    would (``end_local`` has run for each)."""
    spec = state.spec
    contexts = [state.client_context(algorithm, c, round_index, lr=lr, payload=payload) for c in clients]
    state.model.train()
    inputs = [algorithm.packed_inputs(ctx) for ctx in contexts]
    steps = [ctx.planned_steps() if ctx.num_samples else 0 for ctx in contexts]
    streams = [ctx.batches() for ctx in contexts]
    count = len(contexts)

    # inputs every client shares (the same tensor object, e.g. w^t) are passed once, unbatched
    shared = {key: all(i[key] is inputs[0][key] for i in inputs) for key in inputs[0]} if inputs else {}
    stacked = {key: inputs[0][key] if shared[key] else torch.stack([i[key] for i in inputs]) for key in shared}
    input_dims = {key: None if shared[key] else 0 for key in shared}

    call = ModelCall(state.model)

    def objective(flat, client_inputs, x, y, mask):
        loss = algorithm.packed_objective(call, flat, client_inputs, x, y, mask)
        return loss, loss.detach()

    step = vmap(grad_and_value(objective, has_aux=True), in_dims=(0, input_dims, 0, 0, 0))
    adjust = vmap(algorithm.packed_adjust_gradients, in_dims=(input_dims, 0, 0))

    params = state.server.params.detach().unsqueeze(0).repeat(count, 1)
    buffer = torch.zeros_like(params) if spec.optimizer.momentum else None
    loss_sums = torch.zeros(count, dtype=params.dtype, device=params.device)
    for index in range(max(steps, default=0)):
        active = [k for k in range(count) if steps[k] > index]
        x, y, mask = _stack_batches([next(streams[k]) for k in active], params.dtype)
        rows = None if len(active) == count else torch.tensor(active, device=params.device)
        own = params if rows is None else params[rows]
        own_inputs = {key: v if shared[key] or rows is None else v[rows] for key, v in stacked.items()}
        own_buffer = buffer if buffer is None or rows is None else buffer[rows]
        grad, (_, loss) = step(own, own_inputs, x, y, mask)
        grad = adjust(own_inputs, own, grad)
        new_params, new_buffer = sgd_update(own, grad, own_buffer, lr, spec)
        if rows is None:
            params, buffer = new_params, new_buffer
            loss_sums += loss
        else:
            params[rows] = new_params
            if buffer is not None and new_buffer is not None:
                buffer[rows] = new_buffer
            loss_sums[rows] += loss

    updates = []
    for k, ctx in enumerate(contexts):
        ctx.num_steps = steps[k]
        update = ClientUpdate(
            client_id=ctx.client_id,
            params=params[k].clone(),
            buffers={},  # packed models have no buffers (``unpackable_reason``)
            num_samples=ctx.num_samples,
            num_steps=steps[k],
            train_loss=(loss_sums[k] / max(1, steps[k])).item(),
        )
        algorithm.end_local(ctx, update)
        updates.append(update)
    return updates, contexts
