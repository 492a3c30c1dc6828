"""What a rendered table is made of: ``Cell`` (ours beside the paper's value), ``Table``, and what the statistics
(``stats.py``) attach to a cell: its ``Comparison`` with the baseline cell and its ``Verdict`` against the paper.

Shared by the run tables (``table.py``), the analytic tables (``static.py``) and the statistics, and read by the
renderers, so none of them imports another's module for these types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from fedbench.recipes.views import TableView

if TYPE_CHECKING:
    from fedbench.recipes.views import Claim

MARKS = {"better": "▲", "worse": "▼", "same": "·"}
VERDICTS = ("reproduced", "higher", "lower", "inconclusive", "not_comparable")
VERDICT_MARKS = {"reproduced": "✓", "higher": "↑", "lower": "↓", "inconclusive": "?"}


@dataclass
class Comparison:
    """A cell against its baseline cell (same labels, the baseline's method), paired by seed."""

    baseline: str  # the baseline's label on the baseline axis
    pairs: int = 0  # seed pairs tested
    seeds: list[int] | None = None
    difference: float | None = None  # mean over pairs of cell − baseline
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None  # the paired permutation test's, two-sided (fedbench.report.stats.sign_flip_test)
    p_holm: float | None = None  # Holm-corrected across the table's tests
    censored: int = 0  # pairs with one seed never reaching the target (counted as R + 1)
    dropped: int = 0  # pairs where neither seed reached the target (left out)
    outcome: str = ""  # better | worse | same | "" (no test: fewer than two pairs, or no direction)
    reason: str = ""  # why there is no test
    test: str = ""  # the test's name (stats.PAIRED_TEST, or its Monte Carlo form)
    statistic: float | None = None  # its statistic: the mean paired difference
    assignments: int = 0  # the sign assignments it counted over (2^pairs when exact)

    @property
    def mark(self) -> str:
        return MARKS.get(self.outcome, "")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "mark": self.mark}


@dataclass
class Verdict:
    """Our cell against the paper's value, judged by an equivalence margin (fedbench.report.stats.verdict)."""

    status: str  # one of VERDICTS
    reason: str = ""  # why not comparable
    difference: float | None = None  # ours − published (the seed mean, or the seed-mean curve's figure)
    ci90_low: float | None = None  # the 90 % interval of ours − published: inside ±margin = reproduced
    ci90_high: float | None = None
    ci_low: float | None = None  # the 95 % interval of ours − published: beyond ±margin = higher / lower
    ci_high: float | None = None
    margin: float | None = None  # δ, in the cell's displayed unit
    interval: str = ""  # how the intervals were computed (t, Welch with the paper's std, bootstrap over seeds)
    seeds_needed: int | None = None  # inconclusive: seeds that would likely decide it at our observed spread

    @property
    def mark(self) -> str:
        return VERDICT_MARKS.get(self.status, "")

    def to_json(self) -> dict[str, Any]:
        # "tolerance": the margin under its earlier name, for readers of older reports' JSON
        return {**asdict(self), "tolerance": self.margin, "mark": self.mark}


def reproduction_counts(verdicts: Sequence[Verdict | None]) -> dict[str, int]:
    """{verdict status: cells} over the cells with a published number or a verdict, and "cells" (their count)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        if v is not None:
            counts[v.status] += 1
    counts["cells"] = sum(counts[s] for s in VERDICTS)
    return counts


# ------------------------------------------------------------------------------------------ claims' results
# What fedbench.report.claims computes of a paper's claims about a table, attached to the Table below.
CLAIM_STATUSES = ("holds", "fails", "inconclusive", "no_verdict")
UNREACHABLE_KEYS = ("pairs", "smallest_p", "smallest_p_holm", "pairs_needed")
TAU_VARIANT = "tau-b"  # scipy.stats.kendalltau's default variant: ties in either ranking are corrected for


@dataclass
class ClaimComparison:
    """One pair of a claim in one group: ``better`` is claimed better than ``worse``."""

    better: str
    worse: str
    pairs: int = 0  # seed pairs tested
    difference: float | None = None  # mean over pairs of better − worse, in the cell's unit
    p_value: float | None = None  # the paired test's, two-sided
    p_claimed: float | None = None  # one-sided, ``better`` is better
    p_claimed_holm: float | None = None  # Holm-corrected over the claim's comparisons
    p_against_holm: float | None = None  # the same for ``worse`` being better
    outcome: str = ""  # supports | contradicts | unclear | "" (no test)
    reason: str = ""  # why there is no test

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ClaimGroup:
    """A claim in one group of cells (a column, a row)."""

    group: str
    status: str = "inconclusive"  # one of CLAIM_STATUSES
    comparisons: list[ClaimComparison] = field(default_factory=list)
    paper_agrees: bool | None = None  # the published values rank as claimed (None: a published value is missing)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "comparisons": [c.to_json() for c in self.comparisons]}


@dataclass
class ClaimResult:
    """A declared claim evaluated on a table: its verdict in each group and over all of them."""

    claim: Claim
    axis: str
    noun: str  # what a group is: column, row, group, table
    status: str = "inconclusive"  # holds in every group, fails in one, no_verdict, else inconclusive
    reason: str = ""  # why no verdict
    groups: list[ClaimGroup] = field(default_factory=list)
    # where the seed count cannot decide any pair: (most seed pairs of a pair, the smallest one-sided p they allow,
    # that p after Holm over the claim's tested pairs, the seed pairs every pair would need); None where it can
    unreachable: tuple[int, float, float, int] | None = None

    @property
    def labels(self) -> list[str]:
        return [self.claim.best] if self.claim.best is not None else list(self.claim.order)

    def counts(self) -> dict[str, int]:
        """{status: groups} and "groups" (their count)."""
        out = {status: sum(g.status == status for g in self.groups) for status in CLAIM_STATUSES}
        return {**out, "groups": len(self.groups)}

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.claim.kind,
            "labels": self.labels,
            "axis": self.axis,
            "within": self.claim.within,
            "quote": self.claim.quote,
            "location": self.claim.location,
            "status": self.status,
            "reason": self.reason,
            "counts": self.counts(),
            "groups": [g.to_json() for g in self.groups],
            "unreachable": None if self.unreachable is None else dict(zip(UNREACHABLE_KEYS, self.unreachable)),
        }


@dataclass
class RankAgreement:
    """Kendall's τ-b between our means and the published values of one group's labels on ``axis``."""

    axis: str
    group: str
    n: int  # labels with both our mean and a published number
    tau: float | None = None
    variant: str = TAU_VARIANT
    reason: str = ""  # why no τ

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Cell:
    row: str
    column: str
    labels: dict[str, str]
    expected: int  # seeds the recipe asks for
    n: int = 0  # finished runs found
    values: list[float | None] = field(default_factory=list)  # per seed (None: target not reached)
    seeds: list[int] = field(default_factory=list)
    mean: float | None = None
    std: float | None = None
    not_reached: int = 0  # rounds_to_target: seeds that never reached the target
    rounds_limit: int | None = None  # for ">R" display
    diverged: int = 0
    published: float | str | None = None
    published_std: float | None = None
    published_derived: bool = False  # the paper does not print this value: the recipe derived it (view.derived_note)
    published_std_derived: bool = False
    synthetic_available: int = 0  # synthetic runs exist for a real-data report
    ratio: float | None = None  # mean ÷ the reference cell's mean (view.ratio_to)
    published_ratio: float | None = None  # the paper's ratio, recomputed from its published values
    printed_ratio: float | None = None  # the ratio the paper printed (view.published_ratio), where recorded
    static: bool = False  # an analytic value, not a summary of runs
    published_only: bool = False  # a row the paper quotes from another paper: no run (view.published_only)
    added: bool = False  # a cell of a value added on the command line (--add): never a published value
    no_target: bool = False  # a to-target figure where the view gives this row or column no target
    target: float | None = None  # a to-target figure's target, in the unit the table shows (None: none)
    run_ids: list[int] = field(default_factory=list)  # registry ids of the runs, aligned with ``seeds``
    runs: list[Any] = field(default_factory=list, repr=False, compare=False)  # their registry rows (HTML drill-down)
    # a figure of the seed-mean curve: that figure over resamples of the seeds (stats.bootstrap_figures), for its
    # verdict; None for other cells, and where no verdict is given (synthetic data, another scale)
    bootstrap: list[float | None] | None = field(default=None, repr=False, compare=False)
    comparison: Comparison | None = None  # against the table's baseline cell (fedbench.report.stats)
    verdict: Verdict | None = None  # against the paper's value

    def take_published(self, view: TableView) -> None:
        """The paper's value and std of this cell of ``view``, and whether the recipe marks either as derived."""
        self.published = view.published_value(self.row, self.column)
        self.published_std = view.published_value(self.row, self.column, std=True)  # type: ignore[assignment]
        self.published_derived = view.is_derived(self.row, self.column)
        self.published_std_derived = view.is_derived(self.row, self.column, std=True)

    @property
    def partial(self) -> bool:
        return 0 < self.n < self.expected

    @property
    def difference(self) -> float | None:
        if self.mean is None or not isinstance(self.published, (int, float)):
            return None
        return self.mean - float(self.published)

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "column": self.column,
            "labels": self.labels,
            "n": self.n,
            "expected": self.expected,
            "mean": self.mean,
            "std": self.std,
            "values": self.values,
            "seeds": self.seeds,
            "not_reached": self.not_reached,
            "diverged": self.diverged,
            "published": self.published,
            "published_std": self.published_std,
            "published_derived": self.published_derived,
            "published_std_derived": self.published_std_derived,
            "difference": self.difference,
            "partial": self.partial,
            "ratio": self.ratio,
            "published_ratio": self.published_ratio,
            "printed_ratio": self.printed_ratio,
            "static": self.static,
            "published_only": self.published_only,
            "added": self.added,
            "no_target": self.no_target,
            "target": self.target,
            "run_ids": self.run_ids,
            "baseline": self.comparison.to_json() if self.comparison else None,
            "verdict": self.verdict.to_json() if self.verdict else None,
        }


@dataclass
class Table:
    recipe: str
    paper: str
    view: TableView
    scale: str
    synthetic: bool
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell]
    unit: str
    # what the table's builder has to say about it: an analytic table's method, a measure the runs found (peak memory)
    notes: list[str] = field(default_factory=list)
    baseline: str | None = None  # the baseline axis label every cell is compared with (None: no comparison)
    # the rows and the columns of values added on the command line (--add)
    added_rows: list[str] = field(default_factory=list)
    added_columns: list[str] = field(default_factory=list)
    # the tasks of its runs' data sets ("classification", "segmentation"): which human name its metric has
    tasks: tuple[str, ...] = ("classification",)
    trials: int | None = None  # the paper's trials per cell (the recipe's ``trials``), where its spec says
    # the view's claims evaluated on the cells, and the rank agreement with the paper (fedbench.report.claims)
    claims: list[ClaimResult] = field(default_factory=list)
    rank_agreement: list[RankAgreement] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.view.title or f"{self.recipe}: {self.view.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "paper": self.paper,
            "recipe": self.recipe,
            "table": self.view.name,
            "title": self.title,
            "reproduces": self.view.reproduces,
            "caption": self.view.caption,
            "figure": self.view.figure,
            "metric": self.view.metric,
            "target": self.view.target,
            "summary": self.view.summary,
            "unit": self.unit,
            "scale": self.scale,
            "synthetic": self.synthetic,
            "rows": self.rows,
            "columns": self.columns,
            "cells": [self.cells[(r, c)].to_json() for r in self.rows for c in self.columns if (r, c) in self.cells],
            "notes": self.notes,
            "baseline": self.baseline,
            "baseline_axis": self.view.baseline_axis if self.baseline else None,
            "added_rows": self.added_rows,
            "added_columns": self.added_columns,
            "reproduction": self.reproduction(),
            "trials": self.trials,
            "claims": [claim.to_json() for claim in self.claims],
            "rank_agreement": [entry.to_json() for entry in self.rank_agreement],
        }

    def reproduction(self) -> dict[str, int]:
        """{verdict: cells} of the cells with a published value (``reproduction_counts``)."""
        return reproduction_counts([cell.verdict for cell in self.cells.values()])
