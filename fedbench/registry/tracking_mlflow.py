"""``fedbench export --to mlflow[:TRACKING_URI]``: each finished run as one MLflow run (``tracking.TrackedRun``).

Written with MLflow's own client (``MlflowClient``, the optional extra ``fedbench-repro[mlflow]``, which installs
``mlflow-skinny``: the tracking client without MLflow's server and UI), to any tracking URI it takes: a SQLite file
(``sqlite:///mlflow.db``, MLflow's default), another database, or a tracking server (``http://host:5000``). Without
a URI, MLflow's own default applies (``MLFLOW_TRACKING_URI``, else ``mlflow.db`` in the working directory).

The experiment is the run's ``fedbench/<recipe>`` (created when missing); the MLflow run is named by recipe,
labels and seed, starts and ends at the registry's times, holds the flattened spec as params, the tags, every step
series (step = round) and the summary as metrics. A copy is found by its ``fedbench.spec_hash`` tag: one whose
``fedbench.export_digest`` tag matches is left alone; one that differs is deleted (MLflow keeps deleted runs,
restorable, until its garbage collection) and written anew, so an experiment never holds two active copies of a
run. The digest tag is set last: an export stopped half-way leaves a copy the next export replaces.

MLflow's messages are shown with any URL password masked (``fedbench.urls``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import get_tracking_uri

from fedbench.errors import FedbenchError
from fedbench.registry.tracking import DIGEST_TAG, SPEC_HASH_TAG, Outcome, TrackedRun
from fedbench.urls import display_url, mask_passwords

# MLflow's limits on one log_batch request (its REST API refuses larger ones): entities of each kind.
MAX_PARAMS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000

T = TypeVar("T")


class MlflowTracker:
    """Writes ``TrackedRun``s to the MLflow tracking store at ``tracking_uri`` (None: MLflow's default)."""

    def __init__(self, tracking_uri: str | None) -> None:
        uri = tracking_uri or get_tracking_uri()
        self.shown = display_url(uri)
        self._experiments: dict[str, str] = {}
        with self._errors():
            self.client = MlflowClient(tracking_uri=uri)

    def write(self, run: TrackedRun) -> Outcome:
        with self._errors():
            experiment_id = self._experiment(run.experiment)
            copies = self.client.search_runs(
                [experiment_id],
                filter_string=f"tags.`{SPEC_HASH_TAG}` = '{run.spec_hash}'",
                run_view_type=ViewType.ACTIVE_ONLY,
            )
            if len(copies) == 1 and copies[0].data.tags.get(DIGEST_TAG) == run.digest:
                return "unchanged"
            for copy in copies:  # another result, or an export stopped half-way: replaced, never added to
                self.client.delete_run(copy.info.run_id)
            self._create(experiment_id, run)
        return "updated" if copies else "new"

    def _create(self, experiment_id: str, run: TrackedRun) -> None:
        created = self.client.create_run(experiment_id, start_time=run.start_ms, tags=run.tags, run_name=run.name)
        run_id = created.info.run_id
        for params in _chunks([Param(key, value) for key, value in run.params.items()], MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=params)
        metrics = [Metric(name, p.value, p.timestamp_ms, p.step) for name, points in run.series.items() for p in points]
        metrics += [Metric(name, value, run.end_ms, 0) for name, value in run.final.items()]
        for batch in _chunks(metrics, MAX_METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=batch)
        self.client.set_tag(run_id, DIGEST_TAG, run.digest)  # last: a copy without it is incomplete
        self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED), end_time=run.end_ms)

    def _experiment(self, name: str) -> str:
        if name not in self._experiments:
            found = self.client.get_experiment_by_name(name)
            self._experiments[name] = found.experiment_id if found is not None else self.client.create_experiment(name)
        return self._experiments[name]

    def _errors(self) -> AbstractContextManager[None]:
        return _refused(self.shown)


@contextmanager
def _refused(shown: str) -> Iterator[None]:
    """An MLflow error (or the store's file refused) as one line naming the tracking store, any password masked."""
    try:
        yield
    except (MlflowException, OSError) as exc:
        message = str(exc).strip()
        first = mask_passwords(message.splitlines()[0]) if message else type(exc).__name__
        raise FedbenchError(f"--to mlflow:{shown}: MLflow refused the export: {first}") from None


def _chunks(items: Sequence[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


__all__ = ["MlflowTracker", "MAX_PARAMS_PER_BATCH", "MAX_METRICS_PER_BATCH"]
