"""A batch of planned runs against one registry: what ``fedbench run`` trains, skips and reports.

The runs come from ``selection.select_runs``; ``prepare_batch`` checks the ``ExecutionOptions``, data and
partitions (``preflight``), registers the runs and decides which to train; ``Batch.train`` trains them; ``Batch.outcome`` summarises the registry
afterwards. Printing, progress bars and exit codes belong to the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fedbench.data.federated import ArraysCache, check_test_set, client_test_sets, partition_clients
from fedbench.data.files import data_warnings
from fedbench.data.own import changed_data_warning, reads_user_path
from fedbench.execution.cluster import execute_on_cluster, reach_cluster
from fedbench.execution.devices import check_placement
from fedbench.execution.events import Emit
from fedbench.execution.local import execute
from fedbench.execution.options import ExecutionOptions
from fedbench.plugins import plugin_sources, source_changes
from fedbench.recipes.expand import PlannedRun
from fedbench.registry import Registry
from fedbench.registry.claims import stale_reason
from fedbench.spec import spec_warnings
from fedbench.vocab.status import FINISHED, RunStatus


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
    # of the running ones, those whose worker is gone or hung (``claims.stale_reason``: a Slurm job killed outright):
    # nobody is training them, so the batch is unfinished; the others are another live batch's to finish
    abandoned: int = 0


@dataclass
class Batch:
    """Planned runs registered in ``store``: ``todo`` will be trained with ``options`` (their registry URL is the
    store's); ``rerun`` (with ``force``) are finished runs put back to pending, ``skipped`` finished runs left
    alone."""

    planned: list[PlannedRun]
    store: Registry
    todo: list[PlannedRun]
    options: ExecutionOptions
    rerun: list[PlannedRun] = field(default_factory=list)
    skipped: list[PlannedRun] = field(default_factory=list)
    # the data sets preflight loaded: an in-process run trains from them instead of loading its data set again
    arrays: ArraysCache | None = None
    warnings: list[str] = field(default_factory=list)  # for the user, one line each (e.g. unchecked pickles)

    def train(self, on_event: Emit) -> None:
        """Train ``todo`` as ``options.launch`` says: in process (one local job), in local worker processes, or in
        Slurm jobs or Ray tasks; progress goes to ``on_event``."""
        launch = self.options.launch
        if launch.cluster is not None:
            execute_on_cluster(self.todo, self.options, on_event)
            return
        execute(self.todo, self.options, launch.jobs, on_event, arrays=self.arrays)

    def outcome(self) -> Outcome:
        """Statuses of the batch's runs now, and the last error line of each failed one."""
        final = self.store.statuses(p.spec_hash for p in self.planned)
        counts: dict[str, int] = {}
        for status in final.values():
            counts[status] = counts.get(status, 0) + 1
        failed = [p for p in self.planned if final.get(p.spec_hash) == RunStatus.FAILED]
        rows = {r.spec_hash: r for r in self.store.runs(spec_hashes=[p.spec_hash for p in failed])} if failed else {}
        failures = []
        for p in failed:
            lines = (rows[p.spec_hash].error or "").strip().splitlines()
            failures.append(FailedRun(p.spec_hash, p.labels, lines[-1] if lines else ""))
        running = [p.spec_hash for p in self.planned if final.get(p.spec_hash) == RunStatus.RUNNING]
        held = self.store.runs(status=RunStatus.RUNNING, spec_hashes=running) if running else []
        abandoned = sum(stale_reason(row) is not None for row in held)
        return Outcome(self.store.display_url, dict(sorted(counts.items())), failures, abandoned)


def prepare_batch(planned: list[PlannedRun], options: ExecutionOptions, *, force: bool = False) -> Batch:
    """Check the options, and the data and partitions of the runs to train (bad input changes nothing in the
    registry), register every planned run, and decide what to train: finished runs are skipped, or with ``force``
    put back to pending. The workers load the plug-ins loaded here (``ExecutionOptions.plugins``); a finished run
    skipped although the source of a plug-in that declares a revision changed since is a warning."""
    check_placement(options.device, options.gpus)
    known = Registry.peek_statuses(options.registry_url, [p.spec_hash for p in planned])
    # Data and partitions are checked before the registry is touched: bad input changes nothing there.
    arrays = ArraysCache()
    warnings = preflight(
        [p for p in planned if force or known.get(p.spec_hash) not in FINISHED],
        options.settings.data_root,
        verify=options.settings.verify,
        arrays=arrays,
    )
    if any(known.get(p.spec_hash) not in FINISHED for p in planned) or force:
        reach_cluster(options.launch)  # an unreachable cluster is a user error before anything is registered
    store = Registry(options.registry_url)
    store.ensure_runs([p.registry_entry() for p in planned])
    statuses = store.statuses(p.spec_hash for p in planned)
    finished = [p for p in planned if statuses.get(p.spec_hash) in FINISHED]
    if force and finished:
        store.reset_for_rerun(p.spec_hash for p in finished)
    elif finished and options.settings.verify:
        warnings += changed_data_warnings(finished, store, options.settings.data_root)
    todo = planned if force else [p for p in planned if statuses.get(p.spec_hash) not in FINISHED]
    if not force and any(p.spec.plugin_code for p in finished):
        warnings += source_changes(row.provenance for row in store.run_states(p.spec_hash for p in finished))
    plugins = tuple(dict.fromkeys([*options.plugins, *plugin_sources()]))
    return Batch(
        planned,
        store,
        todo,
        # the default registry, resolved: every worker opens this one, and loads the plug-ins loaded here
        replace(options, registry_url=store.url, plugins=plugins),
        rerun=finished if force else [],
        skipped=[] if force else finished,
        arrays=arrays,
        warnings=warnings,
    )


def preflight(
    planned: list[PlannedRun], data_root: str | None = None, verify: bool = True, arrays: ArraysCache | None = None
) -> list[str]:
    """Load every data set and build every distinct partition once before anything is registered, so
    missing data or impossible partition (or client test set) parameters are user errors (exit 2) that leave
    the registry untouched, instead of failed runs. ``arrays``: a cache to load through (pass the one the
    in-process runs will use, so that the last data set is not loaded twice). Returns the warnings for the
    user, one line each (pickled data files read without a matched checksum, suspicious data, settings that do
    nothing: ``spec_warnings``)."""
    arrays = arrays if arrays is not None else ArraysCache()
    seen: set[str] = set()
    warnings: dict[str, None] = {}  # ordered, each once
    for item in planned:
        spec = item.spec
        key = repr(
            (
                spec.dataset,
                sorted(spec.dataset_params.items()),
                spec.synthetic,
                spec.partition,
                sorted(spec.partition_params.items()),
                spec.num_clients,
                spec.seed,
                spec.client_test,
                sorted(spec.client_test_params.items()),
            )
        )
        if key in seen:
            continue
        seen.add(key)
        loaded = arrays.load(spec, data_root, verify)
        for warning in [*data_warnings(spec.dataset, loaded.info), *spec_warnings(spec)]:
            warnings[warning] = None
        check_test_set(spec, loaded)
        parts = partition_clients(spec, loaded)
        if spec.client_test != "split":
            client_test_sets(spec, loaded, parts)
    return list(warnings)


def changed_data_warnings(finished: list[PlannedRun], store: Registry, data_root: str | None) -> list[str]:
    """One line per data set read from a user's path whose finished runs (which the batch skips and a report shows)
    were trained on content other than the path holds now (``fedbench.data.own.changed_data_warning``)."""
    by_data: dict[str, list[PlannedRun]] = {}
    for item in finished:
        if not item.spec.synthetic and reads_user_path(item.spec.dataset):
            by_data.setdefault(repr((item.spec.dataset, sorted(item.spec.dataset_params.items()))), []).append(item)
    if not by_data:
        return []
    stored = {row.spec_hash: row.provenance for row in store.run_states(p.spec_hash for p in finished)}
    lines = []
    for runs in by_data.values():
        spec = runs[0].spec
        line = changed_data_warning(
            spec.dataset, data_root, dict(spec.dataset_params), [stored.get(p.spec_hash) for p in runs]
        )
        if line:
            lines.append(line)
    return lines


__all__ = ["preflight", "prepare_batch", "Batch", "Outcome", "FailedRun"]
