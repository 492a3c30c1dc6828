"""Cost accounting for models: parameter counts, bytes of a model update, FLOPs per sample, model cards, and the
number of local optimizer steps a client takes in a round (``local_steps_per_round``: the one formula the engine's
mini-batch loop and the per-round cost figures share), and the work of a client round (``client_round_work``: the one
formula of the report's GFLOPs figures and of ``fedbench plan``).

FLOPs are measured, not estimated: one forward+backward pass at the model's real input
shape under ``torch.utils.flop_counter.FlopCounterMode``, divided by the batch size. That counter counts
matrix products and convolutions as 2 FLOPs per multiply-accumulate and ignores bias adds, BN, activations
and pooling, so ``flops_forward / 2`` is comparable with "MACs" tables (thop also counts conv bias: FedTrip's
Table III gives 422,944 MACs for its CNN where the counter gives 416,520; the difference is the 6,424 bias adds).

``model_card`` builds the model on the meta device (no memory, no initialisation cost) and caches the card per
configuration, so listing every model is cheap.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

from fedbench.data import dataset_meta
from fedbench.errors import ConfigError, FedbenchError
from fedbench.models import MODELS, build_model
from fedbench.models.base import FedModel

BYTES_PER_FLOAT32 = 4


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Numbers of parameters: all, trainable (``requires_grad``), and in the head / body of a FedModel."""
    params = dict(model.named_parameters())
    counts = {
        "params": sum(p.numel() for p in params.values()),
        "trainable_params": sum(p.numel() for p in params.values() if p.requires_grad),
    }
    if isinstance(model, FedModel):
        counts["head_params"] = sum(params[n].numel() for n in model.head_parameter_names())
        counts["body_params"] = sum(params[n].numel() for n in model.body_parameter_names())
        counts["batchnorm_params"] = sum(params[n].numel() for n in model.batchnorm_parameter_names())
    return counts


def buffer_count(model: nn.Module) -> int:
    """Floating-point buffer entries (BN running means/variances); integer counters are not counted."""
    return sum(b.numel() for b in model.buffers() if b.is_floating_point())


def update_bytes(model: nn.Module, include_buffers: bool = False, trainable_only: bool = False) -> int:
    """Bytes of one model update sent as float32: every parameter (or only the trainable ones, since frozen
    ones such as an ETF classifier never change), plus the floating-point buffers if ``include_buffers``
    (FedNova/LG-Mix send BN statistics; FedBN keeps them local)."""
    values = sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
    if include_buffers:
        values += buffer_count(model)
    return BYTES_PER_FLOAT32 * values


def steps_per_epoch(samples: int, batch_size: int, drop_last: bool = False) -> int:
    """Mini-batches of one pass over ``samples``: ⌈n/B⌉, or ⌊n/B⌋ with ``drop_last`` — but 1 when 0 < n < B (a
    client smaller than a batch still trains on its one partial batch rather than not at all); 0 for no samples."""
    if samples <= 0:
        return 0
    return max(1, samples // batch_size) if drop_last else -(-samples // batch_size)


def local_steps_per_round(
    samples: int, batch_size: int, *, local_epochs: int = 1, local_steps: int | None = None, drop_last: bool = False
) -> int:
    """Optimizer steps of one client's local training in one round: ``local_steps`` when set (a fixed step budget
    that cycles through fresh permutations), else ``local_epochs`` passes (``steps_per_epoch``); 0 for a client
    without training samples. ``ClientContext.batches`` yields exactly this many batches."""
    if samples <= 0:
        return 0
    return local_steps if local_steps else local_epochs * steps_per_epoch(samples, batch_size, drop_last)


def spec_steps_per_round(spec, samples: int) -> int:
    """``local_steps_per_round`` with a RunSpec's batch size, epochs or step budget and ``drop_last``."""
    return local_steps_per_round(
        samples, spec.batch_size, local_epochs=spec.local_epochs, local_steps=spec.local_steps, drop_last=spec.drop_last
    )


def samples_per_round(spec, samples: float) -> float:
    """Training samples one client processes in one round (forward + backward each): ``local_steps`` full batches
    under a step budget, else ``local_epochs`` passes over its ``samples`` (FedTrip §4's n_k·E)."""
    if spec.local_steps:
        # (a mean client size may be fractional; under a step budget only whether a client has samples counts)
        return float(spec_steps_per_round(spec, math.ceil(samples)) * spec.batch_size)
    return float(samples * spec.local_epochs)


def client_round_work(spec, samples: float, card: dict[str, Any], algorithm: Any, unit: str = "flops") -> float:
    """The work of one participating client in one round: n_k·E·W + A_method (FedTrip §4, Table V). n_k·E is the
    samples it processes (``samples_per_round`` of its ``samples`` training samples: may be a mean over clients; the
    steps count whole samples), W the work of one sample and A_method the method's attaching operations
    (``algorithm.attach_flops_per_round``, given one sample's forward and backward work), from the model's ``card``
    (``model_card``) in ``unit``:

    * "flops": FLOPs of training, forward + backward per sample (``fedbench plan``'s compute and time estimate);
    * "macs": forward multiply-accumulates per sample, thop-style, as FedTrip counts its "FLOPs" (the report's
      ``gflops_to_target``, FedTrip Table V).
    """
    if unit == "flops":
        per_sample, forward = card["flops_train"], card["flops_forward"]
        backward = card["flops_train"] - forward
    elif unit == "macs":
        per_sample = forward = card["macs_forward"]
        backward = card["flops_train"] / 2 - forward
    else:
        raise ValueError(f"unit {unit!r}: expected 'flops' or 'macs'")
    attach = algorithm.attach_flops_per_round(
        steps=spec_steps_per_round(spec, int(samples)),  # the engine's formula (drop_last, step budgets)
        samples=int(samples),
        batch_size=spec.batch_size,
        num_params=card["params"],
        forward_flops=forward,
        backward_flops=backward,
    )
    return samples_per_round(spec, samples) * per_sample + attach


def _conv_backward_flop(
    grad_out_shape,
    x_shape,
    w_shape,
    _bias,
    _stride,
    _padding,
    _dilation,
    transposed,
    _output_padding,
    _groups,
    output_mask,
    out_shape=None,
    **kwargs,
) -> int:
    """FLOPs of ``aten.convolution_backward``: each requested gradient costs as much as the forward conv.

    grad_input is the transposed convolution of grad_out with the weight; grad_weight multiplies every weight
    entry with batch × output-positions entries. torch 2.14's own formula misses the division by ``groups`` in
    grad_weight (pytorch/pytorch PR #183405) and counts a depthwise conv's weight gradient C times over.
    """
    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


_FLOP_FORMULAS = {torch.ops.aten.convolution_backward: _conv_backward_flop}


def measure_flops(model: nn.Module, input_shape: tuple[int, ...], batch_size: int = 2) -> tuple[int, int]:
    """(forward, forward+backward) FLOPs per sample, from one training-style pass.

    Runs a batch of ``batch_size`` random inputs on the model's device (use the meta device for big models)
    in eval mode, so BN running statistics are untouched; existing ``.grad`` fields are restored afterwards.
    The backward pass computes no gradient for the input, as in training.
    """
    parameters = list(model.parameters())
    device = parameters[0].device if parameters else torch.device("cpu")
    saved_grads = [p.grad for p in parameters]
    was_training = model.training
    model.eval()
    x = torch.randn(batch_size, *input_shape, device=device)
    try:
        with FlopCounterMode(display=False, custom_mapping=_FLOP_FORMULAS) as counter:
            output = model(x)
            forward = counter.get_total_flops()
            if output.requires_grad:
                output.float().sum().backward()
            total = counter.get_total_flops()
    finally:
        model.train(was_training)
        for p, grad in zip(parameters, saved_grads):
            p.grad = grad
    return forward // batch_size, total // batch_size


def flops_per_sample(
    model: nn.Module, input_shape: tuple[int, ...], backward: bool = False, batch_size: int = 2
) -> int:
    """FLOPs of one forward pass (``backward=False``) or one forward+backward pass per sample."""
    forward, train = measure_flops(model, input_shape, batch_size)
    return train if backward else forward


def _parse_shape(value: Any) -> tuple[int, ...]:
    parts = value.replace("x", ",").replace("×", ",").split(",") if isinstance(value, str) else value
    try:
        shape = tuple(int(v) for v in parts)
    except (TypeError, ValueError) as exc:  # the message names the value as the user wrote it
        raise ConfigError(f"input_shape must be like [3, 32, 32] or '3x32x32', got {value!r}") from exc
    if not shape or min(shape) < 1:
        raise ConfigError(f"input_shape must be positive sizes like [3, 32, 32], got {value!r}")
    return shape


def _build_on_meta(name: str, num_classes: int, input_shape: tuple[int, ...], params: dict[str, Any]) -> nn.Module:
    try:
        with torch.device("meta"):
            return build_model(name, num_classes, input_shape, **params)
    except FedbenchError:
        raise
    except (NotImplementedError, RuntimeError):  # an op without a meta kernel: build for real, RNG untouched
        with torch.random.fork_rng(devices=[]):
            return build_model(name, num_classes, input_shape, **params)


@functools.lru_cache(maxsize=256)
def has_batchnorm(name: str, dataset: str, params_json: str) -> bool:
    """Whether model ``name`` (built on the meta device for ``dataset``'s classes and input, with the JSON ``params``)
    has BatchNorm layers; cached, for decisions made from a spec alone (FedFomo's ``result_revision``)."""
    meta = dataset_meta(dataset)
    model = _build_on_meta(name, meta.num_classes, tuple(meta.input_shape), json.loads(params_json))
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def _card(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    info = MODELS.info(name)
    params = dict(overrides)
    try:
        num_classes = int(params.pop("num_classes", info["num_classes"]))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"num_classes must be an integer, got {overrides['num_classes']!r}") from exc
    if num_classes < 1:
        raise ConfigError(f"num_classes must be at least 1, got {num_classes}")
    input_shape = _parse_shape(params.pop("input_shape", info["input_shape"]))
    try:
        model = _build_on_meta(name, num_classes, input_shape, params)
        flops_forward, flops_train = measure_flops(model, input_shape)
    except (ValueError, TypeError, RuntimeError) as exc:
        if not overrides:  # the paper configuration always builds: this is a bug, keep its traceback
            raise
        # the user's configuration does not fit the architecture (an input too small for its kernels, a shape of
        # the wrong rank): say which values, and PyTorch's reason, on one line
        settings = ", ".join(f"{key}={value!r}" for key, value in overrides.items())
        reason = " ".join(str(exc).split())
        raise ConfigError(f"model {name!r} cannot be built with {settings}: {reason}") from None
    return {
        "name": name,
        "papers": list(info.get("papers", ())),
        "description": info.get("description", ""),
        "faithful": info.get("faithful", True),
        "task": info.get("task", "classification"),
        "input_shape": list(input_shape),
        "num_classes": num_classes,
        "model_params": params,
        "feature_dim": getattr(model, "feature_dim", None),
        "feature": info.get("feature", ""),
        "split_points": model.split_points() if isinstance(model, FedModel) else [],
        **parameter_counts(model),
        "buffers": buffer_count(model),
        "update_bytes": update_bytes(model),
        "update_bytes_with_buffers": update_bytes(model, include_buffers=True),
        "flops_forward": flops_forward,
        "flops_train": flops_train,
        "macs_forward": flops_forward // 2,
    }


_CARDS: dict[str, dict[str, Any]] = {}


def model_card(name: str, **overrides: Any) -> dict[str, Any]:
    """A JSON-ready description of model ``name`` with its cost at the paper configuration.

    ``overrides`` may set ``num_classes``, ``input_shape`` and any model parameter (``classifier="etf"``);
    unknown parameters raise ConfigError, unknown names UnknownNameError. Cards are cached per configuration.
    """
    key = json.dumps([name, overrides], sort_keys=True, default=str)
    if key not in _CARDS:
        _CARDS[key] = _card(name, overrides)
    return copy.deepcopy(_CARDS[key])


def model_cards() -> list[dict[str, Any]]:
    """Cards of every registered model at its paper configuration, sorted by name."""
    return [model_card(name) for name in MODELS.names()]
