"""The metric catalogue: the one place that names, describes and reads per-round metrics.

Two tables:

* ``ROUND_FIELDS`` — every field a round stores, in storage order: the engine's ``RoundRecord`` fields and the
  registry's ``rounds`` columns (``run_id`` aside) are exactly these names (tests/vocab/test_vocab_metrics.py keeps
  the three equal). A field is a ``metric`` (the column of one curve metric below) or explicitly not one:
  the round ``key``, a ``spread`` (std over clients), a ``per_client`` list or dict, a ``cost``, the round's
  ``diagnostics``.
* ``METRICS`` — every curve metric a table view may name (``metric = ...``), with its unit, whether it is a
  fraction shown ×100 as % (when the view's ``percent = true``), its direction, where its value is read
  from (a ``rounds`` column, or the mean over clients of a per-client list), its per-client source (for
  the ``client`` pseudo-axis) and what it means for classification and for segmentation runs.

``metric_value(round, name, client)`` is the only reader: report tables, plots and ``fedbench show`` use it,
so a metric valid in a recipe works everywhere. The per-client metrics a spec may ask for
(``eval_metrics``) are ``CLIENT_METRICS``; each becomes the curve metric ``personal_<name>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Task = Literal["classification", "segmentation"]
BOTH: tuple[Task, ...] = ("classification", "segmentation")


@dataclass(frozen=True)
class RoundField:
    """A field every stored round has (``RoundRecord`` attribute = ``rounds`` column)."""

    name: str
    kind: Literal["key", "metric", "spread", "per_client", "cost", "diagnostics"]
    meaning: str = ""  # for kind "metric": see METRICS[name]
    unit: str = ""


@dataclass(frozen=True)
class ClientMetric:
    """A per-client metric besides the primary one (``spec.eval_metrics``), stored per client in
    ``rounds.personal_metrics[name]``."""

    name: str
    task: Task  # the task it is computed for (None on the other task's runs)
    unit: str
    percent: bool
    higher_is_better: bool
    meaning: str
    binary: bool = False  # defined for two-class tasks only (None on runs with more classes)
    label: str = ""  # its human name in reports ("AUC", "macro F1"); the name itself where empty


@dataclass(frozen=True)
class Metric:
    """A curve metric: one value per evaluated round, named by a table view's ``metric``."""

    name: str
    unit: str  # of the stored value: fraction, loss, px
    percent: bool  # a fraction in [0, 1] shown ×100 as % (view.percent = true)
    higher_is_better: bool  # direction of "best", "best_round" and "rounds to target"
    meaning: str  # on classification runs
    segmentation: str  # on segmentation runs (DatasetMeta.task = "segmentation")
    column: str | None = None  # the rounds column holding it; None: the mean over clients of per_client
    per_client: str | None = None  # rounds column with one value per client (a list, or a dict of lists)
    per_client_key: str | None = None  # the key in a dict-valued per_client column (personal_metrics)
    tasks: tuple[Task, ...] = BOTH  # run tasks that record it
    binary: bool = False  # recorded on two-class tasks only (sensitivity, specificity)
    # its human name in what a person reads (captions, headers, plots; storage keys stay in JSON and CSV): on
    # classification runs, and on segmentation runs where the value means something else there (the Dice)
    label: str = ""
    segmentation_label: str = ""


def _by_name(*entries):
    return {entry.name: entry for entry in entries}


ROUND_FIELDS: dict[str, RoundField] = _by_name(
    RoundField("round", "key", "the round, 1-based", "round"),
    RoundField("test_acc", "metric"),
    RoundField("test_loss", "metric"),
    RoundField("train_loss", "metric"),
    RoundField("personal_mean", "metric"),
    RoundField("personal_weighted_mean", "metric"),
    RoundField("personal_std", "spread", "std over clients of the personal figure (personal_per_client)", "fraction"),
    RoundField(
        "personal_per_client",
        "per_client",
        "each client's own model on its own test split: accuracy (segmentation: mean Dice), client order",
        "fraction",
    ),
    RoundField("personal_val_mean", "metric"),
    RoundField("personal_val_per_client", "per_client", "each client's own model on its validation split", "fraction"),
    RoundField(
        "personal_metrics",
        "per_client",
        "{eval metric: per-client values} for spec.eval_metrics "
        "(CLIENT_METRICS); null entries where a client has no value",
        "",
    ),
    RoundField("finetune_mean", "metric"),
    RoundField("finetune_weighted_mean", "metric"),
    RoundField("finetune_std", "spread", "std over clients of the fine-tuned figure (last round only)", "fraction"),
    RoundField(
        "finetune_per_client",
        "per_client",
        "each client's fine-tuned model on its test split (last round only)",
        "fraction",
    ),
    RoundField("wall_seconds", "cost", "wall-clock time of the round (training and evaluation)", "s"),
    RoundField("bytes_up", "cost", "bytes sent by the round's clients to the server", "bytes"),
    RoundField("bytes_down", "cost", "bytes sent by the server to the round's clients", "bytes"),
    RoundField(
        "diagnostics",
        "diagnostics",
        "{diagnostic: value} on the rounds the spec diagnoses (DIAGNOSTICS in fedbench/vocab/diagnostics.py); "
        "null on the others",
        "",
    ),
)

CLIENT_METRICS: dict[str, ClientMetric] = _by_name(
    ClientMetric(
        "auc",
        "classification",
        "fraction",
        True,
        True,
        "ROC AUC (binary: of p(class 1); more classes: one-vs-rest macro; none for a one-class test split)",
        label="AUC",
    ),
    ClientMetric(
        "balanced_accuracy",
        "classification",
        "fraction",
        True,
        True,
        "balanced accuracy (mean recall over the classes in the test split)",
        label="balanced accuracy",
    ),
    ClientMetric(
        "sensitivity",
        "classification",
        "fraction",
        True,
        True,
        "sensitivity (recall of class 1, TP / (TP + FN); binary tasks only, none without positives)",
        label="sensitivity",
        binary=True,
    ),
    ClientMetric(
        "specificity",
        "classification",
        "fraction",
        True,
        True,
        "specificity (TN / (TN + FP), the recall of class 0; binary tasks only, none without negatives)",
        label="specificity",
        binary=True,
    ),
    ClientMetric(
        "f1",
        "classification",
        "fraction",
        True,
        True,
        "macro F1 (mean over the classes in the labels or predictions of the per-class F1)",
        label="macro F1",
    ),
    ClientMetric(
        "dice",
        "segmentation",
        "fraction",
        True,
        True,
        "Dice (mean over images and channels, prediction sigmoid > 0.5)",
        label="Dice",
    ),
    ClientMetric("iou", "segmentation", "fraction", True, True, "IoU (mean over images and channels)", label="IoU"),
    ClientMetric(
        "hausdorff",
        "segmentation",
        "px",
        False,
        False,
        "HD95 in pixels (95th-percentile Hausdorff distance, mean over images; 1000 for an empty prediction)",
        label="HD95",
    ),
)
EVAL_METRICS: tuple[str, ...] = tuple(CLIENT_METRICS)  # the values spec.eval_metrics accepts

_ACC = "accuracy"
_DICE = "mean Dice"
METRICS: dict[str, Metric] = _by_name(
    Metric(
        "test_acc",
        "fraction",
        True,
        True,
        f"global model's {_ACC} on the global test set",
        f"global model's {_DICE} on the global test set",
        column="test_acc",
        label="test accuracy",
        segmentation_label="test Dice",
    ),
    Metric(
        "test_loss",
        "loss",
        False,
        False,
        "global model's cross-entropy on the global test set",
        "global model's soft Dice loss on the global test set",
        column="test_loss",
        label="test loss",
        segmentation_label="test Dice loss",
    ),
    Metric(
        "train_loss",
        "loss",
        False,
        False,
        "mean training loss of the round's clients (sample-weighted)",
        "mean training loss (Dice loss by default) of the round's clients",
        column="train_loss",
        label="training loss",
        segmentation_label="training loss",
    ),
    Metric(
        "personal_mean",
        "fraction",
        True,
        True,
        f"mean over clients of each client's own model's {_ACC} on its own test split",
        f"mean over clients of each client's own model's {_DICE} on its test split",
        column="personal_mean",
        label="personal accuracy",
        segmentation_label="personal Dice",
        per_client="personal_per_client",
    ),
    Metric(
        "personal_weighted_mean",
        "fraction",
        True,
        True,
        f"personal {_ACC} averaged over clients weighted by test-split size",
        f"personal {_DICE} averaged over clients weighted by test-split size",
        column="personal_weighted_mean",
        label="personal accuracy weighted by test-split size",
        segmentation_label="personal Dice weighted by test-split size",
        per_client="personal_per_client",
    ),
    Metric(
        "personal_val_mean",
        "fraction",
        True,
        True,
        f"mean over clients of each client's own model's {_ACC} on its validation split (model selection)",
        f"mean over clients of the personal {_DICE} on the validation splits",
        column="personal_val_mean",
        label="personal validation accuracy",
        segmentation_label="personal validation Dice",
        per_client="personal_val_per_client",
    ),
    Metric(
        "finetune_mean",
        "fraction",
        True,
        True,
        f"mean over clients of the fine-tuned model's {_ACC} on the client's test split (last round)",
        f"mean over clients of the fine-tuned model's {_DICE} (last round)",
        column="finetune_mean",
        label="fine-tuned accuracy",
        segmentation_label="fine-tuned Dice",
        per_client="finetune_per_client",
    ),
    Metric(
        "finetune_weighted_mean",
        "fraction",
        True,
        True,
        f"fine-tuned {_ACC} averaged over clients weighted by test-split size (last round)",
        f"fine-tuned {_DICE} averaged over clients weighted by test-split size (last round)",
        column="finetune_weighted_mean",
        label="fine-tuned accuracy weighted by test-split size",
        segmentation_label="fine-tuned Dice weighted by test-split size",
        per_client="finetune_per_client",
    ),
    *(
        Metric(
            f"personal_{m.name}",
            m.unit,
            m.percent,
            m.higher_is_better,
            f"mean over clients of each client's own model's {m.meaning} on its test split"
            if m.task == "classification"
            else "not recorded (a segmentation metric)",
            f"mean over clients of each client's own model's {m.meaning} on its test split"
            if m.task == "segmentation"
            else "not recorded (a classification metric)",
            per_client="personal_metrics",
            per_client_key=m.name,
            tasks=(m.task,),
            binary=m.binary,
            label=f"personal {m.label}",
            segmentation_label=f"personal {m.label}",
        )
        for m in CLIENT_METRICS.values()
    ),
)
CURVE_METRICS: tuple[str, ...] = tuple(METRICS)  # the values a table view's `metric` accepts


def metric_value(row: Any, name: str, client: int | None = None) -> float | None:
    """The value of metric ``name`` in one stored round (a ``rounds`` row or a ``RoundRecord``); of client
    ``client`` when given. None when the round has no value (not evaluated, not recorded for this run).

    A metric without a per-client source (``test_acc``, the losses) has one value for every client.
    """
    metric = METRICS[name]
    if client is not None and metric.per_client is not None:
        values = _per_client(row, metric)
        return values[client] if values and client < len(values) else None
    if metric.column is not None:
        return getattr(row, metric.column)
    known = [v for v in _per_client(row, metric) or [] if v is not None]
    if not known:
        return None
    import numpy as np  # local: keeps numpy out of runs', show's and export's start-up

    return float(np.mean(known))


def _per_client(row: Any, metric: Metric) -> Sequence[float | None] | None:
    if metric.per_client is None:
        return None
    values = getattr(row, metric.per_client)
    if metric.per_client_key is not None:
        values = (values or {}).get(metric.per_client_key)
    return values


def metric_fields(name: str) -> tuple[str, ...]:
    """The rounds fields ``metric_value`` reads for metric ``name`` (its column and its per-client source), so a
    reader can fetch only those."""
    metric = METRICS[name]
    return tuple(f for f in (metric.column, metric.per_client) if f is not None)


def metric_curve(rows: Sequence[Any], name: str, client: int | None = None) -> list[tuple[int, float]]:
    """(round, value) for every stored round that has a value of ``name``."""
    metric = METRICS[name]
    if metric.column is not None and (client is None or metric.per_client is None):
        # the rows' own column, as ``metric_value`` reads it, read directly: a report reads 100,000s of rows
        return [(row.round, v) for row in rows if (v := getattr(row, metric.column)) is not None]
    return [(row.round, v) for row in rows if (v := metric_value(row, name, client)) is not None]


PERCENT = 100.0  # percentage points per unit of a fraction in [0, 1]


def to_percent(fraction: float) -> float:
    """A stored fraction in [0, 1] as a percentage: the one conversion between the unit runs store (accuracies,
    Dice) and the unit recipes and tables speak (``targets = [80, 90]``, "95.83 %"). Everything that compares a
    stored value with a percentage or shows one goes through it, so a stored summary and a report table that
    recompute a figure from the same curve do the same arithmetic."""
    return fraction * PERCENT


def format_percent(fraction: float | None) -> str:
    """A stored fraction shown as a percentage with two decimals ("95.83"); "–" for no value."""
    return "–" if fraction is None else f"{to_percent(fraction):.2f}"


def display_factor(name: str, percent: bool = True) -> float:
    """``PERCENT`` for a fraction metric shown as % (``percent``: the table view's wish), else 1."""
    return PERCENT if percent and METRICS[name].percent else 1.0


def display_unit(name: str, percent: bool = True) -> str:
    """The unit of the metric's displayed values: "%" for a fraction shown ×100, "px", or "" (a plain
    fraction or a loss)."""
    metric = METRICS[name]
    if metric.percent:
        return "%" if percent else ""
    return "" if metric.unit in ("fraction", "loss") else metric.unit


def metric_label(name: str, tasks: Sequence[str] = ("classification",)) -> str:
    """The metric's human name on runs of ``tasks`` ("test accuracy"; "personal accuracy / personal Dice" for a
    table that holds classification and segmentation runs)."""
    metric = METRICS[name]
    names = [
        metric.segmentation_label if task == "segmentation" else metric.label for task in tasks or ("classification",)
    ]
    return " / ".join(dict.fromkeys(names))


def axis_label(name: str, percent: bool = True, tasks: Sequence[str] = ("classification",)) -> str:
    """The metric's human name with its displayed unit: "test accuracy (%)"."""
    unit = display_unit(name, percent)
    label = metric_label(name, tasks)
    return f"{label} ({unit})" if unit else label


# The curve that picks a round by validation: figure "val_selected" (LG-Mix) and finetune.start = "best_val".
VALIDATION_METRIC = "personal_val_mean"
# The curve a run's stored ``summary`` (best, final, rounds to its targets) is computed from when it finishes.
SUMMARY_METRIC = "test_acc"


def markdown_table() -> str:
    """The catalogue as the Markdown table of docs/recipes.md (checked by tests/vocab/test_vocab_metrics.py)."""
    lines = [
        "| metric | unit | shown as % | better | classification | segmentation | per client (`client` axis) |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in METRICS.values():
        if m.per_client is None:
            source = "–"
        elif m.per_client_key is None:
            source = f"`{m.per_client}`"
        else:
            source = f'`{m.per_client}["{m.per_client_key}"]`'
        lines.append(
            f"| `{m.name}` | {m.unit} | {'yes' if m.percent else 'no'} | "
            f"{'higher' if m.higher_is_better else 'lower'} | {m.meaning} | {m.segmentation} | {source} |"
        )
    return "\n".join(lines) + "\n"
