"""`python tests/fedbench_held.py ARGS` is `fedbench ARGS`, except that a run holds once round
$FEDBENCH_TEST_HOLD_AFTER is logged and checkpointed: when it is about to log the next round it writes
``fedbench-test-held run=ID pid=PID`` to stderr and waits there until a signal stops it (or forever).

The kill/resume tests signal `fedbench run` at that point, a known state, instead of polling the registry
and hoping the runs are still mid-way when the signal lands. Worker processes (multiprocessing's spawn)
import this file as their main module (``__mp_main__``), so they hold too. Importing it does nothing
else (the tests take MARKER from it); pytest does not collect it.
"""

from __future__ import annotations

import os
import sys
import time

from fedbench.execution import worker

MARKER = "fedbench-test-held"


def _hold_after(rounds: int) -> None:
    log_round = worker.RegistrySink.log_round

    def log_round_then_hold(self, record) -> None:
        if record.round == rounds + 1:  # round `rounds` is in the registry and in the checkpoint
            os.write(2, f"{MARKER} run={self.run_id} pid={os.getpid()}\n".encode())
            while True:
                time.sleep(3600)  # a signal's handler raises out of the sleep
        log_round(self, record)

    worker.RegistrySink.log_round = log_round_then_hold


if __name__ in ("__main__", "__mp_main__"):  # run as the script, or imported by a worker it started
    _hold_after(int(os.environ["FEDBENCH_TEST_HOLD_AFTER"]))

if __name__ == "__main__":
    from fedbench.cli import main

    sys.exit(main())
