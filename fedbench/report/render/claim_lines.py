"""What every format shows of the papers' claims (fedbench/report/claims.py): under a table, each claim with the
paper's sentence, its verdict over the groups and in each group, and the rank agreement with the paper; in the
report's summary, a line per claim; in the legend, what holds / fails / inconclusive mean."""

from __future__ import annotations

from fedbench.report.cells import Table
from fedbench.report.claims import ClaimGroup, ClaimResult
from fedbench.report.stats import ALPHA

CLAIM_WORDS = {"holds": "holds", "fails": "fails", "inconclusive": "inconclusive", "no_verdict": "no verdict"}


def _p(value: float | None) -> str:
    return "–" if value is None else f"{value:.2g}"


def _delta(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3g}"


def statement(result: ClaimResult) -> str:
    """The claim in words: "fedtrip best on algorithm in every column", "order fedtrip, fedavg (best first) on
    algorithm in rows A, B"."""
    claim = result.claim
    what = f"{claim.best} best" if claim.best is not None else f"order {', '.join(claim.order)} (best first)"
    if result.noun == "table":
        where = ""
    elif claim.within:
        where = f" in {result.noun}{'s' if len(claim.within) > 1 else ''} {', '.join(claim.within)}"
    else:
        where = f" in every {result.noun}"
    return f"{what} on {result.axis}{where}"


def verdict_text(result: ClaimResult) -> str:
    """ "holds in all 6 columns", "fails: holds in 2, fails in 1, inconclusive in 3 of 6 columns" (the overall
    verdict first where the groups differ), a table-wide claim's verdict alone, "no verdict (synthetic data …)"."""
    if result.reason:
        return f"no verdict ({result.reason})"
    counts = result.counts()
    if not counts["groups"]:
        return "no cell to evaluate"
    if result.noun == "table":
        return CLAIM_WORDS[result.status]
    present = [s for s in ("holds", "fails", "inconclusive") if counts[s]]
    noun = result.noun + ("s" if counts["groups"] != 1 else "")
    if len(present) == 1:
        return f"{CLAIM_WORDS[present[0]]} in {'all ' if counts['groups'] > 1 else ''}{counts['groups']} {noun}"
    parts = ", ".join(f"{CLAIM_WORDS[s]} in {counts[s]}" for s in present)
    return f"{CLAIM_WORDS[result.status]}: {parts} of {counts['groups']} {noun}"


def group_detail(entry: ClaimGroup) -> str:
    """Why the group's verdict: the largest corrected p where it holds, the contradicting pairs where it fails, the
    pairs that decide nothing where it is inconclusive (those without a test together by their reason)."""
    comparisons = entry.comparisons
    if entry.status == "holds":
        largest = max(c.p_claimed_holm for c in comparisons)  # type: ignore[type-var]
        return f"every comparison significant: largest p_Holm = {_p(largest)}"
    if entry.status == "fails":
        return "; ".join(
            f"{c.worse} better than {c.better}: Δ {_delta(c.difference)}, p_Holm = {_p(c.p_against_holm)}"
            for c in comparisons
            if c.outcome == "contradicts"
        )
    if not comparisons:
        return "nothing to compare with"
    parts = [
        f"{c.better} vs {c.worse} not significant: Δ {_delta(c.difference)}, p_Holm = {_p(c.p_claimed_holm)}"
        for c in comparisons
        if c.outcome == "unclear"
    ]
    untested: dict[str, list[str]] = {}
    for c in comparisons:
        if not c.outcome:
            untested.setdefault(c.reason, []).append(f"{c.better} vs {c.worse}")
    parts += [f"no test of {', '.join(pairs)} ({reason})" for reason, pairs in untested.items()]
    return "; ".join(parts)


def claim_notes(table: Table) -> list[str]:
    """The lines under a table about its paper's claims: per claim, the paper's sentence and where it says it, the
    verdict over its groups and in each; then the rank agreement of each claimed axis."""
    out = []
    for i, result in enumerate(table.claims, 1):
        name = f"claim {i}"
        out.append(f'{name} ({result.claim.location}): "{result.claim.quote}"')
        out.append(f"{name}: {statement(result)}: {verdict_text(result)}.")
        if result.reason:
            continue
        out += reach_line(name, result)
        for entry in result.groups:
            where = f"{name}, {entry.group}" if entry.group else name
            paper = "; the paper's own values do not rank them so" if entry.paper_agrees is False else ""
            out.append(f"{where}: {CLAIM_WORDS[entry.status]} ({group_detail(entry)}){paper}.")
    if any(not r.reason for r in table.claims):
        out += rank_lines(table)
    return out


def reach_line(name: str, result: ClaimResult) -> list[str]:
    """Where the seeds cannot decide the claim at all: how far they fall short and how many would do."""
    if result.unreachable is None:
        return []
    pairs, smallest, adjusted, needed = result.unreachable
    tested = sum(c.p_claimed is not None for g in result.groups for c in g.comparisons)
    return [
        f"{name}: {pairs} seed pair{'s' if pairs != 1 else ''} cannot decide it: the smallest one-sided p is "
        f"{smallest:.2g}, {adjusted:.2g} after Holm over its {tested} tested pair{'s' if tested != 1 else ''} "
        f"(p < {ALPHA:.2g} needs {needed} seeds)."
    ]


def rank_lines(table: Table) -> list[str]:
    """A line per claimed axis: Kendall's τ-b of our means and the paper's values in each group, with its n."""
    out = []
    for axis in dict.fromkeys(entry.axis for entry in table.rank_agreement):
        noun = next(r.noun for r in table.claims if r.axis == axis)
        entries = [e for e in table.rank_agreement if e.axis == axis]
        values = ", ".join(
            f"{e.group + ' ' if e.group else ''}{'–' if e.tau is None else f'{e.tau:+.2f}'} (n={e.n})" for e in entries
        )
        out.append(
            f"rank agreement with the paper on {axis} (Kendall τ-b of our means and the published values, "
            f"per {noun}): {values}."
        )
    return out


def claim_legend(table: Table) -> list[str]:
    """What a claim's verdicts mean, where the table has a claim with a verdict."""
    if not any(not r.reason for r in table.claims):
        return []
    return [
        "claims: holds = the claimed label is significantly better than each label it is compared with (one-sided "
        f"paired test over seeds, Holm-corrected across the claim's comparisons, p < {ALPHA:.2g}); fails = one of "
        "them is significantly better than it; inconclusive = neither."
    ]


def claims_summary(tables: list[Table]) -> list[tuple[str, list[str]]]:
    """The summary's "Claims" section: a line per claim of every table (none without claims)."""
    lines = [
        f"{table.title}, claim {i}: {statement(result)}: {verdict_text(result)}"
        for table in tables
        for i, result in enumerate(table.claims, 1)
    ]
    return [("Claims", lines)] if lines else []
