"""The papers' claims about a table, evaluated on our runs, and how our ranking of a group of cells agrees with the
paper's.

A view declares its paper's claims (``[[tables.claims]]``, ``fedbench.recipes.views.Claim``): ``best``, one label
of an axis is better than each other label in every group of cells (a column when the axis is the row key, a row
when it is the column key; ``within`` names some), or ``order``, its labels rank best first. A claim is a set of
pairwise comparisons — (best, each other label) or (each label, the next one) — in each group, and each
comparison is the baseline test's (``stats.compare_cell``: the per-seed figures paired by seed). The claim says
one side is better, so its test is one-sided in the figure's better direction: the null distribution of the paired
statistic is symmetric, so the one-sided p in the direction the mean difference points is half the two-sided p, and
the other direction's is one minus that. The p-values of all of a claim's comparisons, over all its groups, are one
family, Holm-corrected (``stats.holm``) at ``stats.ALPHA``, once for the claimed direction and once against it.

In a group a claim **holds** when every comparison is significant in the claimed direction, **fails** when one is
significant against it (another label is better than the claimed one), and is **inconclusive** otherwise (also when
a comparison has no test: a missing cell, fewer than two seed pairs). Synthetic data and a scale other than the
paper's give **no verdict**, as for the reproduction verdicts. Beside each group's verdict: whether the paper's own
published values rank the labels as claimed (``paper_agrees``).

Rank agreement (``rank_agreement``): per group of each claimed axis, Kendall's τ-b (``scipy.stats.kendalltau``,
which corrects for ties) between our means and the published values, over the labels that have both, with their
count n.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fedbench.report.cells import (
    ClaimComparison,
    ClaimGroup,
    ClaimResult,
    RankAgreement,
)
from fedbench.report.stats import ALPHA, better_sign, compare_cell, holm, unreachable_significance

if TYPE_CHECKING:
    from fedbench.recipes.views import Claim, TableView
    from fedbench.report.cells import Cell, Table


def no_verdict_reason(synthetic: bool, scale: str) -> str:
    """Why runs say nothing about the paper's claims ("" when they do): synthetic data, a scale not the paper's."""
    if synthetic:
        return "synthetic data is not the paper's data"
    return f"scale {scale!r} is not the paper's setting" if scale != "full" else ""


def claim_cells(table: Table, axis: str, group_keys: list[str]) -> dict[str, dict[str, Cell]]:
    """{group label: {label on ``axis``: cell}} of the table's run cells, in the table's order; the cells of values
    added on the command line are not the paper's, so no claim is about them."""
    groups: dict[str, dict[str, Cell]] = {}
    for row in table.rows:
        for column in table.columns:
            cell = table.cells.get((row, column))
            if cell is None or cell.static or cell.published_only or cell.added:
                continue
            if any(key not in cell.labels for key in (axis, *group_keys)):
                continue
            group = " / ".join(cell.labels[k] for k in group_keys)
            groups.setdefault(group, {})[cell.labels[axis]] = cell
    return groups


def claim_pairs(claim: Claim, labels: list[str]) -> list[tuple[str, str]]:
    """The (better, worse) pairs a claim makes among a group's ``labels``: the best against each other label there,
    or each label of the order against the next."""
    if claim.best is not None:
        return [(claim.best, other) for other in labels if other != claim.best]
    return list(zip(claim.order, claim.order[1:]))


def cell_sign(view: TableView, cell: Cell) -> int:
    """+1 when a higher figure is better in ``cell``, −1 when a lower one is: its metric's (the "metric"
    pseudo-axis gives each cell its own) and the figure's direction."""
    label = cell.labels.get("metric")
    return better_sign(view, view.metrics.get(label) if label is not None else None)


def _compare(view: TableView, cells: dict[str, Cell], better: str, worse: str) -> ClaimComparison:
    """The paired comparison of a pair of a group's cells (better − worse), untested when a cell has no run."""
    out = ClaimComparison(better=better, worse=worse)
    missing = [label for label in (better, worse) if label not in cells or not cells[label].n]
    if missing:
        out.reason = f"no finished run of {missing[0]}"
        return out
    tested = compare_cell(cells[better], cells[worse], worse, view.figure)
    out.pairs, out.difference, out.p_value, out.reason = tested.pairs, tested.difference, tested.p_value, tested.reason
    return out


def one_sided(p_value: float, difference: float, sign: int) -> float:
    """The one-sided p that the claimed side is better, from the two-sided ``p_value``: half of it when the mean
    difference (claimed − other) points the claimed way (``sign`` · difference > 0), else one minus that half."""
    half = p_value / 2
    return half if sign * difference > 0 else 1 - half


def paper_agrees(view: TableView, comparisons: list[ClaimComparison], cells: dict[str, Cell]) -> bool | None:
    """Whether the paper's published values rank each pair as claimed (strictly: a tie is not a rank); None when
    a pair lacks a published number and no other pair contradicts the claim."""
    agrees: bool | None = True
    for c in comparisons:
        a, b = cells.get(c.better), cells.get(c.worse)
        if a is None or b is None or not all(isinstance(x.published, (int, float)) for x in (a, b)):
            agrees = None
            continue
        if cell_sign(view, a) * (float(a.published) - float(b.published)) <= 0:  # type: ignore[arg-type]
            return False
    return agrees


def evaluate_claim(table: Table, claim: Claim, alpha: float = ALPHA) -> ClaimResult:
    """The claim's verdict in each of its groups and over them (module docstring)."""
    view = table.view
    axis = view.claim_axis(claim)
    result = ClaimResult(claim=claim, axis=axis, noun=view.claim_group_noun(claim))
    family: list[ClaimComparison] = []
    for group, cells in claim_cells(table, axis, view.claim_group_keys(claim)).items():
        if claim.within and group not in claim.within:
            continue
        entry = ClaimGroup(group=group)
        for better, worse in claim_pairs(claim, list(cells)):
            comparison = _compare(view, cells, better, worse)
            entry.comparisons.append(comparison)
            if comparison.p_value is not None and comparison.difference is not None:
                comparison.p_claimed = one_sided(
                    comparison.p_value, comparison.difference, cell_sign(view, cells[better])
                )
                family.append(comparison)
        entry.paper_agrees = paper_agrees(view, entry.comparisons, cells)
        result.groups.append(entry)
    claimed = holm([c.p_claimed for c in family])  # type: ignore[misc]
    against = holm([1 - c.p_claimed for c in family])  # type: ignore[operator]
    for comparison, p_for, p_against in zip(family, claimed, against):
        comparison.p_claimed_holm, comparison.p_against_holm = p_for, p_against
        comparison.outcome = "supports" if p_for < alpha else "contradicts" if p_against < alpha else "unclear"
    result.reason = no_verdict_reason(table.synthetic, table.scale)
    result.unreachable = unreachable_claim([c.pairs for c in family], alpha)
    for entry in result.groups:
        entry.status = "no_verdict" if result.reason else _group_status(entry)
    result.status = _claim_status(result)
    return result


def unreachable_claim(pairs: list[int], alpha: float = ALPHA) -> tuple[int, float, float, int] | None:
    """None when the claim's tested pairs (over ``pairs`` seed pairs each) could decide it; else (the most seed
    pairs, the smallest one-sided p they allow, that p after Holm over the pairs, the seed pairs needed). A one-sided
    p is at least half the sign-flip test's smallest two-sided one, so the claim is undecidable exactly where the
    two-sided family could not reach 2 · alpha (``stats.unreachable_significance``)."""
    reach = unreachable_significance(pairs, 2 * alpha)
    if reach is None:
        return None
    most, smallest, _, needed = reach
    return most, smallest / 2, min(1.0, len(pairs) * smallest / 2), needed


def _group_status(entry: ClaimGroup) -> str:
    outcomes = [c.outcome for c in entry.comparisons]
    if "contradicts" in outcomes:
        return "fails"
    return "holds" if outcomes and all(o == "supports" for o in outcomes) else "inconclusive"


def _claim_status(result: ClaimResult) -> str:
    """Over the groups: no verdict, fails where it fails in one, holds where it holds in all, else inconclusive."""
    if result.reason:
        return "no_verdict"
    statuses = [g.status for g in result.groups]
    if "fails" in statuses:
        return "fails"
    return "holds" if statuses and all(s == "holds" for s in statuses) else "inconclusive"


def evaluate_claims(table: Table) -> list[ClaimResult]:
    """Every claim the table's view declares, evaluated on its cells."""
    return [evaluate_claim(table, claim) for claim in table.view.claims]


def kendall_tau(ours: list[float], published: list[float]) -> float | None:
    """Kendall's τ-b of two rankings (None when one ranking is all ties, where τ is undefined)."""
    from scipy import stats  # local: scipy (0.3 s) is imported by the first claim, not by every report

    tau = float(stats.kendalltau(ours, published).statistic)
    return None if math.isnan(tau) else tau


def rank_agreement(table: Table) -> list[RankAgreement]:
    """Per axis of the view's claims and per group of it (every group, whatever ``within``): τ-b of our means and
    the published numbers over the labels with both."""
    view = table.view
    out = []
    axes = dict.fromkeys(view.claim_axis(claim) for claim in view.claims)
    for axis in axes:
        claim = next(c for c in view.claims if view.claim_axis(c) == axis)
        for group, cells in claim_cells(table, axis, view.claim_group_keys(claim)).items():
            both = [
                (c.mean, float(c.published))
                for c in cells.values()
                if c.mean is not None and isinstance(c.published, (int, float))
            ]
            entry = RankAgreement(axis=axis, group=group, n=len(both))
            if len(both) < 2:
                entry.reason = "fewer than two labels with both our mean and a published number"
            else:
                entry.tau = kendall_tau([x for x, _ in both], [y for _, y in both])
                entry.reason = "" if entry.tau is not None else "one ranking is all ties"
            out.append(entry)
    return out
