"""The life of a run in the registry: the one place that names run statuses and the groups each layer asks about.

A run is created ``pending``; a worker's claim makes it ``running``; it ends ``done`` (all rounds trained),
``diverged`` (a non-finite loss stopped it: a result, reported as such), ``failed`` (an error; re-running retries it)
or ``interrupted`` (stopped by the user or a lost worker; re-running resumes it from its checkpoint). The values are
the strings stored in the registry's ``runs.status`` column, so a ``RunStatus`` compares equal to what a query
returns and old registries need no migration.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    DIVERGED = "diverged"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


#: A result exists: reports read these runs, and a re-run skips them unless forced.
FINISHED: tuple[RunStatus, ...] = (RunStatus.DONE, RunStatus.DIVERGED)
#: A worker may claim these (a running run only when its holder is gone).
CLAIMABLE: tuple[RunStatus, ...] = (RunStatus.PENDING, RunStatus.FAILED, RunStatus.INTERRUPTED)
#: A batch still waits for these; a failed run stays failed for the batch (no retry loop).
WAITING: tuple[RunStatus, ...] = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.INTERRUPTED)
#: No worker of the batch will touch these again.
ENDED: tuple[RunStatus, ...] = (*FINISHED, RunStatus.FAILED, RunStatus.INTERRUPTED)

#: What a worker's end-of-run event says of a run another worker took over from it (never stored: the run goes on).
TAKEN_OVER = "taken over"
