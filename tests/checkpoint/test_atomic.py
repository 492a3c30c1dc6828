"""Atomic writes (``fedbench/checkpoint/atomic.py``): a reader sees the old file or the new one, the hash is handed
over before the new file replaces the old one, and a write the disk refuses leaves the old file and names it."""

from __future__ import annotations

import errno
import hashlib
import signal

import pytest

from fedbench.checkpoint import atomic
from fedbench.checkpoint.atomic import write_all_atomic, write_atomic
from fedbench.checkpoint.format import read_checkpoint, save_checkpoint
from fedbench.errors import WriteFailed


def test_write_atomic_writes_data_or_chunks_and_records_the_hash_before_replacing(tmp_path):
    path = tmp_path / "f.bin"
    assert write_atomic(path, data=b"old") == hashlib.sha256(b"old").hexdigest()
    seen: list = []

    def record(digest: str) -> None:
        seen.append((digest, path.read_bytes()))

    digest = write_atomic(path, chunks=[memoryview(b"ne"), memoryview(b"w")], record=record)
    assert digest == hashlib.sha256(b"new").hexdigest() and path.read_bytes() == b"new"
    assert seen == [(digest, b"old")]  # recorded while the old file was still in place
    assert write_atomic(path) == hashlib.sha256(b"").hexdigest() and path.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


class Stopped(Exception):
    pass


@pytest.mark.parametrize("signum", atomic.HELD_SIGNALS)
def test_a_stopping_signal_while_the_hash_is_recorded_stops_after_the_file_is_in_place(tmp_path, signum):
    """A worker's signal handler raises wherever it is: arriving while the registry records the new hash, it would
    leave the old file under the new hash (the next resume rejects it and starts from round 0). It is held until the
    file is in place, then reaches its handler once."""
    path = tmp_path / "f.bin"
    write_atomic(path, data=b"old")
    recorded: list[str] = []
    stops: list[int] = []

    def stop(number, _frame):
        stops.append(number)
        raise Stopped

    def record(digest: str) -> None:
        signal.raise_signal(signum)  # scancel, Slurm's time-limit warning or Ctrl-C, mid-record
        signal.raise_signal(signum)  # twice: delivered once
        recorded.append(digest)

    previous = signal.signal(signum, stop)
    try:
        with pytest.raises(Stopped):
            write_atomic(path, data=b"new", record=record)
        assert signal.getsignal(signum) is stop  # the handler is back
    finally:
        signal.signal(signum, previous)
    assert recorded == [hashlib.sha256(b"new").hexdigest()] and path.read_bytes() == b"new"  # file and record agree
    assert stops == [signum]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_a_large_write_is_hashed_beside_the_write_and_gives_the_same_hash(tmp_path, monkeypatch):
    # above the threshold the hash runs in a second thread while the parts are written: same bytes, same digest
    monkeypatch.setattr(atomic, "_HASH_THREAD_BYTES", 4)
    path = tmp_path / "large.bin"
    digest = write_atomic(path, chunks=[memoryview(b"abc"), memoryview(b"defg"), memoryview(b"h")])
    assert digest == hashlib.sha256(b"abcdefgh").hexdigest() and path.read_bytes() == b"abcdefgh"


def test_several_files_are_written_together_with_their_hashes_and_nothing_for_no_file(tmp_path):
    paths = [tmp_path / "a" / "x.bin", tmp_path / "b" / "y.bin"]  # folders that do not exist yet
    digests = write_all_atomic([(path, [memoryview(path.name.encode())]) for path in paths])
    assert digests == [hashlib.sha256(p.name.encode()).hexdigest() for p in paths]
    assert [p.read_bytes() for p in paths] == [b"x.bin", b"y.bin"]
    assert write_all_atomic([]) == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "x.bin", "y.bin"]  # no temporary file left


def test_a_write_the_disk_refuses_names_the_checkpoint_and_leaves_the_old_file(tmp_path, monkeypatch):
    import os

    path = tmp_path / "run.pt"
    save_checkpoint(path, {"spec_hash": "abc", "round": 1})

    def full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteFailed) as caught:
        save_checkpoint(path, {"spec_hash": "abc", "round": 2})
    assert caught.value.target == f"checkpoint {path}"
    monkeypatch.undo()
    assert read_checkpoint(path, "abc")["round"] == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["run.pt"]
