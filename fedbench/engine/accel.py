"""Speed switches for big models on CUDA that leave a run's result as it is up to floating-point rounding, and the
arithmetic precision a spec asks for.

- ``channels_last``: conv models' parameters (and so their activations) in NHWC, the layout cuDNN's fastest
  convolution kernels use on tensor-core GPUs. The flat weight vectors are unchanged (``flat_parameters`` reads
  any layout), so aggregation, checkpoints and method state do not see it.
- ``fused_optimizer``: ``torch.optim.SGD``/``Adam`` with ``fused=True`` (one kernel for every parameter's update)
  where PyTorch has it for the device; the same update formula.
- ``compile``: ``torch.compile`` of the working model (optional; the first rounds pay the compilation).

``Acceleration.for_device`` turns the first two on for CUDA when asked (``fedbench run --fast``, the default on
CUDA) and never on a CPU: CPU runs keep their exact code path, so CPU curves stay bit-identical.

Precision is a spec field (``RunSpec.precision``): ``fp32`` (the default) disables TF32 in cuBLAS and cuDNN — PyTorch
enables TF32 convolutions by default, which rounds their inputs to 10 mantissa bits, a change well beyond summation
order — and ``tf32`` enables both. It is in the spec (hash-neutral at ``fp32``, so existing runs keep their hashes)
because it changes results: a TF32 run is a different run. On a CPU it has no effect.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class Acceleration:
    channels_last: bool = False
    fused_optimizer: bool = False
    compile: bool = False

    @classmethod
    def for_device(cls, device: torch.device, *, fast: bool = True, compile: bool = False) -> Acceleration:
        """CUDA: channels-last and fused optimizers when ``fast``, ``torch.compile`` when ``compile``; CPU: none."""
        if device.type != "cuda":
            return cls()
        return cls(channels_last=fast, fused_optimizer=fast, compile=compile)

    def as_dict(self) -> dict[str, bool]:
        return asdict(self)


def has_convolutions(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def prepare_model(model: nn.Module, acceleration: Acceleration) -> nn.Module:
    """The working model in the chosen memory format (conv models only: channels-last means nothing to an MLP)."""
    if acceleration.channels_last and has_convolutions(model):
        model = model.to(memory_format=torch.channels_last)
    return model


def compiled_forward(model: nn.Module, acceleration: Acceleration) -> None:
    """``torch.compile`` the model's forward in place (``nn.Module.compile``), keeping the module, its parameters
    and methods (``features``, ``head``) as they are."""
    if acceleration.compile:
        model.compile()


def optimizer_options(acceleration: Acceleration, device: torch.device) -> dict[str, Any]:
    """Keyword arguments every client optimizer gets (``ClientContext.make_optimizer``)."""
    if acceleration.fused_optimizer and device.type == "cuda":
        return {"fused": True}
    return {}


def set_precision(precision: str, device: torch.device) -> dict[str, Any]:
    """Apply the spec's precision to this process's CUDA matmuls and convolutions; returns what was set, for the
    run's provenance. Nothing to set on a CPU."""
    if device.type != "cuda":
        return {"precision": precision, "tf32": False}
    tf32 = precision == "tf32"
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        # PyTorch ≥ 2.9's API, which brought matmul's and cuDNN convolutions' fp32_precision together (mixing it
        # with the legacy allow_tf32 flags is an error there)
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
        torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"  # type: ignore[attr-defined]
    else:
        matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    return {"precision": precision, "tf32": tf32}
