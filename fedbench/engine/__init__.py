"""The round loop, client context, sampling and checkpoint/resume."""

from fedbench.engine.loop import RoundRecord, RunResult, RunSink, client_schedule, run
from fedbench.engine.options import EngineOptions

__all__ = ["EngineOptions", "RoundRecord", "RunResult", "RunSink", "client_schedule", "run"]
