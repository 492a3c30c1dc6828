"""Reconnecting to a server registry (fedbench.registry.reconnect): the retry policy (bounded, one line per retry naming
the registry with its password masked and the attempt, a one-line error once the waits are spent, other errors not
retried), and the registry operations it guards staying idempotent when a connection is lost after its COMMIT reached
the server (a claim is won once, a finish is not a lost claim, a round is stored once).

The connection is a fake: an ``OperationalError`` as psycopg raises it when the server goes away, thrown by a wrapped
``engine.begin`` of a SQLite registry given a server's retry policy; waits go to a fake ``sleep``, so nothing here
depends on time. A real PostgreSQL server restarted under training workers: tests/integration/test_registry_restart.py.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError, OperationalError

from fedbench.engine.loop import RoundRecord
from fedbench.errors import ClaimLost, RegistryUnreachable
from fedbench.registry import Registry, claims, reconnect
from fedbench.registry.tables import rounds
from fedbench.urls import display_url, scrub
from registry_fixtures import entry

PASSWORD = "s3cr3t-pw"
URL = f"postgresql+psycopg://alice:{PASSWORD}@db.example:5432/fedbench"


class DriverError(Exception):
    """What psycopg raises (``exc.orig`` of SQLAlchemy's wrapper)."""


def lost(message: str = "server closed the connection unexpectedly", invalidated: bool = True) -> OperationalError:
    return OperationalError("COMMIT", {}, DriverError(message), connection_invalidated=invalidated)


@pytest.fixture
def slept() -> list[float]:
    return []


def policy(slept: list[float], waits=(0.5, 1.0, 2.0)) -> reconnect.Reconnect:
    return reconnect.Reconnect(display_url(URL), lambda text: scrub(text, URL), waits=waits, sleep=slept.append)


def failing(times: int, error=None):
    """An operation that fails ``times`` times with ``error`` (a lost connection), then returns "ok"."""
    calls = []

    def operation() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error if error is not None else lost()
        return "ok"

    return operation, calls


# ------------------------------------------------------------------------------------------- the policy
def test_the_waits_grow_from_half_a_second_to_eight_and_add_up_to_a_minute():
    waits = reconnect.retry_waits()
    assert waits[:5] == [0.5, 1.0, 2.0, 4.0, 8.0] and max(waits) == 8.0
    assert sum(waits) == pytest.approx(reconnect.RECONNECT_SECONDS) == pytest.approx(60.0)
    assert reconnect.retry_waits(3.0, first=1.0, longest=5.0) == [1.0, 2.0]
    assert reconnect.retry_waits(2.5, first=1.0, longest=5.0) == [1.0, 1.5]
    assert reconnect.retry_waits(3.5, first=1.0, longest=5.0) == [1.0, 2.0, 0.5]  # a short last wait is kept
    assert len(reconnect.retry_waits(1e9)) == reconnect.MOST_RETRIES == 100  # bounded whatever the budget


def test_a_lost_connection_is_retried_with_one_line_per_retry_naming_the_registry_masked(slept, caplog):
    operation, calls = failing(2, lost(f"connection to server failed for alice:{PASSWORD}\nDETAIL: more"))
    with caplog.at_level(logging.WARNING, logger="fedbench.registry"):
        assert policy(slept).call(operation) == "ok"
    assert len(calls) == 3 and slept == [0.5, 1.0]
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    # the registry's logger: `fedbench` commands show its warnings on stderr (a worker without handlers too)
    assert {(record.name, record.levelno) for record in caplog.records} == {("fedbench.registry", logging.WARNING)}
    masked = "postgresql+psycopg://alice:***@db.example:5432/fedbench"
    assert (
        lines[0]
        == f"registry {masked}: connection lost (connection to server failed for alice:***); retry 1 of 3 in 0.5 s"
    )
    assert lines[1].endswith("retry 2 of 3 in 1.0 s")
    assert PASSWORD not in caplog.text


def test_after_the_last_retry_it_gives_up_with_one_line_and_the_password_masked(slept, caplog):
    operation, calls = failing(99, lost(f"terminating connection due to administrator command {PASSWORD}"))
    with caplog.at_level(logging.WARNING, logger="fedbench.registry"), pytest.raises(RegistryUnreachable) as raised:
        policy(slept).call(operation)
    assert len(calls) == 4 and slept == [0.5, 1.0, 2.0] and len(caplog.records) == 3  # bounded: 3 retries, no more
    message = str(raised.value)
    assert "\n" not in message and PASSWORD not in message and raised.value.exit_code == 2
    assert message.startswith("registry 'postgresql+psycopg://alice:***@db.example:5432/fedbench' unreachable after 4")
    assert "over 4 s (terminating connection due to administrator command ***)" in message
    assert "resume from their last checkpoint" in message


# What drivers say of a server going away, each message holding one of the phrases looked for and no other.
LOST_MESSAGES = [
    "server closed the connection unexpectedly",
    "terminating connection due to administrator command",
    "[Errno 111] Connection refused",
    "could not connect to server: No such file or directory",
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: timeout expired',
    "the connection is closed",
    "the connection is lost",
    "connection not open",
    "no connection to the server",
    "Connection reset by peer",
    "connection timed out",
    "Broken pipe",
    "consuming input failed: EOF detected",
    "SSL SYSCALL error: EOF detected",
    "FATAL:  the database system is shutting down",
    "FATAL:  the database system is starting up",
    "FATAL:  the database system is in recovery mode",
    "FATAL:  the database system is not yet accepting connections",
]


@pytest.mark.parametrize("message", LOST_MESSAGES)
def test_what_drivers_say_of_a_server_going_away_is_a_lost_connection(message):
    others = [m for m in LOST_MESSAGES if m != message]
    assert sum(words in message.lower() for words in reconnect.LOST_CONNECTION) == 1, others  # this phrase alone
    assert reconnect.lost_connection(lost(message, invalidated=False)) == " ".join(message.split())
    assert reconnect.lost_connection(lost("anything at all", invalidated=True)) == "anything at all"


def test_a_long_driver_message_is_cut_to_200_characters_in_the_retry_line():
    message = "server closed the connection unexpectedly: " + "x" * 300
    assert reconnect.lost_connection(lost(message)) == message[:200]


@pytest.mark.parametrize(
    "message",
    [
        'connection failed: FATAL:  password authentication failed for user "alice"',
        'connection failed: FATAL:  no pg_hba.conf entry for host "10.0.0.7", user "alice"',
        'connection failed: FATAL:  database "fedbench" does not exist',
        "connection failed: FATAL:  permission denied for database fedbench",
    ],
)
def test_a_connection_refused_for_good_is_not_retried_even_when_the_pool_dropped_it(message, slept):
    operation, calls = failing(1, lost(message, invalidated=True))
    assert reconnect.lost_connection(lost(message, invalidated=True)) is None
    with pytest.raises(OperationalError):
        policy(slept).call(operation)
    assert len(calls) == 1 and slept == []


def test_other_errors_are_raised_at_once(slept):
    for error in (
        IntegrityError("INSERT", {}, DriverError("duplicate key value violates unique constraint")),
        OperationalError("UPDATE", {}, DriverError("permission denied for table runs")),
        # a new connection the server refuses for good: the same answer again after any wait
        OperationalError("connect", {}, DriverError('connection failed: password authentication failed for "a"')),
        # a stored text that quotes those words is a parameter, not the driver's message
        IntegrityError("UPDATE", {"error": "server closed the connection"}, DriverError("violates not-null")),
        ValueError("not a database error"),
    ):
        operation, calls = failing(1, error)
        with pytest.raises(type(error)):
            policy(slept).call(operation)
        assert len(calls) == 1 and slept == []
    assert reconnect.lost_connection(ValueError("server closed the connection")) is None


# ------------------------------------------------------------------------------------------- the registry's operations
@pytest.fixture
def server_like(registry_url, slept, monkeypatch):
    """A SQLite registry given a server's retry policy (fake sleep), and ``lose(n)``: its next ``n`` transactions
    (or reads) commit, then lose their connection before the reply (the hardest case: the write is in, the worker
    does not know)."""
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    registry.reconnect = policy(slept)
    pending = {"losses": 0}

    def losing(real):
        @contextmanager
        def opened():
            with real() as connection:
                yield connection
            if pending["losses"]:
                pending["losses"] -= 1
                raise lost()

        return opened

    for name in ("begin", "connect"):  # writes, and reads
        monkeypatch.setattr(registry.engine, name, losing(getattr(registry.engine, name)))

    def lose(times: int = 1) -> None:
        pending["losses"] = times

    return registry, lose


def test_a_claim_whose_commit_reached_the_server_is_won_by_its_worker_once(server_like, slept):
    registry, lose = server_like
    lose()
    run_id = registry.claim(entry(1)["spec_hash"], "host-a:1")
    assert run_id is not None and slept == [0.5]  # before: the retry found the run held (by itself) and lost it
    assert registry.get_run(run_id).worker == "host-a:1"
    assert registry.claim(entry(1)["spec_hash"], "host-b:2") is None  # held: nobody else claims it too


def test_a_finish_whose_commit_reached_the_server_is_not_a_lost_claim(server_like, slept):
    registry, lose = server_like
    run_id = registry.claim(entry(1)["spec_hash"], "host-a:1")
    lose()
    registry.finish(run_id, "done", summary={"best": 1.0}, worker="host-a:1")
    assert slept == [0.5] and registry.get_run(run_id).status == "done"
    # a finish that finds another worker's outcome there is still a lost claim
    with pytest.raises(ClaimLost):
        registry.finish(run_id, "done", worker="host-b:2")


def test_a_round_written_again_after_a_lost_commit_is_stored_once(server_like, slept):
    registry, lose = server_like
    run_id = registry.claim(entry(1)["spec_hash"], "host-a:1")
    lose(2)  # written three times: two tries lost after their commit, the third answered
    record = RoundRecord(1, train_loss=1.2, wall_seconds=0.1, bytes_up=1, bytes_down=1, test_acc=0.5)
    registry.log_round(run_id, record, worker="host-a:1")
    lose()
    registry.record_checkpoint(run_id, "ab" * 32, worker="host-a:1")
    assert slept == [0.5, 1.0, 0.5]
    with registry.engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(rounds)) == 1
    assert registry.checkpoint_sha256(run_id) == "ab" * 32 and registry.get_run(run_id).rounds_done == 1


def test_a_generator_argument_is_read_whole_by_every_try(server_like, slept):
    registry, lose = server_like
    lose()
    hashes = (h for h in [entry(1)["spec_hash"]])
    # a read whose connection drops after its reply was complete is retried too, over the same hashes
    assert registry.statuses(hashes) == {entry(1)["spec_hash"]: "pending"} and slept == [0.5]


def test_a_heartbeat_that_loses_its_connection_waits_for_the_next_beat(server_like, monkeypatch):
    registry, _ = server_like
    run_id = registry.claim(entry(1)["spec_hash"], "host-a:1")
    beating = claims.Heartbeat(registry, run_id, "host-a:1")

    def raising(error):
        def beat(*_):
            raise error

        return beat

    monkeypatch.setattr(registry, "heartbeat", raising(lost()))
    beating.beat()  # neither raised nor retried here: the training's own writes wait for the server
    assert not beating.lost
    monkeypatch.setattr(registry, "heartbeat", raising(IntegrityError("UPDATE", {}, DriverError("violates"))))
    with pytest.raises(IntegrityError):  # any other error is not swallowed
        beating.beat()


def test_a_sqlite_registry_is_never_retried(registry_url, monkeypatch):
    registry = Registry(registry_url)
    assert registry.reconnect is None
    calls = []

    def connect():
        calls.append(1)
        raise lost()

    monkeypatch.setattr(registry.engine, "connect", connect)
    with pytest.raises(OperationalError):
        registry.runs()
    assert calls == [1]


def test_a_server_registry_retries_and_checks_its_pooled_connections(any_registry_url):
    registry = Registry(any_registry_url)
    if registry.is_sqlite:
        assert registry.reconnect is None and not registry.engine.pool._pre_ping
    else:
        assert registry.reconnect is not None and registry.engine.pool._pre_ping
        assert registry.reconnect.display_url == registry.display_url
