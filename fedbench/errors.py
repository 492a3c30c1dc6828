"""Errors a user can cause. The CLI prints their message on one line and exits with code 2."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class FedbenchError(Exception):
    """Base class: a user-facing error whose message names the file/key/value and what to do."""

    exit_code = 2


class RecipeError(FedbenchError):
    """A recipe file is missing, malformed, or has an unknown key or a bad value."""


class UnknownNameError(FedbenchError):
    """An algorithm, model, dataset or partitioner name that is not registered: ``kind`` (the registry's kind,
    e.g. "algorithm") and ``name`` say which, so that a caller can look for the plug-in that defined it."""

    def __init__(self, message: str, kind: str | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name

    def reworded(self, message: str) -> UnknownNameError:
        """The same unknown name with another message (a prefix naming the recipe, a hint)."""
        return UnknownNameError(message, self.kind, self.name)


class DataError(FedbenchError):
    """Data set files are missing, corrupt, or in an unexpected format."""


class RegistryError(FedbenchError):
    """The run registry cannot be opened or a run id does not exist."""


class RegistryUnreachable(RegistryError):
    """A server registry (PostgreSQL) that stayed unreachable through every retry of an operation
    (``fedbench.registry.reconnect``): the runs in progress stop unrecorded, resumable from their last checkpoint."""

    def __init__(self, display_url: str, attempts: int, seconds: float, reason: str):
        super().__init__(
            f"registry {display_url!r} unreachable after {attempts} attempts over {seconds:.0f} s ({reason}); check "
            "the server, then run the same command again: the runs in progress resume from their last checkpoint"
        )


class ConfigError(FedbenchError):
    """A run configuration (spec values, CLI overrides) is inconsistent."""


@dataclass(frozen=True)
class FieldError:
    """The first error of a pydantic ``ValidationError``, in the parts a one-line message names."""

    key: str  # dotted location, e.g. "tables.0.figure"; "" when the error is about the whole object
    message: str  # pydantic's words, e.g. "Input should be a valid integer"
    kind: str  # pydantic's error type: "missing", "extra_forbidden", "value_error", ...
    value: Any  # the input it rejected

    def line(self, prefix: str = "", whole: str = "") -> str:
        """``PREFIXKEY: MESSAGE``, with ``whole`` as the key of an error about the whole object."""
        return f"{prefix}{self.key or whole}: {self.message}"


def field_error(exc: ValidationError) -> FieldError:
    """The first of ``exc``'s errors (the one a message names: a user fixes one thing at a time)."""
    first = exc.errors()[0]
    return FieldError(".".join(str(part) for part in first["loc"]), first["msg"], first["type"], first.get("input"))


class RunDiverged(Exception):
    """Raised inside the engine when loss or weights become NaN/inf; carries the round."""

    def __init__(self, round_index: int, what: str):
        super().__init__(f"diverged at round {round_index}: {what}")
        self.round_index = round_index
        self.what = what


class RunsFileError(FedbenchError):
    """A runs file given to `fedbench import` is malformed (names the line and key)."""


class CodeChanged(FedbenchError):
    """fedbench's code on disk changed under a running worker (``execution.provenance.check_code_unchanged``): the
    worker stops before its next run, which it leaves interrupted, to be trained by the next `fedbench run`."""


# Write failures that the user's environment causes, not fedbench: errno → (cause, what to do about it).
_WRITE_FAULTS = {
    errno.ENOSPC: ("disk full", "free space on that disk"),
    errno.EDQUOT: ("disk quota exceeded", "free space within the quota"),
    errno.EROFS: ("read-only file system", "make it writable (remount it read-write)"),
    errno.EACCES: ("permission denied", "give this user write access"),
    errno.EPERM: ("operation not permitted", "give this user write access"),
}
# The same faults as database drivers word them (SQLite's SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR; PostgreSQL's
# disk_full and read_only_sql_transaction), lower case.
_DATABASE_FAULTS = (
    ("database or disk is full", errno.ENOSPC),
    ("no space left on device", errno.ENOSPC),
    ("could not extend file", errno.ENOSPC),
    ("disk quota exceeded", errno.EDQUOT),
    ("attempt to write a readonly database", errno.EROFS),
    ("read-only file system", errno.EROFS),
    ("read-only transaction", errno.EROFS),
    ("permission denied", errno.EACCES),
)


class WriteFailed(FedbenchError):
    """A checkpoint or the registry could not be written because of the machine, not of fedbench: the disk is full,
    the file system read-only, a quota exceeded, write permission missing. The run stops; what it finished is kept
    and the next `fedbench run` resumes it. ``target`` names what could not be written (a file, or a registry URL as
    ``display_url`` shows it); ``resume`` says from where the run resumes, once the engine knows."""

    def __init__(self, target: str, cause: str, remedy: str, resume: str | None = None):
        self.target, self.cause, self.remedy, self.resume = target, cause, remedy, resume
        again = "run the same `fedbench run` command again"
        super().__init__(f"cannot write {target}: {cause}; {remedy}, then {again}" + (f": {resume}" if resume else ""))

    def fields(self) -> dict[str, str | None]:
        """What rebuilds this error in another process (a worker's failure, told to `fedbench run`)."""
        return {"target": self.target, "cause": self.cause, "remedy": self.remedy, "resume": self.resume}

    def resuming(self, spec_hash: str, round_index: int) -> WriteFailed:
        """This failure, saying from which round the run ``spec_hash`` resumes."""
        where = f"from round {round_index}" if round_index else "from the start (no round was saved)"
        return WriteFailed(self.target, self.cause, self.remedy, f"run {spec_hash} resumes {where}")


def write_failure(exc: BaseException, target: str) -> WriteFailed | None:
    """``exc`` as a ``WriteFailed`` naming ``target`` when it is a write fault of the environment (an ``OSError`` with
    ENOSPC, EDQUOT, EROFS, EACCES or EPERM, or a database driver's error saying the same); None for anything else."""
    code = exc.errno if isinstance(exc, OSError) else None
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else None
    if code not in _WRITE_FAULTS:
        text = " ".join(str(getattr(exc, "orig", None) or exc).split()).lower()
        code = next((fault for words, fault in _DATABASE_FAULTS if words in text), None)
        if code is None and "disk i/o error" in text:  # SQLite's word for a write the disk refused, cause unsaid
            return WriteFailed(target, "disk I/O error", "check that its disk is present, writable and not full")
        detail = None
    if code is None:
        return None
    cause, remedy = _WRITE_FAULTS[code]
    return WriteFailed(target, f"{cause} ({detail})" if detail and detail.lower() != cause else cause, remedy)


class ClaimLost(Exception):
    """Raised inside a worker whose claim on a run another worker took over (its heartbeat stopped long enough to
    look hung, or it was presumed gone): it stops the run at once, writing nothing more for it: the new owner owns
    the run's rounds, checkpoint and status. Not a user error and not a failure of the run."""

    def __init__(self, run_id: int, worker: str):
        super().__init__(f"run {run_id}: worker {worker} lost its claim (another worker took the run over)")
        self.run_id, self.worker = run_id, worker


class Stopped(KeyboardInterrupt):
    """A worker stopped from outside by a signal other than Ctrl-C (a Slurm job's ``scancel`` or time limit, a node
    going down): handled where Ctrl-C is (the run in progress is recorded as interrupted, its checkpoint kept), but
    the run's stored reason says what stopped it instead of blaming the user."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
