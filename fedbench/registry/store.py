"""What the registry stores about runs and how it is read: the ``runs`` rows (registered, their provenance and
checkpoint hash) and the ``rounds`` of each run's curve. Writes for a claimed run are checked against its claim
(``claims.update_owned``). Reads come in chunks of 500 keys, below every database's limit on parameters.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import Result, Row, Text, bindparam, case, cast, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from fedbench.errors import RegistryError
from fedbench.registry import claims  # claims.now: the registry's one clock (tests replace it)
from fedbench.registry.connection import Connection
from fedbench.registry.reconnect import reconnecting
from fedbench.registry.tables import rounds, runs
from fedbench.vocab.status import WAITING, RunStatus


class Store(Connection):
    """Registering runs, recording their rounds, provenance and checkpoint hash, and every query of runs and curves.
    Each is retried after a lost connection to a server registry (``reconnect.py``), which every one of them allows:
    reads, and writes that leave the same rows when made twice (a round replaces the one of its run and round)."""

    # ------------------------------------------------------------------ registering and recording
    @reconnecting
    def ensure_runs(self, entries: Iterable[dict[str, Any]]) -> None:
        """Insert a ``pending`` row for every spec not yet in the registry (idempotent, race-safe)."""
        for entry in entries:
            try:
                with self._writing(), self.engine.begin() as transaction:
                    if transaction.execute(select(runs.c.id).where(runs.c.spec_hash == entry["spec_hash"])).first():
                        continue
                    transaction.execute(insert(runs).values(status=RunStatus.PENDING, created_at=claims.now(), **entry))
            except IntegrityError:  # another worker inserted it first
                pass

    @reconnecting
    def set_provenance(self, run_id: int, provenance: dict[str, Any], worker: str | None = None) -> None:
        with self._writing(), self.engine.begin() as transaction:
            claims.update_owned(transaction, run_id, worker, provenance=provenance)

    @reconnecting
    def log_round(self, run_id: int, record, worker: str | None = None) -> None:
        values = asdict(record)
        with self._writing(), self.engine.begin() as transaction:
            # the claim is checked (and on SQLite the write lock taken) before the round is written
            claims.update_owned(transaction, run_id, worker, heartbeat_at=claims.now(), rounds_done=record.round)
            # a round written again (a resumed run repeating it) replaces the earlier one
            transaction.execute(delete(rounds).where(rounds.c.run_id == run_id, rounds.c.round == record.round))
            transaction.execute(insert(rounds).values(run_id=run_id, **values))

    @reconnecting
    def truncate_rounds(self, run_id: int, after_round: int, worker: str | None = None) -> None:
        with self._writing(), self.engine.begin() as transaction:
            if worker is not None:  # takes the write lock and checks the claim in the same transaction
                claims.update_owned(transaction, run_id, worker, heartbeat_at=claims.now())
            transaction.execute(delete(rounds).where(rounds.c.run_id == run_id, rounds.c.round > after_round))

    @reconnecting
    def record_checkpoint(self, run_id: int, sha256: str | None, worker: str | None = None) -> None:
        with self._writing(), self.engine.begin() as transaction:
            claims.update_owned(transaction, run_id, worker, checkpoint_sha256=sha256)

    @reconnecting
    def checkpoint_sha256(self, run_id: int) -> str | None:
        """The sha256 of the checkpoint this run last wrote (None if it wrote none since it was last reset)."""
        with self.engine.connect() as connection:
            return connection.scalar(select(runs.c.checkpoint_sha256).where(runs.c.id == run_id))

    # ------------------------------------------------------------------ queries
    @reconnecting
    def statuses(self, spec_hashes: Iterable[str]) -> dict[str, str]:
        hashes = list(spec_hashes)
        out: dict[str, str] = {}
        with self.engine.connect() as connection:
            for chunk in in_chunks(hashes):
                rows = connection.execute(select(runs.c.spec_hash, runs.c.status).where(runs.c.spec_hash.in_(chunk)))
                out.update({h: s for h, s in rows})
        return out

    @classmethod
    def peek_statuses(cls, url: str | None, spec_hashes: list[str]) -> dict[str, str]:
        registry = cls.open_existing(url)
        return registry.statuses(spec_hashes) if registry else {}

    @reconnecting
    def get_run(self, run_id_or_hash: str | int) -> Row[Any]:
        """The run with this id, or the one whose spec_hash starts with it, as a read-only row."""
        key = str(run_id_or_hash)
        condition = runs.c.id == int(key) if key.isdigit() else runs.c.spec_hash.startswith(key)
        with self.engine.connect() as connection:
            run = connection.execute(select(runs).where(condition)).first()
        if run is None:
            raise RegistryError(f"no run {key!r} in registry {self.display_url}; list runs with `fedbench runs`")
        return run

    @reconnecting
    def runs(
        self, paper: str | None = None, status: str | None = None, spec_hashes: Iterable[str] | None = None
    ) -> list[Row[Any]]:
        """The runs (of ``paper``, with ``status``, among ``spec_hashes``) as read-only rows, in id order."""
        query = select(runs).order_by(runs.c.id)
        if paper:
            query = query.where(runs.c.paper == paper)
        if status:
            query = query.where(runs.c.status == status)
        rows: list[Row[Any]] = []
        with self.engine.connect() as connection:
            if spec_hashes is None:
                return list(connection.execute(query).all())
            hashes = list(dict.fromkeys(spec_hashes))  # a hash in two chunks would be read twice
            for chunk in in_chunks(hashes):
                rows += connection.execute(query.where(runs.c.spec_hash.in_(chunk))).all()
        return sorted(rows, key=lambda row: row.id)

    @reconnecting
    def plugin_sources(self, kind: str, name: str) -> list[str]:
        """Where the plug-ins that registered ``kind`` ``name`` (e.g. "algorithm", "fedavgm") for this registry's
        runs came from, from the runs' provenance (``fedbench.plugins.identity``: a file, a folder or an installed
        distribution), the latest run's first; empty when no run was trained with such a plug-in."""
        query = select(runs.c.provenance).order_by(runs.c.id.desc())
        found: dict[str, None] = {}
        with self.engine.connect() as connection:
            for (provenance,) in connection.execute(query):
                for plugin in (provenance or {}).get("plugins") or []:
                    if [kind, name] in (plugin.get("names") or []):
                        found[str(plugin.get("distribution") or plugin.get("source"))] = None
        return list(found)

    @reconnecting
    def run_states(self, spec_hashes: Iterable[str]) -> list[Any]:
        """The runs of ``spec_hashes`` as read-only rows of ``id``, ``spec_hash``, ``status``, ``seed``,
        ``provenance`` and ``summary`` (what a report table reads; no spec JSON to decode): one statement."""
        query = select(
            runs.c.id, runs.c.spec_hash, runs.c.status, runs.c.seed, runs.c.provenance, runs.c.summary
        ).where(runs.c.spec_hash.in_(bindparam("hashes", expanding=True)))
        hashes = list(spec_hashes)
        out: list[Any] = []
        with self.engine.connect() as connection:
            for chunk in in_chunks(hashes):
                out += _records(connection.execute(query, {"hashes": chunk}))
        return out

    @reconnecting
    def curves(self, run_ids: Iterable[int], fields: Iterable[str] | None = None) -> dict[int, list[Any]]:
        """{run id: its stored rounds in order}. Each round is a read-only record (a named tuple) with the ``rounds``
        columns as attributes (only ``run_id``, ``round`` and ``fields`` when given): a paper's report reads hundreds
        of thousands."""
        ids = list(run_ids)
        out: dict[int, list[Any]] = {i: [] for i in ids}
        wanted = dict.fromkeys(["run_id", "round", *fields]) if fields is not None else None
        columns = [rounds.c[name] for name in wanted] if wanted is not None else list(rounds.c)
        # one statement, compiled once, for every chunk of ids (an expanding parameter)
        query = (
            select(*columns)
            .where(rounds.c.run_id.in_(bindparam("ids", expanding=True)))
            .order_by(rounds.c.run_id, rounds.c.round)
        )
        with self.engine.connect() as connection:
            for chunk in in_chunks(ids):
                for row in _records(connection.execute(query, {"ids": chunk})):
                    out[row[0]].append(row)  # row[0]: run_id, the first column
        return out

    def curve(self, run_id: int) -> list[Any]:
        return self.curves([run_id])[run_id]

    @reconnecting
    def diagnostic_values(self, run_ids: Iterable[int], name: str) -> dict[int, dict[int, Any]]:
        """{run id: {round: the stored value of diagnostic ``name``}} over the rounds that recorded it, in round
        order (``rounds.diagnostics``; ``fedbench/vocab/diagnostics.py`` says each value's layout). Only that
        diagnostic's value leaves the database (the JSON object's member), one statement per chunk of ids."""
        ids = list(run_ids)
        out: dict[int, dict[int, Any]] = {i: {} for i in ids}
        value = rounds.c.diagnostics[name]
        query = (
            select(rounds.c.run_id, rounds.c.round, value)
            .where(rounds.c.run_id.in_(bindparam("ids", expanding=True)), rounds.c.diagnostics.is_not(None))
            .order_by(rounds.c.run_id, rounds.c.round)
        )
        with self.engine.connect() as connection:
            for chunk in in_chunks(ids):
                for run_id, round_index, recorded in connection.execute(query, {"ids": chunk}):
                    if recorded is not None:  # a diagnosed round without this diagnostic
                        out[run_id][round_index] = recorded
        return out

    # ------------------------------------------------------------------ progress (aggregated by the database)
    @reconnecting
    def status_counts(self, paper: str | None = None, recipe: str | None = None) -> list[Row[Any]]:
        """Per paper, recipe, scale and status: ``runs`` (how many), ``rounds_done`` and ``rounds`` (their sums:
        rounds trained and planned, the planned number read from each stored spec) and ``workers`` (distinct)."""
        planned = runs.c.spec["rounds"].as_integer()
        groups = (runs.c.paper, runs.c.recipe, runs.c.scale, runs.c.status)
        query = select(
            *groups,
            func.count().label("runs"),
            # a group holds one run at least, and every run has rounds_done and a spec with its rounds: never NULL
            func.sum(runs.c.rounds_done).label("rounds_done"),
            func.sum(planned).label("rounds"),
            func.count(runs.c.worker.distinct()).label("workers"),
        ).group_by(*groups)
        with self.engine.connect() as connection:
            return list(connection.execute(_only(query, paper, recipe)).all())

    @reconnecting
    def round_seconds(self, paper: str | None = None, recipe: str | None = None) -> list[Row[Any]]:
        """Per paper, recipe, scale and cell (``dataset``, ``model``, ``labels``): ``seconds`` (the wall time of every
        recorded round) and ``rounds`` (how many rounds that is), the basis of a time-left estimate. ``labels`` is
        the stored JSON text (see ``_cell_columns``)."""
        groups = (runs.c.paper, runs.c.recipe, runs.c.scale, *_cell_columns())
        query = (
            select(*groups, func.sum(rounds.c.wall_seconds).label("seconds"), func.count().label("rounds"))
            .select_from(rounds.join(runs, rounds.c.run_id == runs.c.id))
            .where(rounds.c.wall_seconds.is_not(None))
            .group_by(*groups)
        )
        with self.engine.connect() as connection:
            return list(connection.execute(_only(query, paper, recipe)).all())

    @reconnecting
    def waiting_rounds(self, paper: str | None = None, recipe: str | None = None) -> list[Row[Any]]:
        """Per paper, recipe, scale and cell (as ``round_seconds``), over the runs a batch still waits for (pending,
        running, interrupted): ``runs`` (how many) and ``rounds_left`` (planned minus trained, each run's at least
        0, the planned number read from each stored spec)."""
        planned = runs.c.spec["rounds"].as_integer()
        left = case((planned > runs.c.rounds_done, planned - runs.c.rounds_done), else_=0)
        groups = (runs.c.paper, runs.c.recipe, runs.c.scale, *_cell_columns())
        query = (
            select(*groups, func.count().label("runs"), func.sum(left).label("rounds_left"))
            .where(runs.c.status.in_([str(status) for status in WAITING]))
            .group_by(*groups)
        )
        with self.engine.connect() as connection:
            return list(connection.execute(_only(query, paper, recipe)).all())


def _cell_columns() -> tuple[Any, ...]:
    """The columns that tell a run's cell (its runs differ only by seed): ``dataset``, ``model`` (read from the
    stored spec) and ``labels`` as JSON text. Text, because PostgreSQL's ``json`` type has no equality to group by;
    the text keeps the keys in the order they were written, so one cell may come back as several texts (the
    caller compares the parsed labels)."""
    return (
        runs.c.dataset,
        runs.c.spec["model"].as_string().label("model"),
        cast(runs.c.labels, Text).label("labels"),
    )


@cache
def _record_type(columns: tuple[str, ...]) -> Any:
    """The named tuple class of rows of these columns (made once per set of columns read)."""
    return namedtuple("Record", columns)


Key = TypeVar("Key")
IN_LIST_CHUNK = 500  # keys per `IN (...)` list: under SQLite's older limit of 999 bound parameters per statement


def in_chunks(keys: Sequence[Key]) -> Iterator[Sequence[Key]]:
    """``keys`` in consecutive slices of at most ``IN_LIST_CHUNK``: one query per slice of an ``IN`` list."""
    for start in range(0, len(keys), IN_LIST_CHUNK):
        yield keys[start : start + IN_LIST_CHUNK]


def _records(result: Result[Any]) -> list[Any]:
    """The rows of ``result`` as named tuples: read-only, the columns as attributes, as SQLAlchemy's ``Row`` has
    them, but an attribute is read several times faster (a report over 10,000 runs reads millions)."""
    make = _record_type(tuple(result.keys()))._make
    return [make(row) for row in result.all()]


def _only(query: Any, paper: str | None, recipe: str | None) -> Any:
    """``query`` restricted to the runs of ``paper`` and of the recipe named ``recipe`` (when given)."""
    if paper:
        query = query.where(runs.c.paper == paper)
    if recipe:
        query = query.where(runs.c.recipe == recipe)
    return query


__all__ = ["Store"]
