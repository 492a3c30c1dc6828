"""The round loop, client context, sampling and checkpoint/resume."""

from fedbench.engine.loop import RoundRecord, RunResult, RunSink, client_schedule, run

__all__ = ["RoundRecord", "RunResult", "RunSink", "client_schedule", "run"]
