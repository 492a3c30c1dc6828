"""Moving finished runs between registries as JSON lines (``fedbench export`` / ``fedbench import``).

A runs file is plain JSON, never pickle: its first line is a header ``{"format": "fedbench-runs", "version": 2,
...}`` (version 1 files, without per-round diagnostics, are read too), then one object per finished run (done or diverged) with everything a report needs: spec, spec_hash,
labels, status, provenance, summary and the per-round curve. Runs are identified by ``spec_hash`` (checked
against the spec, so a line cannot file a result under another run's identity). Importing is idempotent: a
run the registry lacks (or holds unfinished) gets the file's result; a finished run with the same result
(same status, summary and curve; times and hosts may differ) is left alone; a finished run with another
result is a conflict, reported and never overwritten. The whole file is checked before anything is written.

Provenance and errors are exported with every URL's password replaced by ``***``: a runs file is meant to be
handed around.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from sqlalchemy import Float, Integer, Row, delete, insert, select, update

from fedbench import __version__
from fedbench.errors import RunsFileError, UnknownNameError, field_error
from fedbench.registry import Registry
from fedbench.registry.schema import head_revision
from fedbench.registry.store import in_chunks
from fedbench.registry.tables import rounds, runs
from fedbench.urls import mask_passwords
from fedbench.vocab.status import CLAIMABLE, FINISHED, RunStatus

if TYPE_CHECKING:
    from fedbench.spec import RunSpec

FORMAT = "fedbench-runs"
# Version 2 added each round's ``diagnostics``; a version 1 file (written before) reads as rounds without them.
VERSION = 2
READABLE_VERSIONS = (1, 2)
# The per-round columns a runs file carries: every column of the rounds table but its key to the run.
ROUND_COLUMNS = [column for column in rounds.columns if column.name != "run_id"]
# wall_seconds depends on the machine, not the run: two trainings of one spec agree on everything else.
MACHINE_DEPENDENT = ("wall_seconds",)


def redact(value: Any) -> Any:
    """``value`` with the password of every URL in its strings replaced by ``***`` (recursively; keys are names)."""
    if isinstance(value, str):
        return mask_passwords(value)
    if isinstance(value, dict):
        return {key: redact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


def _column_type(column) -> Any:
    if isinstance(column.type, Integer):
        return int
    if isinstance(column.type, Float):
        return float
    return Any  # JSON columns: per-client lists, per-metric dicts


# defer_build: the line schemas are built when `fedbench import` first reads a line; `fedbench export` never does
class Header(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    format: Literal["fedbench-runs"]
    version: int


RoundLine: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "RoundLine",
    __config__=ConfigDict(extra="forbid", defer_build=True),
    **{c.name: ((int, ...) if c.name == "round" else (_column_type(c) | None, None)) for c in ROUND_COLUMNS},
)


class RunLine(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    spec_hash: str = Field(pattern=r"^[0-9a-f]{8,32}$")
    spec: dict[str, Any]
    labels: dict[str, str]
    paper: str | None = None
    recipe: str | None = None
    targets: list[float] = []
    status: Literal[RunStatus.DONE, RunStatus.DIVERGED]
    error: str | None = None
    rounds_done: int = Field(ge=0)
    diverged_round: int | None = None
    summary: dict[str, Any]
    provenance: dict[str, Any]
    wall_seconds: float | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    rounds: list[RoundLine]


# ---------------------------------------------------------------------------------------------------- export
def export_lines(registry: Registry, paper: str | None = None, recipe: str | None = None) -> Iterator[str]:
    """The runs file of ``registry``'s finished runs (of ``paper``, of the recipe named ``recipe``), line by line."""
    yield json.dumps({"format": FORMAT, "version": VERSION, "fedbench": __version__, "schema": head_revision()})
    for run, curve in finished_runs(registry, paper=paper, recipe=recipe):
        yield json.dumps(_run_record(run, curve), sort_keys=True)


def finished_runs(
    registry: Registry, paper: str | None = None, recipe: str | None = None
) -> Iterator[tuple[Row[Any], list[Row[Any]]]]:
    """The finished runs (done or diverged) of ``paper``, of the recipe named ``recipe``, each with its curve, in id
    order: what every export writes (a runs file, ``fedbench export --to mlflow|tensorboard``)."""
    finished = [
        r for r in registry.runs(paper=paper) if r.status in FINISHED and (recipe is None or r.recipe == recipe)
    ]
    for chunk in in_chunks(finished):
        curves = registry.curves([r.id for r in chunk])
        for run in chunk:
            yield run, curves[run.id]


def _run_record(run: Row[Any], curve: list[Row[Any]]) -> dict[str, Any]:
    record = {name: getattr(run, name) for name in RunLine.model_fields if name != "rounds"}
    for name in ("created_at", "started_at", "finished_at"):
        record[name] = record[name].isoformat() if record[name] is not None else None
    record["provenance"] = redact(record["provenance"] or {})
    record["error"] = redact(record["error"])
    record["rounds"] = [{c.name: getattr(row, c.name) for c in ROUND_COLUMNS} for row in curve]
    return record


# ---------------------------------------------------------------------------------------------------- import
@dataclass(frozen=True)
class Conflict:
    line: int
    spec_hash: str
    reason: str


@dataclass
class ImportOutcome:
    added: list[str] = field(default_factory=list)  # spec_hashes new to the registry
    completed: list[str] = field(default_factory=list)  # runs the registry held unfinished, now finished
    unchanged: list[str] = field(default_factory=list)  # already there with the same result
    conflicts: list[Conflict] = field(default_factory=list)  # finished here with another result: left as they are


def read_runs_file(path: Path, resolve_spec: Callable[[RunSpec], RunSpec]) -> list[tuple[int, RunLine]]:
    """Parse and check every line of a runs file (RunsFileError naming the line and key at the first bad one).
    ``resolve_spec`` (``fedbench.recipes.resolve.resolve_spec``, given by the caller: resolving needs the plug-ins,
    a layer above the registry) fills in a spec's resolved fields, so its hash can be checked."""
    from fedbench.spec import RunSpec  # local: `fedbench export` starts without building the spec's schema

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunsFileError(f"{path}: cannot read the runs file ({exc})") from None
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not numbered:
        raise RunsFileError(f"{path}: empty; a runs file starts with a header line written by `fedbench export`")
    runs: list[tuple[int, RunLine]] = []
    seen: dict[str, int] = {}
    for index, (number, line) in enumerate(numbered):
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RunsFileError(f"{path} line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
        if index == 0:
            header = _validated(Header, data, path, number)
            if header.version not in READABLE_VERSIONS:
                raise RunsFileError(
                    f"{path} line {number}: key version: runs file version {header.version}, this fedbench "
                    f"reads versions {', '.join(map(str, READABLE_VERSIONS))}; export it again with this fedbench"
                )
            continue
        run = _validated(RunLine, data, path, number)
        # resolved: a line written before specs held their result revision gets the current one, as before
        try:
            spec = resolve_spec(_validated(RunSpec, run.spec, path, number, prefix="spec."))
        except UnknownNameError as exc:  # a plug-in's method, model or data set, not loaded here
            raise RunsFileError(f"{path} line {number}: {exc}{_plugin_hint(run)}") from None
        if spec.spec_hash != run.spec_hash:
            raise RunsFileError(
                f"{path} line {number}: key spec_hash: {run.spec_hash} is not the hash of the line's spec "
                f"({spec.spec_hash}); the file was edited or written by an incompatible fedbench"
            )
        if run.spec_hash in seen:
            raise RunsFileError(
                f"{path} line {number}: key spec_hash: run {run.spec_hash} already on line {seen[run.spec_hash]}"
            )
        seen[run.spec_hash] = number
        run.spec = spec.model_dump(mode="json")
        runs.append((number, run))
    return runs


def _plugin_hint(run: RunLine) -> str:
    """Where the plug-ins a run was trained with came from (its provenance), to load them with ``--plugin``."""
    sources = [str(p.get("distribution") or p.get("source")) for p in run.provenance.get("plugins") or []]
    if not sources:
        return "; load the plug-in that defines it with --plugin"
    return f"; the run was trained with the plug-in {', '.join(sources)}: load it with --plugin"


def _validated(model: Any, data: Any, path: Path, number: int, prefix: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RunsFileError(f"{path} line {number}: key {field_error(exc).line(prefix, '(the line)')}") from None


def _result(status: str, summary: dict[str, Any], rounds: Iterable[dict[str, Any]]) -> Any:
    return status, summary, [{k: v for k, v in r.items() if k not in MACHINE_DEPENDENT} for r in rounds]


def import_runs(registry: Registry, lines: list[tuple[int, RunLine]]) -> ImportOutcome:
    """Merge checked runs (``read_runs_file``) into ``registry`` in one transaction."""
    outcome = ImportOutcome()
    with registry.engine.begin() as transaction:
        for number, line in lines:
            curve = [r.model_dump() for r in line.rounds]
            existing = transaction.execute(select(runs).where(runs.c.spec_hash == line.spec_hash)).first()
            if existing is not None and existing.status in FINISHED:
                here = transaction.execute(
                    select(*ROUND_COLUMNS).where(rounds.c.run_id == existing.id).order_by(rounds.c.round)
                )
                ours = [row._asdict() for row in here]
                if _result(existing.status, existing.summary, ours) == _result(line.status, line.summary, curve):
                    outcome.unchanged.append(line.spec_hash)
                else:
                    reason = _difference(existing, ours, line, curve)
                    outcome.conflicts.append(Conflict(number, line.spec_hash, reason))
                continue
            if existing is not None and existing.status not in CLAIMABLE:
                outcome.conflicts.append(
                    Conflict(number, line.spec_hash, f"running here (worker {existing.worker}): not replaced")
                )
                continue
            values = line.model_dump(exclude={"rounds"})
            spec = line.spec
            values.update(
                algorithm=spec["algorithm"],
                dataset=spec["dataset"],
                seed=spec["seed"],
                scale=spec["scale"],
                synthetic=spec["synthetic"],
                worker=None,
                heartbeat_at=None,
            )
            if existing is None:
                inserted = transaction.execute(insert(runs).values(**values))
                run_id = inserted.inserted_primary_key[0]  # type: ignore[index]  # an INSERT of one row has its key
                outcome.added.append(line.spec_hash)
            else:  # pending, failed or interrupted here: the file's finished result completes it
                run_id = existing.id
                transaction.execute(update(runs).where(runs.c.id == run_id).values(**values))
                transaction.execute(delete(rounds).where(rounds.c.run_id == run_id))
                outcome.completed.append(line.spec_hash)
            if curve:
                transaction.execute(insert(rounds), [{"run_id": run_id, **r} for r in curve])
    return outcome


def _difference(existing: Row[Any], ours: list[dict[str, Any]], line: RunLine, theirs: list[dict[str, Any]]) -> str:
    if existing.status != line.status:
        return f"status {existing.status} here, {line.status} in the file"
    if len(ours) != len(theirs):
        return f"{len(ours)} rounds here, {len(theirs)} in the file"
    for mine, other in zip(ours, theirs):
        for key in mine:
            if key not in MACHINE_DEPENDENT and mine[key] != other.get(key):
                return f"round {mine['round']} {key}: {mine[key]!r} here, {other.get(key)!r} in the file"
    return "summary differs"


__all__ = [
    "export_lines",
    "finished_runs",
    "read_runs_file",
    "import_runs",
    "ImportOutcome",
    "Conflict",
    "redact",
    "FORMAT",
    "VERSION",
    "READABLE_VERSIONS",
]
