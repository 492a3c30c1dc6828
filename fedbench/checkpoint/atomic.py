"""Atomic, durable file writes: a reader sees the old file or the new one, never half, and after a power cut the new
one is there once the call returned.

Each file is written to a temporary file beside it, synced, then renamed over it (atomic on POSIX); its folder is
synced once at the end. The sha256 of the bytes is computed while they are written, so that the caller can record
it (the registry's ``CheckpointLedger``) before the new file replaces the old one. Checkpoints (``format.py``) and
their client-state files (``engine/client_states.py``) are written through here.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fedbench.errors import write_failure

_HASH_THREAD_BYTES = 8 << 20  # below this, starting a thread costs more than overlapping hash and write saves

# The signals whose Python handlers stop a run (Ctrl-C; SIGTERM of scancel, a requeue or a local stop; SIGUSR2, Slurm's
# warning before a time limit): held from the moment the hash is recorded until the file has replaced the old one.
HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR2") if hasattr(signal, name))


@contextlib.contextmanager
def signals_held():
    """Delay the stopping signals (``HELD_SIGNALS``) that arrive in the block until it ends, then deliver each once to
    the handler it would have reached. A handler raises wherever the main thread is: between recording a new file's
    hash and renaming the file into place, it would leave the old file under the new hash, which the next resume
    rejects, starting the run again from round 0. Only Python handlers are held (a signal left to the system's
    default ends the process as SIGKILL does), and only on the main thread, the one that runs them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {}
    for signum in HELD_SIGNALS:
        if callable(signal.getsignal(signum)):
            previous[signum] = signal.signal(signum, lambda number, _frame: arrived.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)


def write_atomic(
    path: Path,
    data: bytes | None = None,
    chunks: list[memoryview] | None = None,
    record: Callable[[str], None] | None = None,
) -> str:
    """``data`` (or ``chunks``, in order) at ``path`` atomically and durably: a reader sees the old file or the
    new one, never half. Returns the sha256 of what was written. ``record`` (the registry's ledger) gets that hash
    once the new bytes are durable and before they replace the old file, so a failure to record it (a full or
    read-only registry) leaves the old file in place, still matching the hash recorded for it.

    A write the machine refuses (disk full, read-only file system, quota, permission) raises ``WriteFailed`` naming
    the file and the cause; the temporary file is removed and the old file is left as it was."""
    parts = [memoryview(data)] if data is not None else list(chunks or [])
    before_replace = None if record is None else (lambda _temporaries, digests: record(digests[0]))
    return write_all_atomic([(path, parts)], before_replace)[0]


def _write_hashing(handle, parts: list[memoryview]) -> str:
    digest = hashlib.sha256()
    if sum(len(part) for part in parts) < _HASH_THREAD_BYTES:
        for part in parts:
            handle.write(part)
            digest.update(part)
        return digest.hexdigest()

    # hashed in a second thread while this one writes (both release the GIL on large buffers): the hash costs
    # about as much as the write for a large checkpoint, and overlapping them hides most of it
    def hash_parts() -> None:
        for part in parts:
            digest.update(part)

    hasher = threading.Thread(target=hash_parts, daemon=True)
    hasher.start()
    try:
        for part in parts:
            handle.write(part)
    finally:
        hasher.join()
    return digest.hexdigest()


def _fsync_file(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_all_atomic(
    files: list[tuple[Path, list[memoryview]]],
    before_replace: Callable[[list[Path], list[str]], None] | None = None,
) -> list[str]:
    """Each ``(path, parts)`` written atomically and durably (a temporary file beside it, synced, then renamed over
    it); returns the sha256 of each. All files are written before any is synced, and each folder is synced once at
    the end: a checkpoint's client-state files (``client_states.py``, up to a round's participants) then cost one
    fsync each instead of two, and the file system can flush them together. ``before_replace`` gets the temporary
    files (durable) and their hashes before any replaces its file. On any error no temporary file stays and no file
    is replaced before all were written and synced; a write the machine refuses is a ``WriteFailed`` naming the
    file."""
    written: list[tuple[Path, str]] = []  # (path, its temporary file)
    digests = []
    path = files[0][0] if files else Path(".")
    try:
        for path, parts in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            written.append((path, tmp))
            with os.fdopen(fd, "wb") as handle:
                digests.append(_write_hashing(handle, parts))
        # fsync syncs the file, whichever descriptor asks (no descriptor stays open between write and sync); several
        # fsyncs at once let the file system commit them together: 2-5x faster for a round's 100 client files
        temporaries = [tmp for _, tmp in written]
        if len(temporaries) > 1:
            with ThreadPoolExecutor(min(16, len(temporaries))) as pool:
                list(pool.map(_fsync_file, temporaries))
        else:
            for tmp in temporaries:
                _fsync_file(tmp)
        with signals_held():  # the hash recorded and the file in place, or neither: never one without the other
            if before_replace is not None:
                before_replace([Path(tmp) for tmp in temporaries], digests)
            for path, tmp in written:
                os.replace(tmp, path)  # atomic on POSIX
    except BaseException as exc:
        for _, tmp in written:
            with contextlib.suppress(OSError):  # on a file system gone read-only the temporary file cannot go either
                Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _write_fault(exc, path) from None
        raise
    for folder in dict.fromkeys(path.parent for path, _ in files):
        try:  # the renames themselves survive a power cut once the folder is synced
            descriptor = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        except OSError:
            pass  # a file system that cannot sync folders: the files are written, only not yet durable
    return digests


def _write_fault(exc: OSError, path: Path) -> Exception:
    """``exc`` as the one-line ``WriteFailed`` for the checkpoint ``path`` when the machine refused the write;
    else ``exc`` itself (a bug, or a fault this cannot name)."""
    return write_failure(exc, f"checkpoint {path}") or exc


__all__ = ["write_all_atomic", "write_atomic"]
