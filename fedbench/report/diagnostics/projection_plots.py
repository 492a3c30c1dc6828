"""Projections of recorded feature snapshots (the ``feature_snapshot`` diagnostic,
``fedbench/engine/diagnostics/snapshots.py``): FedTrip Fig. 2's t-SNE of test-set features, one figure per panel, points
coloured by class.

The panels of a view with ``at_rounds = [R', R]`` follow the paper's layout: (a) the global model at the last round
R, then client 1's local model (client 0 here) at each round, latest first ((b) at R, (c) at R'). Each run of the view
gets its panels. A panel the run cannot fill (a round it did not record, a round client 0 did not train in) is a
figure that says so, never a silent gap.

The projection is scikit-learn's ``TSNE`` with ``init="pca"`` on the ≤ 500 stored points (~5 s a panel on one
core), its ``random_state`` derived from the run's seed (``projection_seed``) and written, with the perplexity, in the
figure's title, so that anyone can redo it. A stored value is checked before it is trusted (a registry may have been imported
from someone else's file): a malformed one is a one-line ``RegistryError``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from fedbench.errors import RegistryError
from fedbench.report.diagnostics.series import RunDiagnostics
from fedbench.seeding import derive_seed

if TYPE_CHECKING:
    from fedbench.recipes.views import TableView

PERPLEXITY = 30.0  # scikit-learn's default; fewer points than 3 × 30 + 1 take (n − 1) / 3


def projection_seed(seed: int) -> int:
    """The t-SNE ``random_state`` of a run: from the run's seed, by its own key (``fedbench.seeding``)."""
    return derive_seed(seed, "tsne") % 2**32


def decode_snapshot(value: Any, key: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(features n × d as float32, labels n) of one stored snapshot's model ``key`` ("global" or "local"), after
    checking the value's layout, its length against its shape and that every value is finite; ``where`` names the
    value in the one-line ``RegistryError`` a malformed one raises."""

    def bad(problem: str) -> RegistryError:
        return RegistryError(f"{where}: the stored feature_snapshot {problem}; record the run again or re-import it")

    if not isinstance(value, Mapping):
        raise bad("is not a JSON object")
    shape, labels, encoded = value.get("shape"), value.get("labels"), value.get(key)
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(s, int) and s > 0 for s in shape)):
        raise bad(f"has shape {shape!r}, not [points, features]")
    if value.get("dtype") != "float16":
        raise bad(f"has dtype {value.get('dtype')!r}, not 'float16'")
    if not (isinstance(labels, list) and len(labels) == shape[0] and all(isinstance(c, int) for c in labels)):
        raise bad(f"does not hold {shape[0]} integer labels")
    if not isinstance(encoded, str):
        raise bad(f"has no {key} features")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise bad(f"{key} features are not base64") from None
    if len(raw) != 2 * shape[0] * shape[1]:
        raise bad(f"{key} features hold {len(raw)} bytes, not the {2 * shape[0] * shape[1]} of {shape[0]}×{shape[1]}")
    features = np.frombuffer(raw, dtype="<f2").reshape(shape).astype(np.float32)
    if not np.isfinite(features).all():
        raise bad(f"{key} features are not all finite")
    return features, np.asarray(labels)


def project(features: np.ndarray, random_state: int) -> tuple[np.ndarray, float]:
    """The 2-d t-SNE of ``features`` (scikit-learn, ``init="pca"``) and the perplexity it used."""
    from sklearn.manifold import TSNE  # local: a report that draws no projection does not import scikit-learn
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # scikit-learn's own dependency

    perplexity = min(PERPLEXITY, max(1.0, (len(features) - 1) / 3))
    tsne = TSNE(n_components=2, init="pca", perplexity=perplexity, random_state=random_state)
    # one thread: the same projection whatever the machine's thread count, and ~4 s for 500 points where several
    # threads on busy cores took 30 s (measured on a shared 2-core machine)
    with threadpool_limits(limits=1):
        return tsne.fit_transform(features.astype(np.float64)), perplexity


def _scatter(fig: Figure, points: np.ndarray, labels: np.ndarray) -> None:
    ax = fig.add_subplot()
    classes = np.unique(labels)
    colours = matplotlib.colormaps["tab10" if len(classes) <= 10 else "tab20" if len(classes) <= 20 else "viridis"]
    for i, c in enumerate(classes):
        mask = labels == c
        colour = colours(i if len(classes) <= 20 else i / max(1, len(classes) - 1))
        ax.scatter(points[mask, 0], points[mask, 1], s=6, color=colour, label=str(c))
    if len(classes) <= 20:
        ax.legend(title="class", fontsize="x-small", markerscale=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_xticks([])
    ax.set_yticks([])


def _note(title: str, text: str) -> Figure:
    fig = Figure(figsize=(5, 4.5), layout="constrained")
    fig.suptitle(title, fontsize="small")
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return fig


def panels(at_rounds: Sequence[int], recorded: Sequence[int]) -> list[tuple[str, int]]:
    """(model, round) of each panel: the global model at the last round, then the local model at each round, latest
    first (FedTrip Fig. 2: (a) global at 50, (b) client 1 at 50, (c) client 1 at 30). Without ``at_rounds``, the
    run's last recorded round."""
    rounds = sorted(set(at_rounds or recorded[-1:]), reverse=True)
    return [("global", rounds[0])] + [("local", r) for r in rounds] if rounds else []


def _run_name(run: RunDiagnostics, several: bool) -> tuple[str, str]:
    """(caption words, file-stem part) naming a run among several: its labels and seed."""
    words = ", ".join([*map(str, run.labels.values()), f"seed {run.seed}"])
    if not several:
        return words, ""
    stem = "_".join(str(v).replace(" ", "-").replace("/", "-") for v in run.labels.values())
    return words, f"{stem}_s{run.seed}_"


def draw_feature_snapshots(view: TableView, runs: list[RunDiagnostics]) -> list[tuple[str, Figure]]:
    """One t-SNE figure per panel (``panels``) of each run: [(file-stem suffix, Figure)]."""
    out: list[tuple[str, Figure]] = []
    ordered = sorted(runs, key=lambda r: (tuple(r.labels.values()), r.seed))
    for run in ordered:
        words, stem = _run_name(run, len(ordered) > 1)
        random_state = projection_seed(run.seed)
        for letter, (model, round_index) in zip(
            "abcdefghijklmnopqrstuvwxyz", panels(view.at_rounds, sorted(run.rounds))
        ):
            value = run.rounds.get(round_index)
            client = value.get("client", 0) if isinstance(value, Mapping) else 0
            who = "global model" if model == "global" else f"client {client + 1}'s local model (client {client})"
            title = f"({letter}) {who}, round {round_index} ({words})"
            suffix = f"{stem}{'global' if model == 'global' else f'client{client + 1}'}_r{round_index}"
            if value is None:
                recorded = ", ".join(map(str, sorted(run.rounds))) or "none"
                out.append((suffix, _note(title, f"round {round_index} not recorded (recorded: {recorded})")))
                continue
            if model == "local" and isinstance(value, Mapping) and value.get("local") is None:
                note = value.get("note") or f"client {client} did not train in this round"
                out.append((suffix, _note(title, str(note))))
                continue
            features, labels = decode_snapshot(value, model, f"run seed {run.seed}, round {round_index}")
            points, perplexity = project(features, random_state)
            fig = Figure(figsize=(5.5, 4.5), layout="constrained")
            _scatter(fig, points, labels)
            fig.suptitle(
                f"{title}\n{len(labels)} test points; t-SNE (scikit-learn): init='pca', perplexity {perplexity:g}, "
                f"random_state {random_state}",
                fontsize="small",
            )
            out.append((suffix, fig))
    return out


__all__ = ["decode_snapshot", "draw_feature_snapshots", "panels", "project", "projection_seed"]
