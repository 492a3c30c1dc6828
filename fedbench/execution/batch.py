"""A batch of planned runs against one registry: what ``fedbench run`` trains, skips and reports.

``plan_runs`` compiles recipes with the command line's seeds, filters and overrides; ``dry_run`` lists each
run's registry status without touching the registry; ``prepare_batch`` checks data and partitions, registers
the runs and decides which to train; ``Batch.train`` trains them; ``Batch.outcome`` summarises the registry
afterwards. Printing, progress bars and exit codes belong to the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedbench.errors import FedbenchError
from fedbench.recipes.expand import PlannedRun, compile_recipes
from fedbench.registry import Registry

FINISHED = ("done", "diverged")  # statuses a re-run skips unless forced


def plan_runs(
    recipes: Sequence[str | Path],
    *,
    scale: str = "full",
    seeds: list[int] | None = None,
    only: dict[str, set[str]] | None = None,
    overrides: dict[str, Any] | None = None,
    synthetic: bool = False,
    device: str = "auto",
) -> list[PlannedRun]:
    """Compile ``recipes`` into runs (deduplicated by spec_hash) and check ``device``; an ``only`` filter that
    keeps nothing is an error. An empty list means the recipes define no runs (analytic tables only)."""
    from fedbench.execution.executors import resolve_device  # imports torch: only when runs are planned

    planned = compile_recipes(
        list(recipes), scale=scale, seeds=seeds, only=only, overrides=overrides, synthetic=synthetic
    )
    resolve_device(device)
    if not planned and only:
        filters = " ".join(f"{key}={'|'.join(sorted(values))}" for key, values in only.items())
        raise FedbenchError(f"no runs match --only {filters}: check the filters against the recipe's labels")
    return planned


@dataclass(frozen=True)
class DryRunRow:
    spec_hash: str
    labels: dict[str, str]
    seed: int
    rounds: int
    status: str  # the registry's status, or "new"


def dry_run(planned: list[PlannedRun], registry_url: str | None) -> list[DryRunRow]:
    """Each planned run with its registry status ("new" if absent); reads the registry only if it exists."""
    statuses = Registry.peek_statuses(registry_url, [p.spec_hash for p in planned])
    return [
        DryRunRow(p.spec_hash, p.labels, p.spec.seed, p.spec.rounds, statuses.get(p.spec_hash, "new")) for p in planned
    ]


@dataclass(frozen=True)
class FailedRun:
    spec_hash: str
    labels: dict[str, str]
    error: str  # the last line of the stored error


@dataclass(frozen=True)
class Outcome:
    registry_url: str  # as shown to people: password masked
    counts: dict[str, int]  # status → number of the batch's runs, sorted by status
    failed: list[FailedRun]


@dataclass
class Batch:
    """Planned runs registered in ``store``: ``todo`` will be trained; ``rerun`` (with ``force``) are finished
    runs put back to pending, ``skipped`` finished runs left alone."""

    planned: list[PlannedRun]
    store: Registry
    todo: list[PlannedRun]
    rerun: list[PlannedRun] = field(default_factory=list)
    skipped: list[PlannedRun] = field(default_factory=list)
    device: str = "auto"
    data_root: str | None = None
    verify: bool = True
    threads: int = 1
    packing: str = "auto"  # ExecutionOptions.packing
    gpus: tuple[int, ...] | None = None  # ExecutionOptions.gpus
    fast: bool = True  # ExecutionOptions.fast
    compile: bool = False  # ExecutionOptions.compile
    checkpoints: str | None = None  # a shared checkpoint folder (``fedbench.execution.cluster.checkpoints_folder``)
    client_state_memory: int | None = None  # ExecutionOptions.client_state_memory
    # the data sets preflight loaded: an in-process run trains from them instead of loading its data set again
    arrays: Any = None  # a fedbench.data.federated.ArraysCache (imported lazily: it pulls in torch)
    warnings: list[str] = field(default_factory=list)  # for the user, one line each (e.g. unchecked pickles)

    def train(self, jobs: int, on_event: Callable[[dict[str, Any]], None], cluster: Any = None) -> None:
        """Train ``todo`` in process (``jobs`` = 1) or in ``jobs`` worker processes; progress goes to ``on_event``.
        ``cluster``: a ``fedbench.execution.cluster.SlurmOptions`` or ``RayOptions`` to run the ``jobs`` workers there."""
        from fedbench.execution.executors import ExecutionOptions, execute

        options = ExecutionOptions(
            registry_url=self.store.url,
            device=self.device,
            data_root=self.data_root,
            verify=self.verify,
            threads=self.threads,
            packing=self.packing,
            gpus=self.gpus,
            fast=self.fast,
            compile=self.compile,
            checkpoints=self.checkpoints,
            client_state_memory=self.client_state_memory,
        )
        if cluster is not None:
            from fedbench.execution.cluster import execute_on_cluster

            execute_on_cluster(self.todo, options, jobs, on_event, cluster)
            return
        execute(self.todo, options, jobs, on_event, arrays=self.arrays)

    def outcome(self) -> Outcome:
        """Statuses of the batch's runs now, and the last error line of each failed one."""
        final = self.store.statuses(p.spec_hash for p in self.planned)
        counts: dict[str, int] = {}
        for status in final.values():
            counts[status] = counts.get(status, 0) + 1
        failed = [p for p in self.planned if final.get(p.spec_hash) == "failed"]
        rows = {r.spec_hash: r for r in self.store.runs(spec_hashes=[p.spec_hash for p in failed])} if failed else {}
        failures = []
        for p in failed:
            lines = (rows[p.spec_hash].error or "").strip().splitlines()
            failures.append(FailedRun(p.spec_hash, p.labels, lines[-1] if lines else ""))
        return Outcome(self.store.display_url, dict(sorted(counts.items())), failures)


def prepare_batch(
    planned: list[PlannedRun],
    registry_url: str | None,
    *,
    data_root: str | Path | None = None,
    verify: bool = True,
    force: bool = False,
    device: str = "auto",
    threads: int = 1,
    packing: str = "auto",
    gpus: tuple[int, ...] | None = None,
    fast: bool = True,
    compile: bool = False,
    checkpoints: str | None = None,
    client_state_memory: int | None = None,
) -> Batch:
    """Check data and partitions of the runs to train (bad input changes nothing in the registry), register every
    planned run, and decide what to train: finished runs are skipped, or with ``force`` put back to pending."""
    from fedbench.data.federated import ArraysCache
    from fedbench.engine.packed import check_packing
    from fedbench.execution.executors import check_placement, preflight

    check_packing(packing)
    check_placement(device, gpus)
    root = str(data_root) if data_root is not None else None
    known = Registry.peek_statuses(registry_url, [p.spec_hash for p in planned])
    # Data and partitions are checked before the registry is touched: bad input changes nothing there.
    arrays = ArraysCache()
    warnings = preflight(
        [p for p in planned if force or known.get(p.spec_hash) not in FINISHED], root, verify=verify, arrays=arrays
    )
    store = Registry(registry_url)
    store.ensure_runs([p.registry_entry() for p in planned])
    statuses = store.statuses(p.spec_hash for p in planned)
    finished = [p for p in planned if statuses.get(p.spec_hash) in FINISHED]
    if force and finished:
        store.reset_for_rerun(p.spec_hash for p in finished)
    todo = planned if force else [p for p in planned if statuses.get(p.spec_hash) not in FINISHED]
    return Batch(
        planned,
        store,
        todo,
        rerun=finished if force else [],
        skipped=[] if force else finished,
        device=device,
        data_root=root,
        verify=verify,
        threads=threads,
        packing=packing,
        gpus=gpus,
        fast=fast,
        compile=compile,
        checkpoints=checkpoints,
        client_state_memory=client_state_memory,
        arrays=arrays,
        warnings=warnings,
    )


__all__ = ["plan_runs", "dry_run", "DryRunRow", "prepare_batch", "Batch", "Outcome", "FailedRun"]
