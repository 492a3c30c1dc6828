"""How the contract's checks compare two runs: nested values (tensors through ``torch.testing.assert_close``, exact
unless a tolerance is given), curves, final states, and, for a declared FedAvg setting, the first round two runs
differ in and whether only by rounding (``ROUNDING_ULPS``). Each says, in words, where two runs first differ."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from fedbench.engine.loop import RoundRecord
from fedbench.execution.contract.runs import _Run
from fedbench.vocab.status import RunStatus

# Two computations that agree in exact arithmetic but not operation for operation (another summation order or
# SIMD kernel, an algebraically equal update rule, a few SGD steps that amplify a rounding difference) are
# compared in float64 to within F64_ATOL, never in float32 with a tolerance that happens to pass on one CPU. Where
# it comes from: float64 rounds by at most 1.1e-16 (relative) per operation, and the short trainings of these checks
# amplify a rounding difference by at most ~1e4 (in float32 the same runs differ by up to 4e-4 ≈ 1e4 × float32's
# 6e-8 with AVX-512 kernels), so two float64 paths agree to ~1e-12 at worst; measured with PyTorch's default, AVX2
# and AVX-512 kernels, they agree to 2e-15. A genuine difference is far larger: LG-Mix with λ = 1e-7 instead of 0
# already moves the weights by 4e-8.
F64_ATOL = 1e-9

# Two runs that differ there differ "only by rounding" when, in the first round that differs (every earlier round
# equal, so both trained it from the same model), no parameter or buffer differs by more than ROUNDING_ULPS ulps of
# its largest entry (eps of the dtype × the largest |entry| before or after the round), and the same two runs in
# float64 agree to within F64_ATOL. Why 4: the same maths written another way (old − lr·((old − w̄)/lr) for w̄)
# rounds each of its few operations by at most half an ulp of magnitudes up to twice the largest entry, so a rule of
# up to 4 operations stays within 4 ulps; measured, the rules above stay within 0.8. The float64 runs tell apart a
# genuine change too small for float32 (a relative 1e-7 term moves the weights by about one float32 ulp).
ROUNDING_ULPS = 4.0

# The figures of a round record the checks compare (not its wall time, nor its diagnostics: the ``diagnostics``
# property compares those).
FIGURES = tuple(f.name for f in fields(RoundRecord) if f.name not in ("round", "wall_seconds", "diagnostics"))

# The figures of the curve a method must share with FedAvg in its FedAvg setting (its personal figures are its own).
FEDAVG_FIGURES = ("train_loss", "test_acc", "test_loss")


def _tensor_difference(a: Any, b: Any, where: str, atol: float) -> str | None:
    """Where tensor ``a`` and ``b`` differ (one of them may be no tensor), in words; None where they are equal by
    ``torch.testing.assert_close``: exactly (``atol`` 0: bit for bit, NaN where both hold NaN, -0.0 equal to 0.0) where
    the two runs' arithmetic is identical, else to within ``atol`` (``F64_ATOL``: two paths that sum in another order);
    never relatively (``rtol`` 0)."""
    if not (torch.is_tensor(a) and torch.is_tensor(b)):
        return f"{where} is a tensor in one run and {type(b if torch.is_tensor(a) else a).__name__} in the other"
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{where} is {tuple(a.shape)} {a.dtype} in one run and {tuple(b.shape)} {b.dtype} in the other"
    try:
        torch.testing.assert_close(a, b, rtol=0.0, atol=atol, equal_nan=True)
        return None
    except AssertionError:
        pass
    if not a.is_floating_point():
        if a.numel() == 1:
            return f"{where} is {a.item()!r} in one run and {b.item()!r} in the other"
        return f"{where}: {int((a != b).sum())} of {a.numel()} entries differ"
    same = (a == b) | (a.isnan() & b.isnan())  # an inf in both runs is no gap either
    gap = torch.where(same, 0.0, (a.double() - b.double()).abs()).nan_to_num(nan=math.inf, posinf=math.inf)
    worst = float(gap.max())
    if a.numel() == 1:
        return f"{where} is {a.item()!r} in one run and {b.item()!r} in the other (Δ {worst:.3g})"
    return f"{where} differs by up to {worst:.3g} (max |Δ|, over {int((gap > atol).sum())} of {a.numel()} entries)"


def _difference(a: Any, b: Any, where: str, atol: float = 0.0) -> str | None:
    """Where nested values ``a`` and ``b`` (dicts, lists, tensors, numbers) first differ, in words; None where they
    are equal: tensors bit for bit (floating ones to within ``atol`` when it is not 0), numbers likewise."""
    if torch.is_tensor(a) or torch.is_tensor(b):
        return _tensor_difference(a, b, where, atol)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return _mapping_difference(a, b, where, atol)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return _sequence_difference(a, b, where, atol)
    if isinstance(a, float) and isinstance(b, float):
        if a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol:
            return None
        return f"{where} is {a!r} in one run and {b!r} in the other (Δ {abs(a - b):.3g})"
    if a != b:
        return f"{where} is {a!r} in one run and {b!r} in the other"
    return None


def _mapping_difference(a: Mapping[Any, Any], b: Mapping[Any, Any], where: str, atol: float) -> str | None:
    """Where two mappings first differ: their keys, else the first value (keys in sorted order) that differs."""
    if set(a) != set(b):
        return f"{where} has keys {sorted(map(str, a))} in one run and {sorted(map(str, b))} in the other"
    for key in sorted(a, key=str):
        found = _difference(a[key], b[key], f"{where}[{key!r}]", atol)
        if found:
            return found
    return None


def _sequence_difference(a: Sequence[Any], b: Sequence[Any], where: str, atol: float) -> str | None:
    """Where two lists or tuples first differ: their lengths, else the first entry that differs."""
    if len(a) != len(b):
        return f"{where} has {len(a)} entries in one run and {len(b)} in the other"
    for index, (x, y) in enumerate(zip(a, b)):
        found = _difference(x, y, f"{where}[{index}]", atol)
        if found:
            return found
    return None


def _curve_difference(
    a: Sequence[RoundRecord], b: Sequence[RoundRecord], figures: Sequence[str] = FIGURES, atol: float = 0.0
) -> str | None:
    """The first round and figure (of ``figures``) in which two curves differ."""
    if [r.round for r in a] != [r.round for r in b]:
        return f"the rounds logged are {[r.round for r in a]} in one run and {[r.round for r in b]} in the other"
    for x, y in zip(a, b):
        for name in figures:
            found = _difference(getattr(x, name), getattr(y, name), f"round {x.round}'s {name}", atol)
            if found:
                return found
    return None


def _state_difference(a: _Run, b: _Run, atol: float = 0.0) -> str | None:
    """The first tensor of the final server state or client states in which two runs differ."""
    found = (
        _difference(a.server.params, b.server.params, "the global weights", atol)
        or _difference(a.server.buffers, b.server.buffers, "the global buffers", atol)
        or _difference(a.server.state, b.server.state, "server.state", atol)
    )
    if found:
        return found
    for client in sorted(set(a.client_states) | set(b.client_states)):
        found = _difference(
            a.client_states.get(client, {}), b.client_states.get(client, {}), f"client {client}'s ctx.state", atol
        )
        if found:
            return found
    return None


def _unfinished(run: _Run) -> str | None:
    if run.result is None:
        return "the run stopped before its last round"
    if run.result.status != RunStatus.DONE:
        return f"the run {run.result.message or run.result.status}"
    return None


def _run_difference(a: _Run, b: _Run, atol: float = 0.0) -> str | None:
    return (
        _unfinished(a)
        or _unfinished(b)
        or _curve_difference(a.records, b.records, atol=atol)
        or _state_difference(a, b, atol)
    )


@dataclass(frozen=True)
class _Inexact:
    """Where two runs of the same length first differ, in their own dtype: the round, the first parameter, buffer or
    figure that differs there (in words) and the round's largest difference in ulps (``_ulps``)."""

    round: int
    difference: str
    ulps: float

    @property
    def rounding(self) -> bool:
        return self.ulps <= ROUNDING_ULPS


def _ulps(value: Any, reference: Any, before: Any, eps: float) -> float:
    """max |value − reference| in units of ``eps`` times the largest magnitude the round computed on (the largest
    |entry| of ``before``, the tensor at the round's start, and of ``reference``): the norm-wise size of a rounding
    error. Infinite where no rounding explains a difference: an integer tensor (a count), unlike shapes, NaN, or a
    value that was 0 throughout."""
    if torch.is_tensor(value) and torch.is_tensor(reference) and torch.is_tensor(before):
        if not reference.is_floating_point() or value.shape != reference.shape or value.dtype != reference.dtype:
            return math.inf
        gap = float((value.double() - reference.double()).abs().max())
        scale = max(float(before.abs().max()), float(reference.abs().max())) if before.shape == value.shape else 0.0
    elif isinstance(value, float) and isinstance(reference, float):  # a figure of the curve
        gap, scale = abs(value - reference), max(abs(value), abs(reference))
    else:
        return math.inf
    return gap / (eps * scale) if scale > 0 and math.isfinite(gap) else math.inf


def _first_inexact(a: _Run, b: _Run, figures: Sequence[str] = FEDAVG_FIGURES) -> _Inexact | None:
    """The first round after which ``a`` (the method) and ``b`` (FedAvg), both trained with ``history``, differ in a
    parameter, a buffer or a figure, bit for bit; None where every round is equal. Every earlier round being equal,
    both trained that round from the same model: what differs is that round's own arithmetic."""
    eps = torch.finfo(b.server.params.dtype).eps
    for index, (x, y, start) in enumerate(zip(a.history[1:], b.history[1:], b.history), 1):
        pairs: list[tuple[str, Any, Any, Any]] = [
            (f"the global weights' {name}", x.params[lo:hi], y.params[lo:hi], start.params[lo:hi])
            for name, lo, hi in b.parameters
        ]
        if set(x.buffers) != set(y.buffers):
            pairs.append(("the global buffers", x.buffers, y.buffers, None))
        else:
            pairs += [
                (f"the global buffers[{k!r}]", x.buffers[k], y.buffers[k], start.buffers[k]) for k in sorted(y.buffers)
            ]
        pairs += [
            (f"round {index}'s {name}", getattr(a.records[index - 1], name), getattr(b.records[index - 1], name), None)
            for name in figures
        ]
        differing = [(found, _ulps(u, v, w, eps)) for where, u, v, w in pairs if (found := _difference(u, v, where))]
        if differing:
            return _Inexact(index, differing[0][0], max(ulps for _, ulps in differing))
    return None


def _not_finite(value: Any, where: str) -> str | None:
    if torch.is_tensor(value):
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return f"{where} holds NaN or inf"
        return None
    if isinstance(value, Mapping):
        return next((f for k in sorted(value, key=str) if (f := _not_finite(value[k], f"{where}[{k!r}]"))), None)
    if isinstance(value, (list, tuple)):
        return next((f for i, v in enumerate(value) if (f := _not_finite(v, f"{where}[{i}]"))), None)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} is {value}"
    return None
