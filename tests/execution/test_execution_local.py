"""The local executor: one run loop in this process, or spawned workers whose stops and refused writes reach the
parent as messages. Whole batches over several workers run in tests/integration (kills, racing workers)."""

from __future__ import annotations

import os
import signal

import pytest

from fedbench.errors import ConfigError, WriteFailed
from fedbench.execution import local
from fedbench.execution.events import Note
from fedbench.execution.options import ExecutionOptions


@pytest.fixture
def restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def test_in_process_runs_on_the_placed_device_and_puts_back_the_sigterm_handler(monkeypatch, restore_signals):
    seen = []

    def work_through(planned, options, emit, arrays=None):
        seen.append((planned, options.device, arrays))
        # while the batch trains, SIGTERM interrupts it like Ctrl-C (the run is then recorded as interrupted)
        assert signal.getsignal(signal.SIGTERM) is local._interrupt

    def handler(signum, frame):  # the caller's own handler, which must come back
        pass

    signal.signal(signal.SIGTERM, handler)
    monkeypatch.setattr(local, "work_through", work_through)
    local.execute(["a run"], ExecutionOptions(device="cpu"), jobs=1, emit=lambda e: None, arrays="cache")
    assert seen == [(["a run"], "cpu", "cache")]
    assert signal.getsignal(signal.SIGTERM) is handler


def test_the_sigterm_handler_comes_back_when_the_batch_fails(monkeypatch, restore_signals):
    def failing(planned, options, emit, arrays=None):
        raise ConfigError("bad")

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(local, "work_through", failing)
    with pytest.raises(ConfigError):
        local.execute([], ExecutionOptions(device="cpu"), jobs=1, emit=lambda e: None)
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_is_an_interrupt():
    with pytest.raises(KeyboardInterrupt):
        local._interrupt(signal.SIGTERM, None)


def test_a_workers_stop_handler_interrupts_once_then_ignores_further_signals(restore_signals):
    with pytest.raises(KeyboardInterrupt):
        local._stop_worker(signal.SIGTERM, None)
    # a second Ctrl-C / SIGTERM must not cut short the recording of the interrupted run
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


class Queue(list):
    put = list.append


def run_worker(monkeypatch, work_through) -> Queue:
    monkeypatch.setattr(local, "work_through", work_through)
    messages = Queue()
    # the parent is alive (our own parent), so the orphan watch only sleeps
    local._worker_main([], ExecutionOptions(device="cpu"), messages, os.getppid())
    return messages


def test_a_worker_passes_its_events_and_says_last_that_it_exited(monkeypatch, restore_signals):
    messages = run_worker(monkeypatch, lambda planned, options, emit: emit(Note("trained")))
    assert messages == [Note("trained"), local._WorkerExited(os.getpid())]


def test_a_worker_that_cannot_go_on_says_why_in_one_line(monkeypatch, restore_signals):
    def broken(planned, options, emit):
        raise ConfigError("plug-in 'x.py' no longer loads")

    messages = run_worker(monkeypatch, broken)
    assert messages == [Note(f"worker {os.getpid()} stopped: plug-in 'x.py' no longer loads"), messages[-1]]
    assert isinstance(messages[-1], local._WorkerExited)


def test_a_refused_write_travels_to_the_parent_as_its_fields(monkeypatch, restore_signals):
    refused = WriteFailed("/full/disk/ckpt", "No space left on device", "free space")

    def full(planned, options, emit):
        raise refused

    messages = run_worker(monkeypatch, full)
    assert messages[0] == local._WriteRefused(refused.fields())
    assert str(WriteFailed(**messages[0].fields)) == str(refused)  # the parent raises the same error
    assert isinstance(messages[1], local._WorkerExited)


def test_an_interrupted_worker_exits_quietly(monkeypatch, restore_signals):
    def interrupted(planned, options, emit):
        raise KeyboardInterrupt

    messages = run_worker(monkeypatch, interrupted)
    assert messages == [local._WorkerExited(os.getpid())]
