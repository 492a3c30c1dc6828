"""``fedbench export --to tensorboard:DIR``: each finished run as one TensorBoard run folder (``tracking.TrackedRun``).

Written with TensorBoard's own event-file writer and summary protos (the optional extra ``fedbench-repro[tensorboard]``;
neither TensorFlow nor torch is needed), so ``tensorboard --logdir DIR`` shows the runs:

* ``DIR/<recipe>/<labels>,seed=<seed>,<spec hash[:8]>/`` per run (``tracking.run_folder``);
* every step series as a scalar (tag = the series' name, step = the round, the registry's wall times);
* the summary as scalars at step 0 (``summary.best``, …);
* the flattened spec as the run's hyperparameters (the HParams dashboard), the tags as a text table
  (``fedbench/tags``).

TensorBoard keeps a scalar as a 32-bit float: a value reads back as the registry's value rounded to float32
(7 significant digits). A file ``fedbench-run.json`` beside the events names the run's spec hash and the digest of
what was written; a second export leaves a folder whose digest matches alone and rewrites one that differs (its
event files removed first, and the folder moved where the run's name changed), so a run never has two folders, nor
a folder two event files. The marker is written last: an export stopped half-way leaves a folder the next rewrites.
"""

from __future__ import annotations

import json
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams.summary_v2 import hparams_pb
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from fedbench.errors import FedbenchError
from fedbench.registry.tracking import Outcome, TrackedRun

MARKER = "fedbench-run.json"  # in each run folder: {"spec_hash", "digest", "name"}
EVENTS_GLOB = "events.out.tfevents.*"  # TensorBoard's event file names
TAGS_TEXT = "fedbench/tags"


class TensorboardTracker:
    """Writes ``TrackedRun``s as run folders under ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.shown = str(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            markers = {marker.parent: _read_marker(marker) for marker in folder.rglob(MARKER)}
            self._copies = {data["spec_hash"]: run for run, data in markers.items() if "spec_hash" in data}
        except OSError as exc:
            raise FedbenchError(f"--to tensorboard:{folder}: cannot write there ({exc.strerror})") from None

    def write(self, run: TrackedRun) -> Outcome:
        target = self.folder / run.folder
        copy = self._copies.get(run.spec_hash)
        if copy == target and _read_marker(target / MARKER).get("digest") == run.digest:
            return "unchanged"
        try:
            if copy is not None:  # another result, another name, or an export stopped half-way: rewritten
                _remove(copy)
            target.mkdir(parents=True, exist_ok=True)
            for stale in target.glob(EVENTS_GLOB):  # a folder left without its marker by a stopped export
                stale.unlink()
            _write_events(target, run)
            marker = {"spec_hash": run.spec_hash, "digest": run.digest, "name": run.name}
            (target / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise FedbenchError(f"--to tensorboard:{self.folder}: cannot write {target} ({exc.strerror})") from None
        self._copies[run.spec_hash] = target
        return "updated" if copy is not None else "new"


def _write_events(target: Path, run: TrackedRun) -> None:
    writer = EventFileWriter(str(target), filename_suffix=".fedbench")
    start = run.start_ms / 1000
    hparams = hparams_pb(run.params, trial_id=run.spec_hash, start_time_secs=start)
    writer.add_event(Event(wall_time=start, step=0, summary=hparams))
    table = "| tag | value |\n|---|---|\n" + "".join(f"| {key} | {value} |\n" for key, value in run.tags.items())
    writer.add_event(Event(wall_time=start, step=0, summary=text_pb(TAGS_TEXT, table)))
    for name, points in run.series.items():
        for point in points:
            writer.add_event(_scalar(name, point.value, point.step, point.timestamp_ms / 1000))
    for name, value in run.final.items():
        writer.add_event(_scalar(name, value, 0, run.end_ms / 1000))
    writer.close()


def _scalar(tag: str, value: float, step: int, wall_time: float) -> Event:
    return Event(wall_time=wall_time, step=step, summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)]))


def _read_marker(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # unreadable: treated as no copy, so the folder is written anew
    return data if isinstance(data, dict) else {}


def _remove(folder: Path) -> None:
    """A run folder's own files (its event files and marker), and the folder once nothing else is left in it."""
    for path in [*folder.glob(EVENTS_GLOB), folder / MARKER]:
        path.unlink(missing_ok=True)
    if not any(folder.iterdir()):
        folder.rmdir()


__all__ = ["TensorboardTracker", "MARKER", "TAGS_TEXT"]
