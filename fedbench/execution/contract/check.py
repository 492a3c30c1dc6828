"""``check_method``: the engine contract's properties checked on one method, each a ``PropertyResult`` (pass, fail
or skip, with what was compared or what differed)."""

from __future__ import annotations

import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from fedbench.engine.options import EngineOptions
from fedbench.errors import ConfigError
from fedbench.execution.contract.properties import PROPERTIES, _Broken, _Skip
from fedbench.execution.contract.runs import Checker
from fedbench.settings import Settings
from fedbench.spec import RunSpec

Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class PropertyResult:
    """One property checked: ``detail`` says what was compared (pass), what differed and how to fix it (fail), or
    why it does not apply to this method (skip)."""

    name: str  # a key of PROPERTIES
    title: str
    status: Status
    detail: str
    seconds: float

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def as_dict(self) -> dict[str, Any]:
        return {
            "property": self.name,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }


def _raised(exc: BaseException) -> str:
    """The exception and the innermost place outside torch that raised it, on one line."""
    torch_folder = str(Path(torch.__file__).parent)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(torch_folder)]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}{where}"


def check_method(
    spec: RunSpec,
    properties: Sequence[str] | None = None,
    *,
    data_root: str | Path | None = None,
    verify: bool = True,
    threads: int = 1,
    on_result: Callable[[PropertyResult], None] | None = None,
) -> list[PropertyResult]:
    """Check the engine contract on ``spec``'s method (``contract_spec`` builds a small one): each of ``properties``
    (default all, in ``PROPERTIES``' order) passes, fails or does not apply; ``on_result`` hears of each as it is
    done. The runs train on the CPU with ``threads`` threads (restored after: one is fastest for these tiny models), in
    a temporary folder removed after. Raises ``FedbenchError`` for bad input (an
    unknown property, a setting the method or model cannot take, missing data); anything the method raises while
    training fails the property it broke, naming where it was raised."""
    names = list(PROPERTIES) if properties is None else list(properties)
    unknown = [name for name in names if name not in PROPERTIES]
    if unknown:
        raise ConfigError(f"unknown property {unknown[0]!r}; expected one of {', '.join(PROPERTIES)}")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory(prefix="fedbench-check-") as folder:
            checker = Checker(
                spec,
                Path(folder),
                EngineOptions(
                    settings=Settings(data_root=None if data_root is None else str(data_root), verify=verify)
                ),
            )
            checker.preflight()
            return [_check(checker, name, on_result) for name in names]
    finally:
        torch.set_num_threads(previous_threads)


def _check(checker: Checker, name: str, on_result: Callable[[PropertyResult], None] | None) -> PropertyResult:
    began = time.perf_counter()
    status: Status
    try:
        status, detail = "pass", PROPERTIES[name].check(checker)
    except _Skip as exc:
        status, detail = "skip", str(exc)
    except _Broken as exc:
        status, detail = "fail", str(exc)
    except Exception as exc:  # the method's own error, while training for this property
        status, detail = "fail", f"training raised {_raised(exc)}"
    result = PropertyResult(name, PROPERTIES[name].title, status, detail, time.perf_counter() - began)
    if on_result is not None:
        on_result(result)
    return result
