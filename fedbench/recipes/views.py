"""The views of a recipe: the tables and figures a report draws from its runs (or, for analytic tables, from
``static_rows``), with the values the paper published. Format: docs/recipes.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES
from fedbench.vocab.figures import FIGURE_NAMES
from fedbench.vocab.metrics import CURVE_METRICS

DERIVED_MARK = "‡"  # beside a published value the paper does not print (``published_derived``)


class Strict(BaseModel):
    """A model that rejects unknown keys: a typo in a recipe must never be silently ignored."""

    model_config = ConfigDict(extra="forbid")


class StaticRow(Strict):
    """A row of an analytic table (no runs): a model configuration or a method in a setting."""

    label: str
    model: str | None = None
    dataset: str | None = None
    model_params: dict[str, Any] = {}
    algorithm: str | None = None
    algorithm_params: dict[str, Any] = {}


class Claim(Strict):
    """A claim the paper makes about a view's table, as data the report evaluates on our runs
    (fedbench/report/claims.py): ``best``, one label of ``axis`` is better than every other label in each group of
    cells (a column when ``axis`` is the row key, a row when it is the column key), or ``order``, its labels rank
    in that order (best first) in each group; ``within`` limits the groups to those named. ``quote`` is the paper's
    sentence and ``location`` where it says it, so a reader can check that the data states what the paper does."""

    best: str | None = None
    order: list[str] = []
    axis: str | None = None  # unset: the view's baseline_axis
    within: list[str] = []  # group labels (columns or rows, " / "-joined like the report's); empty: every group
    quote: str
    location: str

    @property
    def kind(self) -> str:
        """ "best" or "order"."""
        return "best" if self.best is not None else "order"


class TableView(Strict):
    """One table or figure of a recipe: which runs it shows, the figure of their curves, the row and column axes, and
    the values the paper published for its cells."""

    name: str
    title: str = ""
    caption: str = ""
    # The items of the paper this view reproduces, as the paper labels them: tables and figure panels ("Table IV",
    # "Table 2b", "Fig. 2(b)"; "Fig. 4 (validation loss)" for a panel the paper does not letter). What the view
    # shows, never how a run trains: no spec hash depends on it. The coverage check of the shipped papers
    # (tests/papers/test_paper_coverage.py) reads these declarations, not the titles.
    reproduces: list[str] = []
    # runs: cells from the registry.  models: parameter/communication/FLOP statistics of `static_rows`
    # (e.g. FedTrip Table III).  overheads: per-round attaching computation and extra communication of
    # each method of `static_rows` in the `setting` (FedTrip Table VIII).  partition: each row's per-client class
    # counts, from the partition its runs train on (the first seed's partition stream), no training (FedTR Fig. 2).
    # diagnostics: a figure drawn from the per-round diagnostic `diagnostic` its runs record
    # (fedbench/vocab/diagnostics.py; fedbench/report/diagnostics/series.py reads them).
    kind: Literal["runs", "models", "overheads", "partition", "diagnostics"] = "runs"
    diagnostic: Literal[DIAGNOSTIC_NAMES] | None = None  # type: ignore[valid-type]
    # How a diagnostics view lays its diagnostic out (fedbench/report/diagnostics/drawers.py); "default": the
    # diagnostic's own figure. For weight_divergence: "whole_model" (its default: the mean over the sampled clients of
    # √(Σ_ℓ distance²), methods overlaid, FedImpro Fig. 2(b)), "per_layer" (a line per layer, FedImpro Figs. 3(a)
    # and 9) or "per_stage" (a line per stage, the layers grouped by the block that holds them, ResNet's layer1 to
    # layer4: FedImpro Fig. 3(b)), each line normalised by its maximum as FedImpro §5.4 does.
    layout: Literal["default", "whole_model", "per_layer", "per_stage"] = "default"
    # per_layer: the layers drawn, by name (``fedbench.engine.diagnostics.divergence.layer_slices``:
    # "encoder.layer1.0.conv1"); empty: ten spread evenly over the model, its first and last included (FedImpro
    # Fig. 3(a) draws "10 chosen layers" without naming them)
    layers: list[str] = []
    static_rows: list[StaticRow] = []
    setting: dict[str, Any] = {}  # overheads: model, dataset, samples_per_client, batch_size, local_epochs
    rows: list[str] = []
    columns: list[str] = []
    figure: Literal[FIGURE_NAMES] = "best"  # type: ignore[valid-type]
    metric: Literal[CURVE_METRICS] = "test_acc"  # type: ignore[valid-type]
    k: int = Field(10, ge=1)  # for last_k_mean
    target: float | None = None  # for rounds_to_target (same unit as the metric)
    target_by: dict[str, float] = {}  # per row/column label targets (FedTrip Table IV)
    target_rule: Literal["first_reach", "count_not_above"] = "first_reach"
    at_round: int | None = None  # for value_at_round
    at_rounds: list[int] = []  # value_at_round at several rounds: a "round" row/column key
    ratio_to: str | None = None  # also show each cell ÷ the cell of this row/column label
    plot: Literal["curves", "box", "none"] = "curves"  # --plots: mean ± std curves, or box plots of the figure
    plot_by: Literal["rows", "columns"] = "rows"  # one figure per row (or column) value
    smoothing: float = Field(0.0, ge=0, lt=1)  # EMA weight for plotted curves (FedTrip Fig. 5 uses 0.5)
    summary: Literal["mean_std", "mean_curve"] = "mean_std"
    percent: bool = True  # print accuracies ×100
    # published[row key][column key], or published[row key] when the table has no column axes
    published: dict[str, dict[str, float | str] | float | str] = {}
    published_std: dict[str, dict[str, float] | float] = {}
    # Rows the paper quotes from other papers (no runs, e.g. FedImpro Table 10's FedDyn/CCVR rows): shown with their
    # published value only.  Each needs a `published` entry; with them the rows follow the order of `published`.
    published_only: list[str] = []
    # The ratio to the ratio_to cell the paper printed, where the recipe records it: the report recomputes the
    # paper's ratio from its published values and shows the printed one where the two differ (FedTrip Table IV).
    published_ratio: dict[str, dict[str, float] | float] = {}
    # Published values (and stds) the paper does not print: reconstructed, copied from another table, ... Cells as
    # { row = ["column", ...] }, or ["row", ...] when the view has no columns; shown with DERIVED_MARK, and
    # `derived_note` says how they were derived (the caption line of the mark).
    published_derived: dict[str, list[str]] | list[str] = {}
    published_std_derived: dict[str, list[str]] | list[str] = {}
    derived_note: str = ""
    # A "metric" pseudo-axis: { label = "curve metric", ... }; with "metric" in rows or columns each entry shows
    # its own metric (LG-Mix Table 7: Accuracy, AUC, Sensitivity, ...), and `metric` is not used.
    metrics: dict[str, Literal[CURVE_METRICS]] = {}  # type: ignore[valid-type]
    # Names of clients 0..N-1 (LG-Mix's A–E): with them, "client" may be a row or column key: one entry per
    # client (that client's value of a personal/finetune metric) and "Avg." (the metric itself).
    clients: list[str] = []
    # Only the runs whose labels match (e.g. { dataset = "Digits5" }): one view per dataset of a recipe; a list
    # gives alternatives (LG-Mix Fig. 4: { algorithm = ["fedavg", "fedalt", ...] }).
    where: dict[str, str | list[str]] = {}
    # Every cell is compared with the cell of the same labels whose `baseline_axis` label is `baseline` (paired by
    # seed, fedbench/report/stats.py). Unset: the label of that axis whose runs are all FedAvg, when there is one;
    # "none": no comparison.
    baseline: str | None = None
    baseline_axis: str = "algorithm"
    # The equivalence margin δ of the reproduction verdict, in the cell's displayed unit (1.0 = one percentage point
    # of accuracy): a cell reproduces the paper when the 90 % interval of ours − published lies inside ±δ. Unset:
    # the figure's default (fedbench.vocab.figures.default_margin).
    tolerance: float | None = Field(None, ge=0)
    # The claims the paper makes about this table ([[tables.claims]]): evaluated on our runs by the report.
    claims: list[Claim] = []

    @property
    def of_runs(self) -> bool:
        """Whether the view draws on trained runs (a table of runs, or a figure of their diagnostics), so its recipe
        has runs to train."""
        return self.kind in ("runs", "diagnostics")

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a run with these labels belongs to the view (its `where`)."""
        return all(labels.get(key) in alternatives(value) for key, value in self.where.items())

    def published_value(self, row: str, column: str, std: bool = False) -> float | str | None:
        entry = (self.published_std if std else self.published).get(row)
        return entry.get(column) if isinstance(entry, dict) else entry

    def printed_ratio(self, row: str, column: str) -> float | None:
        entry = self.published_ratio.get(row)
        return entry.get(column) if isinstance(entry, dict) else entry

    def derived_cells(self, std: bool = False) -> list[tuple[str, str | None]]:
        """The (row, column) cells whose published value (or std) is marked derived; column None in a view
        without columns."""
        marked = self.published_std_derived if std else self.published_derived
        if isinstance(marked, list):
            return [(row, None) for row in marked]
        return [(row, column) for row, columns in marked.items() for column in columns]

    def is_derived(self, row: str, column: str, std: bool = False) -> bool:
        return any(r == row and c in (None, column) for r, c in self.derived_cells(std))

    def claim_axis(self, claim: Claim) -> str:
        """The axis whose labels ``claim`` ranks: its own, else the view's baseline axis."""
        return claim.axis or self.baseline_axis

    def claim_group_keys(self, claim: Claim) -> list[str]:
        """The row and column keys besides the claim's axis: their labels, " / "-joined, name a group of cells."""
        axis = self.claim_axis(claim)
        return [key for key in self.rows + self.columns if key != axis]

    def claim_group_noun(self, claim: Claim) -> str:
        """What a group of the claim is called: "column" when the axis is the only row key, "row" when it is the
        only column key, "table" when it is the only key, else "group"."""
        axis = self.claim_axis(claim)
        if not self.claim_group_keys(claim):
            return "table"
        if self.rows == [axis]:
            return "column"
        return "row" if self.columns == [axis] else "group"

    def view_metrics(self) -> list[tuple[str | None, str]]:
        """(label, curve metric) of each entry of the "metric" pseudo-axis; [(None, metric)] without one."""
        return list(self.metrics.items()) if self.metrics else [(None, self.metric)]

    @field_validator("rows", "columns", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def alternatives(value: str | list[str]) -> list[str]:
    """A ``where`` value as its list of alternatives (a single label is a list of one)."""
    return [value] if isinstance(value, str) else value
