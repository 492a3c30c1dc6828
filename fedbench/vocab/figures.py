"""The figure catalogue: the one place that names the figures a table cell may show.

A table view's ``figure = ...`` (docs/recipes.md) is one of ``FIGURES``. Each entry says

* its direction: ``better`` is "metric" (the curve metric's own direction: the highest accuracy, the lowest loss),
  "lower" (fewer rounds, bytes, FLOPs, seconds, MB) or "none" (the round of the best value has no better side);
* what its number is (``number``): a value in the metric's unit, a round count, GFLOPs, bytes, seconds, hours
  or MB; with ``unit`` the table's unit ("s"; None: the metric's displayed unit; "": none);
* whether it needs a target (``needs_target``) and whether a seed that never reached it counts as R + 1 rounds
  in the statistics (``censored``: only a count of rounds has that bound);
* whether it is a figure of the whole run (``of_run``: wall time, seconds per round, peak memory) rather than of a
  metric's curve, so its label names no metric;
* the rounds fields it reads besides its metric's (``fields``), its human label and what it means.

The recipe schema, the table builder, the statistics, the renderers and the plots read these entries rather
than spelling figure names. Plain data: no torch, no pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedbench.vocab.metrics import VALIDATION_METRIC, metric_fields

Better = Literal["metric", "lower", "none"]
Number = Literal["value", "rounds", "gflops", "bytes", "seconds", "hours", "megabytes"]


@dataclass(frozen=True)
class Figure:
    """A figure of one run (then mean ± std over seeds), named by a table view's ``figure``."""

    name: str
    # column header and caption words: "{metric}" the metric's human name, "{k}", "{target}", "{at_round}" the view's
    # (``figure_label``); a figure of the whole run (``of_run``) names no metric
    label: str
    better: Better
    number: Number
    meaning: str
    unit: str | None = ""  # the table's unit; None: the metric's displayed unit (a value of the metric)
    needs_target: bool = False  # a view with this figure needs ``target`` (or ``target_by``)
    censored: bool = False  # never reaching the target counts as R + 1 (a count of rounds: stats, compare)
    of_run: bool = False  # a figure of the whole run (no curve metric in its caption)
    fields: tuple[str, ...] = ()  # rounds fields it reads besides its metric's
    label_by_key: str = ""  # the label when its parameter is a row/column key instead (value_at_round, at_rounds)
    note: str = ""  # a caption line every table of this figure carries
    # its caption says when rounds to target are counted by FedTrip's rule (target_rule = "count_not_above"); the bytes
    # figure's caption has never said it, though its rounds are counted by the same rule
    states_target_rule: bool = False

    @property
    def of_metric_value(self) -> bool:
        """A value of the view's metric at some round (so shown in the metric's displayed unit)."""
        return self.unit is None


def _by_name(*entries: Figure) -> dict[str, Figure]:
    return {entry.name: entry for entry in entries}


_WALL = ("wall_seconds",)
FIGURES: dict[str, Figure] = _by_name(
    Figure("best", "best {metric}", "metric", "value", "the metric's best value over the evaluated rounds", unit=None),
    Figure("final", "final {metric}", "metric", "value", "the metric at the last evaluated round", unit=None),
    Figure(
        "last_k_mean",
        "mean of the last {k} evaluations of {metric}",
        "metric",
        "value",
        "the mean of the metric over the last k evaluated rounds (view.k)",
        unit=None,
    ),
    Figure("best_round", "round of best {metric}", "none", "rounds", "the first round at which the metric is best"),
    Figure(
        "rounds_to_target",
        "rounds to {target} {metric}",
        "lower",
        "rounds",
        "the rounds until the metric reaches the target (view.target_rule: the first round, or FedTrip's count)",
        needs_target=True,
        censored=True,
        states_target_rule=True,
    ),
    Figure(
        "total_bytes_to_target",
        "bytes communicated to {target} {metric}",
        "lower",
        "bytes",
        "bytes sent up and down by all participating clients until the target",
        needs_target=True,
        fields=("bytes_up", "bytes_down"),
    ),
    Figure(
        "gflops_to_target",
        "GFLOPs to {target} {metric}",
        "lower",
        "gflops",
        "rounds to target × the forward MACs of a client round and the method's attaching operations, in 1e9 "
        "(FedTrip Table V's accounting: fedbench.cost.client_round_work, unit macs)",
        needs_target=True,
        states_target_rule=True,
    ),
    Figure(
        "value_at_round",
        "{metric} at round {at_round}",
        "metric",
        "value",
        "the metric at a given round (view.at_round, or the row's or column's round of view.at_rounds)",
        unit=None,
        label_by_key="{metric} at the row's round",
    ),
    Figure(
        "wall_seconds",
        "wall seconds",
        "lower",
        "seconds",
        "the run's wall-clock time: the sum of its rounds' wall_seconds (training and evaluation)",
        unit="s",
        of_run=True,
        fields=_WALL,
    ),
    Figure(
        "seconds_per_round",
        "seconds per round",
        "lower",
        "seconds",
        "the mean wall-clock seconds of the run's rounds (training and evaluation)",
        unit="s",
        of_run=True,
        fields=_WALL,
    ),
    Figure(
        "wall_hours",
        "wall-clock hours",
        "lower",
        "hours",
        "the run's wall-clock time in hours",
        of_run=True,
        fields=_WALL,
    ),
    Figure(
        "peak_memory_mb",
        "peak memory (MB)",
        "lower",
        "megabytes",
        "the run's peak memory in MB of 2^20 bytes, from its provenance",
        of_run=True,
        note=(
            "peak memory in MB of 2^20 bytes: torch.cuda.max_memory_allocated on a GPU (fedbench keeps the whole data "
            "set on the device, so it is included); on a CPU the growth of the process's peak resident set during "
            "the run, not comparable with GPU figures; – where a run recorded none."
        ),
    ),
    Figure(
        "val_selected",
        "{metric} at the best mean-validation round",
        "metric",
        "value",
        f"the metric at the first round with the best {VALIDATION_METRIC} (LG-Mix's model selection)",
        unit=None,
        fields=metric_fields(VALIDATION_METRIC),
    ),
)
FIGURE_NAMES: tuple[str, ...] = tuple(FIGURES)  # the values a table view's `figure` accepts
TARGET_FIGURES: tuple[str, ...] = tuple(name for name, f in FIGURES.items() if f.needs_target)
RUN_FIGURES: tuple[str, ...] = tuple(name for name, f in FIGURES.items() if f.of_run)


def figure_label(
    name: str, *, metric: str = "", k: int = 10, target: str = "the target", at_round: int | None = None
) -> str:
    """The human label of figure ``name`` of the metric named ``metric`` ("test accuracy": the metric catalogue's
    ``metric_label``) with the view's parameters: ``k`` (last_k_mean), ``target`` (the target as shown, with its
    unit) and ``at_round`` (value_at_round; None: the round is a row or column key)."""
    figure = FIGURES[name]
    label = figure.label_by_key if figure.label_by_key and not at_round else figure.label
    return " ".join(label.format(metric=metric, k=k, target=target, at_round=at_round).split())


def better_sign(name: str, metric_higher_is_better: bool) -> int:
    """+1 when a higher figure is better, −1 when a lower one is, 0 when the figure has no direction."""
    better = FIGURES[name].better
    if better == "lower":
        return -1
    if better == "none":
        return 0
    return 1 if metric_higher_is_better else -1


# ------------------------------------------------------------------------------------------ reproduction margins
# The equivalence margin δ of a reproduction verdict (fedbench.report.stats.verdict): ours reproduces the paper when
# the 90 % interval of (ours − published) lies inside ±δ. A view's ``tolerance`` overrides the default. The reasoning
# behind each default is in docs/report.md ("Did we reproduce the paper?").
#
# * A value of a percent metric shown in % (accuracy, Dice, F1, ...): 1 percentage point. The five papers' own
#   published seed stds of such cells have a median of 0.63 points (459 stds in 10 tables of FedDr+, FedImpro
#   and LG-Mix), 75th percentile 1.21:
#   agreeing within 1 point is agreeing within about the spread the papers themselves report between seeds.
# * A value of another metric (a loss, HD95 in pixels): 20 % of the published value. HD95's published stds are a
#   median 16 % of their value (48 cells of LG-Mix Table 3), so a tighter margin would ask more than the paper can.
# * Rounds to a target: 10 % of the published rounds, at least one round (a count of rounds cannot agree closer
#   than one round). The papers publish no seed spread of rounds, so this one is a convention, not a measurement;
#   it is well below the differences FedTrip's Table IV reports (its ratios to FedTrip above 1× start at 1.38×).
# * Costs (GFLOPs, bytes to a target; seconds, hours, MB): 10 % of the published value, as rounds: FedTrip's costs
#   are its rounds times a per-round constant. Time and memory also depend on the machine.
ACCURACY_MARGIN_POINTS = 1.0
VALUE_MARGIN_RELATIVE = 0.20
ROUNDS_MARGIN_RELATIVE = 0.10
ROUNDS_MARGIN_FLOOR = 1.0
COST_MARGIN_RELATIVE = 0.10


def default_margin(name: str, metric_percent: bool, percent: bool, published: float) -> float:
    """The default equivalence margin δ of figure ``name`` around ``published``, in the cell's displayed unit:
    ``metric_percent`` says the view's metric is a fraction, ``percent`` that the view shows it ×100."""
    number = FIGURES[name].number
    if number == "value":
        if metric_percent:
            return ACCURACY_MARGIN_POINTS if percent else ACCURACY_MARGIN_POINTS / 100
        return VALUE_MARGIN_RELATIVE * abs(published)
    if number == "rounds":
        return max(ROUNDS_MARGIN_RELATIVE * abs(published), ROUNDS_MARGIN_FLOOR)
    return COST_MARGIN_RELATIVE * abs(published)


def margin_text(name: str, metric_percent: bool, percent: bool) -> str:
    """The default margin of figure ``name`` in words ("±1 point", "±10 %, at least 1 round")."""
    number = FIGURES[name].number
    if number == "value":
        if metric_percent:
            return f"±{ACCURACY_MARGIN_POINTS:g} point" if percent else f"±{ACCURACY_MARGIN_POINTS / 100:g}"
        return f"±{VALUE_MARGIN_RELATIVE:.0%} of the paper's value"
    if number == "rounds":
        return f"±{ROUNDS_MARGIN_RELATIVE:.0%} of the paper's rounds, at least {ROUNDS_MARGIN_FLOOR:g} round"
    return f"±{COST_MARGIN_RELATIVE:.0%} of the paper's value"
