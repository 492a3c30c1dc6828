"""`python tests/fedbench_killed.py ARGS` is `fedbench ARGS`, except that the process SIGKILLs itself at a chosen
point of its run: after event number $FEDBENCH_TEST_KILL_AT (events: a round about to be logged, a round logged,
a checkpoint about to be written, a checkpoint written), plus $FEDBENCH_TEST_KILL_DELAY seconds during which the
run goes on (the kill then lands wherever the run is: inside a registry commit, half-way through writing a
checkpoint's temporary file, in local training). Each event is announced on stderr as ``fedbench-test-event N``
before it happens. Run in process (--jobs 1); pytest does not collect it. tests/integration/test_random_kills.py calls
``_install`` in a forked child instead of starting this script (an interpreter start costs more than the run).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from fedbench.engine import loop
from fedbench.execution import worker

MARKER = "fedbench-test-event"
_count = 0


def _event(kill_at: int, delay: float) -> None:
    global _count
    _count += 1
    os.write(2, f"{MARKER} {_count}\n".encode())
    if _count == kill_at:
        if delay <= 0:
            os.kill(os.getpid(), signal.SIGKILL)

        def kill_later() -> None:
            time.sleep(delay)  # the run goes on meanwhile: the kill lands at an unplanned point
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill_later, daemon=True).start()


def _install(kill_at: int, delay: float) -> None:
    log_round = worker.RegistrySink.log_round
    save_checkpoint = loop.save_checkpoint

    def logged(self, record) -> None:
        _event(kill_at, delay)
        log_round(self, record)
        _event(kill_at, delay)

    def saved(path, payload, **options) -> None:
        _event(kill_at, delay)
        save_checkpoint(path, payload, **options)
        _event(kill_at, delay)

    worker.RegistrySink.log_round = logged
    loop.save_checkpoint = saved


if __name__ == "__main__":
    _install(int(os.environ["FEDBENCH_TEST_KILL_AT"]), float(os.environ.get("FEDBENCH_TEST_KILL_DELAY", "0")))
    from fedbench.cli import main

    sys.exit(main())
