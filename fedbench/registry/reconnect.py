"""Reconnecting to a server registry (PostgreSQL) whose connection was lost: the server restarted, failed over or was
briefly unreachable while workers train. Every registry operation of an opened registry (a claim, a heartbeat's
write aside, a round, a checkpoint's hash, a run's provenance and outcome, every read) is retried with growing waits,
up to ``RECONNECT_SECONDS`` in all, each retry one warning line naming the registry (password masked) and the
attempt; after the last one, ``RegistryUnreachable``: one line, and the runs in progress are left resumable (their
claims lapse once their workers are gone, their last recorded checkpoints stand).

Retrying is safe because every write is idempotent (a round is replaced by run and round, a claim retaken by its
own worker is recognised as won, a finish found already recorded by this worker is not a lost claim: ``claims.py``,
``store.py``). SQLite is never retried: its file cannot lose a connection, and its busy timeout already waits for
other writers. Opening a registry is not retried either: a wrong host or port is a one-line error at once.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy.exc import DBAPIError

from fedbench.errors import RegistryUnreachable

# How long, in all, an operation of a worker (or of `fedbench run` watching one) waits for a server registry to come
# back before giving up, and the waits between its tries: FIRST_RETRY_SECONDS, doubling, at most
# LONGEST_RETRY_SECONDS (0.5, 1, 2, 4, 8, 8, … s: a restart of a few seconds costs a few short waits).
RECONNECT_SECONDS = 60.0
FIRST_RETRY_SECONDS = 0.5
LONGEST_RETRY_SECONDS = 8.0
MOST_RETRIES = 100  # a bound the waits never reach (11 by default): no budget makes the list of waits endless

log = logging.getLogger("fedbench.registry")

# How drivers (psycopg, libpq) word a connection that is gone or cannot be made yet, lower case: the server shut
# down or restarted ("terminating connection due to administrator command", "the database system is shutting down"),
# the socket closed under the client, nothing listening while it restarts ("connection refused").
LOST_CONNECTION = (
    "server closed the connection",
    "terminating connection",
    "connection refused",
    "could not connect",
    "connection failed",
    "connection is closed",
    "connection is lost",
    "connection not open",
    "no connection to the server",
    "connection reset",
    "connection timed out",
    "broken pipe",
    "consuming input failed",
    "ssl syscall error",
    "the database system is shutting down",
    "the database system is starting up",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
)
# A connection the server refuses for good (a new connection's "connection failed: … password authentication failed"):
# a retry would get the same answer, so it is not a lost connection.
REFUSED_FOR_GOOD = ("authentication failed", "no pg_hba.conf entry", "does not exist", "permission denied")


def lost_connection(exc: BaseException) -> str | None:
    """Why ``exc`` is a lost or refused connection to the registry's server (its driver's first line), or None when
    it is any other error (a constraint, a permission, a full disk: retrying would not help)."""
    if not isinstance(exc, DBAPIError):
        return None
    # the driver's message alone: SQLAlchemy's text adds the statement's parameters (a stored error may quote anything)
    message = str(exc.orig if exc.orig is not None else exc)
    lines = message.strip().splitlines()
    reason = " ".join(lines[0].split()) if lines else type(exc).__name__
    lower = message.lower()
    if any(words in lower for words in REFUSED_FOR_GOOD):
        return None
    if exc.connection_invalidated or any(words in lower for words in LOST_CONNECTION):
        return reason[:200]
    return None


def retry_waits(
    seconds: float = RECONNECT_SECONDS, first: float = FIRST_RETRY_SECONDS, longest: float = LONGEST_RETRY_SECONDS
) -> list[float]:
    """The waits before each retry: ``first``, doubling up to ``longest``, the last cut so they add up to ``seconds``."""
    waits: list[float] = []
    wait, left = first, seconds
    while left > 0 and len(waits) < MOST_RETRIES:
        waits.append(min(wait, longest, left))
        left -= waits[-1]
        wait *= 2
    return waits


T = TypeVar("T")
P = ParamSpec("P")


class Reconnect:
    """The retry policy of one registry: ``call(operation)`` runs it again after each lost connection, waiting
    ``waits`` (``retry_waits()``) in turn, and raises ``RegistryUnreachable`` once they are spent. ``display_url``
    names the registry in each line (password masked); ``scrub`` removes its password from a driver's message;
    ``sleep``: how to wait (tests pass a fake)."""

    def __init__(
        self,
        display_url: str,
        scrub: Callable[[str], str],
        waits: Sequence[float] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.display_url, self.scrub, self.sleep = display_url, scrub, sleep
        self.waits = list(retry_waits() if waits is None else waits)

    def call(self, operation: Callable[[], T]) -> T:
        attempt = 0
        while True:
            try:
                return operation()
            except DBAPIError as exc:
                reason = lost_connection(exc)
                if reason is None:
                    raise
                reason = self.scrub(reason)
                if attempt == len(self.waits):
                    raise RegistryUnreachable(self.display_url, attempt + 1, sum(self.waits), reason) from None
                wait = self.waits[attempt]
                attempt += 1
                log.warning(
                    "registry %s: connection lost (%s); retry %d of %d in %.1f s",
                    self.display_url,
                    reason,
                    attempt,
                    len(self.waits),
                    wait,
                )
                self.sleep(wait)


def reconnecting(method: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[Any, P], T]:
    """A registry method retried through its registry's ``reconnect`` policy (None: SQLite, called once). An
    argument that can be iterated only once (a generator of spec hashes) is read into a list first, so that a retry
    sees all of it again."""

    @functools.wraps(method)
    def retried(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        policy = self.reconnect
        if policy is None:
            return method(self, *args, **kwargs)
        again: Any = [list(a) if isinstance(a, Iterator) else a for a in args]
        named: Any = {k: list(v) if isinstance(v, Iterator) else v for k, v in kwargs.items()}
        return policy.call(lambda: method(self, *again, **named))

    return retried


__all__ = [
    "RECONNECT_SECONDS",
    "Reconnect",
    "lost_connection",
    "reconnecting",
    "retry_waits",
]
