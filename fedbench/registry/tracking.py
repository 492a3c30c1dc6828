"""Finished runs as a lab's experiment tracker shows them: ``fedbench export --to mlflow[:URI]`` and
``--to tensorboard:DIR`` (the trackers themselves: ``tracking_mlflow.py``, ``tracking_tensorboard.py``).

The registry stays the source of truth; a tracker gets a copy of each finished run (done or diverged) that the
export's selection (``--paper``, ``--recipe``) picks, as a ``TrackedRun``, the one description both trackers write:

* its **experiment** ``fedbench/<recipe>`` (the paper where a run has no recipe) and its **name**, the recipe, the
  run's labels and its seed (``quickstart algorithm=fedavg seed=0``; the scale and ``synthetic`` added where they
  are not the full scale on real data, so the smoke run of a cell is told from the full one);
* its **params**: the resolved spec flattened (``optimizer.lr``), each value as text (JSON but for strings);
* its **tags**: spec hash, paper, recipe, status, scale, labels, the fedbench version and git commit the run was
  trained with, and the plug-ins it used (``none``);
* its **step series**: every curve metric of the catalogue (``vocab.metrics.METRICS``: ``test_acc``,
  ``personal_mean``, ``personal_auc``, …) that the run recorded, and the per-round spreads and costs
  (``personal_std``, ``wall_seconds``, ``bytes_up``, ``bytes_down``), each at step = its round, in the registry's
  units: accuracies and Dice are fractions in [0, 1], never percentages, as in ``fedbench show --json``. Per-client
  lists and per-round diagnostics are not sent (they are no scalar series);
* its **final metrics**: the stored summary, flattened (``summary.best``, ``summary.rounds_to_target.80``); a
  value the summary holds as null (a target not reached) is left out.

Times are the registry's: a run starts at its ``started_at`` and round ``t``'s values are stamped at the start plus
the wall time of rounds 1..t, so exporting again writes exactly the same values.

Exporting is idempotent, keyed by the spec hash: each tracker keeps one copy per spec hash, tagged with the
``digest`` of everything written; a second export leaves a copy whose digest matches alone and replaces one that
differs (a run trained again, an export by an older fedbench), never adding a second. Every text that leaves the
registry goes through ``transfer.redact``: no URL's password reaches a tracker.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from sqlalchemy import Row

from fedbench import __version__
from fedbench.errors import FedbenchError
from fedbench.registry import Registry
from fedbench.registry.transfer import finished_runs, redact
from fedbench.urls import display_url
from fedbench.vocab.metrics import METRICS, ROUND_FIELDS, metric_curve
from fedbench.vocab.status import FINISHED

SPEC_HASH_TAG = "fedbench.spec_hash"  # the key a tracker finds a run's copy by
DIGEST_TAG = "fedbench.export_digest"  # the digest of the copy's content (``TrackedRun.digest``)
SUMMARY_PREFIX = "summary."
# Per-round scalars besides the catalogue's curve metrics: spreads over clients and costs (ROUND_FIELDS' kinds).
EXTRA_SERIES = tuple(f.name for f in ROUND_FIELDS.values() if f.kind in ("spread", "cost"))

Outcome = Literal["new", "updated", "unchanged"]


@dataclass(frozen=True)
class Point:
    """One value of a step series: at ``step`` (the round), stamped ``timestamp_ms`` (ms since the epoch, UTC)."""

    step: int
    value: float
    timestamp_ms: int


@dataclass(frozen=True)
class TrackedRun:
    """What a tracker records of one finished run (the module docstring says what each part holds)."""

    spec_hash: str
    experiment: str
    name: str
    folder: str  # its folder where a tracker needs one (TensorBoard): ``run_folder``
    status: str
    start_ms: int
    end_ms: int
    params: dict[str, str]
    tags: dict[str, str]
    series: dict[str, list[Point]]
    final: dict[str, float]
    digest: str = field(default="", compare=False)


class Tracker(Protocol):
    shown: str  # where it writes, as it may be shown (no password)

    def write(self, run: TrackedRun) -> Outcome: ...


# ---------------------------------------------------------------------------------------------------- the runs
def tracked_runs(registry: Registry, paper: str | None = None, recipe: str | None = None) -> Iterator[TrackedRun]:
    """The finished runs ``fedbench export`` would write for this selection, as trackers record them."""
    for run, curve in finished_runs(registry, paper=paper, recipe=recipe):
        yield tracked_run(run, curve)


def tracked_run(run: Row[Any], curve: list[Row[Any]]) -> TrackedRun:
    """One finished run (a ``runs`` row) with its curve (its ``rounds`` rows, in round order) as a ``TrackedRun``."""
    start_ms = _ms(run.started_at or run.created_at)
    elapsed = 0.0
    stamps: dict[int, int] = {}
    for row in curve:  # round t's values are stamped at the start plus the wall time of rounds 1..t
        elapsed += row.wall_seconds or 0.0
        stamps[row.round] = start_ms + round(elapsed * 1000)
    series: dict[str, list[Point]] = {}
    for name in METRICS:
        points = [Point(step, float(value), stamps[step]) for step, value in metric_curve(curve, name)]
        if points:
            series[name] = points
    for name in EXTRA_SERIES:
        points = [
            Point(row.round, float(v), stamps[row.round]) for row in curve if (v := getattr(row, name)) is not None
        ]
        if points:
            series[name] = points
    final = {
        f"{SUMMARY_PREFIX}{key}": float(value)
        for key, value in _flatten(run.summary or {}).items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    tracked = TrackedRun(
        spec_hash=run.spec_hash,
        experiment=f"fedbench/{_group(run)}",
        name=run_name(run),
        folder=run_folder(run),
        status=run.status,
        start_ms=start_ms,
        end_ms=_ms(run.finished_at) if run.finished_at is not None else start_ms + round(elapsed * 1000),
        params={key: _text(value) for key, value in _flatten(redact(run.spec)).items()},
        tags=run_tags(run),
        series=series,
        final=final,
    )
    return _with_digest(tracked)


def run_name(run: Row[Any]) -> str:
    """``<recipe> <label>=<value>… seed=<seed>`` (with the scale and ``synthetic`` where they are not the full scale
    on real data): how a person recognises the run among its table's."""
    return " ".join([_group(run), *_identifying(run)])


def run_folder(run: Row[Any]) -> str:
    """The run's folder, relative to a tracker's (TensorBoard's): ``<recipe>/<labels>,seed=<seed>,<hash[:8]>``, the
    spec hash's first 8 characters keeping apart two runs that only hash-level fields tell apart."""
    parts = [*_identifying(run), run.spec_hash[:8]]
    return f"{_safe(_group(run))}/{','.join(_safe(part) for part in parts)}"


def _group(run: Row[Any]) -> str:
    return run.recipe or run.paper or "runs"


def _identifying(run: Row[Any]) -> list[str]:
    parts = [f"{key}={value}" for key, value in (run.labels or {}).items() if key != "seed"]
    parts.append(f"seed={run.seed}")
    if run.scale != "full":
        parts.append(f"scale={run.scale}")
    if run.synthetic:
        parts.append("synthetic")
    return parts


def run_tags(run: Row[Any]) -> dict[str, str]:
    """The run's tags: what identifies it and what it was trained with (each name under ``fedbench.``)."""
    provenance = run.provenance or {}
    tags = {
        SPEC_HASH_TAG: run.spec_hash,
        "fedbench.paper": run.paper or "",
        "fedbench.recipe": run.recipe or "",
        "fedbench.status": run.status,
        "fedbench.scale": run.scale,
        "fedbench.synthetic": _text(bool(run.synthetic)),
        "fedbench.version": str(provenance.get("fedbench_version") or "unknown"),
        "fedbench.git_commit": str(provenance.get("git_commit") or "unknown"),
        "fedbench.plugins": plugins_tag(provenance.get("plugins") or []),
        "fedbench.exported_by": __version__,
    }
    tags.update({f"fedbench.label.{key}": str(value) for key, value in (run.labels or {}).items()})
    return {key: redact(value) for key, value in tags.items()}


def plugins_tag(plugins: list[Mapping[str, Any]]) -> str:
    """The plug-ins a run used (its provenance's records), one ``module (where, identity)`` each; ``none``."""
    if not plugins:
        return "none"
    described = []
    for plugin in plugins:
        where = plugin.get("distribution") or plugin.get("source") or "?"
        if plugin.get("distribution") and plugin.get("version"):
            where = f"{where} {plugin['version']}"
        identity = (
            f"revision {plugin['revision']}" if plugin.get("revision") is not None else f"sha256:{plugin.get('sha256')}"
        )
        described.append(f"{plugin.get('module')} ({where}, {identity})")
    return "; ".join(described)


def _with_digest(run: TrackedRun) -> TrackedRun:
    """``run`` with its digest: of everything a tracker writes of it, so a changed value changes it."""
    content = asdict(run)
    content.pop("digest")
    text = json.dumps(content, sort_keys=True)
    return replace(run, digest=hashlib.sha256(text.encode()).hexdigest()[:16])


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"a.b": leaf}``; an empty mapping is a leaf (``plugin_code = {}`` is a value)."""
    if isinstance(value, Mapping) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}{key}."))
        return flat
    return {prefix.removesuffix("."): value}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _safe(part: str) -> str:
    """A folder-name part: letters, digits and ``=._-`` kept, anything else (a path separator) as ``_``."""
    return "".join(c if c.isalnum() or c in "=._-" else "_" for c in part)


def _ms(moment: datetime | None) -> int:
    """A registry time (naive UTC) as ms since the epoch; 0 where the registry has none."""
    if moment is None:
        return 0
    return round(moment.replace(tzinfo=UTC).timestamp() * 1000)


# ---------------------------------------------------------------------------------------------------- export
@dataclass
class TrackerExport:
    """What ``export_to_tracker`` did: where it wrote, and the spec hashes it added, replaced and left alone."""

    shown: str
    new: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.new) + len(self.updated) + len(self.unchanged)


TARGETS = "mlflow[:TRACKING_URI] or tensorboard:DIR"


def open_tracker(target: str) -> Tracker:
    """The tracker ``--to`` names: ``mlflow`` (MLflow's own default: ``MLFLOW_TRACKING_URI``, else ``mlflow.db``
    here), ``mlflow:TRACKING_URI``, ``tensorboard:DIR``. A ``FedbenchError`` for any other, and for a tracker whose
    optional extra is not installed."""
    kind, _, where = target.partition(":")
    if kind == "mlflow":
        try:
            # local: optional dependency (pip install fedbench-repro[mlflow]), imported only by an export to MLflow
            from fedbench.registry.tracking_mlflow import MlflowTracker
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] != "mlflow":
                raise  # a module of fedbench itself is missing: a broken install, not the extra
            raise _missing_extra("mlflow", "MLflow") from None
        return MlflowTracker(where or None)
    if kind == "tensorboard":
        if not where:
            raise FedbenchError("--to tensorboard needs the folder to write to: --to tensorboard:DIR")
        try:
            # local: optional dependency (pip install fedbench-repro[tensorboard]), imported only by an export to it
            from fedbench.registry.tracking_tensorboard import TensorboardTracker
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] != "tensorboard":
                raise  # a module of fedbench itself is missing: a broken install, not the extra
            raise _missing_extra("tensorboard", "TensorBoard") from None
        return TensorboardTracker(Path(where))
    raise FedbenchError(f"--to {display_url(target)}: not a tracker fedbench exports to; use {TARGETS}")


def _missing_extra(extra: str, name: str) -> FedbenchError:
    return FedbenchError(f"--to {extra} needs {name}, an optional extra: pip install 'fedbench-repro[{extra}]'")


def export_to_tracker(
    tracker: Tracker, registry: Registry, paper: str | None = None, recipe: str | None = None
) -> TrackerExport:
    """Write the selection's finished runs to ``tracker``, one copy per spec hash (see the module docstring)."""
    outcome = TrackerExport(tracker.shown)
    for run in tracked_runs(registry, paper=paper, recipe=recipe):
        getattr(outcome, tracker.write(run)).append(run.spec_hash)
    return outcome


def export_run(tracker: Tracker, registry: Registry, spec_hash: str) -> Outcome | None:
    """Write the run ``spec_hash`` to ``tracker`` as the registry holds it, if it is finished (``fedbench run
    --log-to``: called when a batch's event says the run ended); None for a run that is not (failed, interrupted)."""
    found = registry.runs(spec_hashes=[spec_hash])
    if not found or found[0].status not in FINISHED:
        return None
    return tracker.write(tracked_run(found[0], registry.curve(found[0].id)))


__all__ = [
    "export_run",
    "TrackedRun",
    "Point",
    "Tracker",
    "TrackerExport",
    "tracked_runs",
    "tracked_run",
    "run_name",
    "run_folder",
    "run_tags",
    "plugins_tag",
    "open_tracker",
    "export_to_tracker",
    "SPEC_HASH_TAG",
    "DIGEST_TAG",
    "SUMMARY_PREFIX",
    "TARGETS",
]
