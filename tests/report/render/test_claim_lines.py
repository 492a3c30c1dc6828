"""How the papers' claims read in a report (``fedbench/report/render/claim_lines.py``): under the table the paper's
sentence and where it says it, the verdict over the groups and why in each, the rank agreement; one summary line
per claim; one legend line; and every format (rich, Markdown, LaTeX, HTML, JSON) shows them."""

from __future__ import annotations

import json

from report_fixtures import small_table
from rich.console import Console

from fedbench.recipes.views import Claim
from fedbench.report.claims import ClaimComparison, ClaimGroup, ClaimResult, RankAgreement
from fedbench.report.render import render
from fedbench.report.render.claim_lines import (
    claim_legend,
    claim_notes,
    claims_summary,
    group_detail,
    rank_lines,
    reach_line,
    statement,
    verdict_text,
)
from fedbench.report.render.notes import legend_notes, table_notes

BEST = Claim(best="fedtrip", quote="FedTrip is best.", location="§V-B")
ORDER = Claim(order=["fedtrip", "fedavg"], within=["A"], quote="FedTrip beats FedAvg.", location="p. 7")


def comparison(worse: str, outcome: str, **fields) -> ClaimComparison:
    return ClaimComparison(better="fedtrip", worse=worse, outcome=outcome, **fields)


def result(claim: Claim = BEST, noun: str = "column", groups: list[ClaimGroup] = (), **fields) -> ClaimResult:
    out = ClaimResult(claim=claim, axis="algorithm", noun=noun, groups=list(groups), **fields)
    return out


HOLDS = ClaimGroup(
    group="A",
    status="holds",
    comparisons=[
        comparison("fedavg", "supports", difference=-12.0, p_claimed_holm=0.004),
        comparison("moon", "supports", difference=-3.25, p_claimed_holm=0.0123),
    ],
    paper_agrees=True,
)
FAILS = ClaimGroup(
    group="B",
    status="fails",
    comparisons=[
        comparison("fedavg", "supports", difference=-12.0, p_claimed_holm=0.004),
        comparison("moon", "contradicts", difference=3.0, p_against_holm=0.021),
        comparison("feddyn", "contradicts", difference=1.5, p_against_holm=0.03),
    ],
    paper_agrees=False,
)
OPEN = ClaimGroup(
    group="C",
    status="inconclusive",
    comparisons=[
        comparison("fedavg", "supports", difference=-12.0, p_claimed_holm=0.004),
        comparison("moon", "unclear", difference=-1.0, p_claimed_holm=0.31),
        comparison("feddyn", "", reason="1 seed pair(s): a paired test needs two"),
        comparison("slowmo", "", reason="1 seed pair(s): a paired test needs two"),
        comparison("fedprox", "", reason="no finished run of fedprox"),
    ],
)


def test_a_claim_in_words():
    assert statement(result()) == "fedtrip best on algorithm in every column"
    assert statement(result(ORDER, noun="row")) == "order fedtrip, fedavg (best first) on algorithm in row A"
    two = Claim(best="x", within=["A", "B"], quote="q", location="l")
    assert statement(result(two, noun="row")) == "x best on algorithm in rows A, B"
    assert statement(result(noun="table")) == "fedtrip best on algorithm"


def test_the_verdict_over_the_groups():
    assert verdict_text(result(groups=[HOLDS, FAILS, OPEN], status="fails")) == (
        "fails: holds in 1, fails in 1, inconclusive in 1 of 3 columns"
    )
    assert verdict_text(result(groups=[HOLDS, OPEN], status="inconclusive")) == (
        "inconclusive: holds in 1, inconclusive in 1 of 2 columns"
    )
    assert verdict_text(result(groups=[HOLDS, HOLDS], status="holds")) == "holds in all 2 columns"
    assert verdict_text(result(groups=[FAILS], status="fails")) == "fails in 1 column"
    assert verdict_text(result(groups=[OPEN], status="inconclusive", noun="table")) == "inconclusive"
    assert verdict_text(result(groups=[], status="inconclusive")) == "no cell to evaluate"
    reason = "synthetic data is not the paper's data"
    assert verdict_text(result(groups=[HOLDS], status="no_verdict", reason=reason)) == f"no verdict ({reason})"


def test_why_a_group_holds_fails_or_is_inconclusive():
    assert group_detail(HOLDS) == "every comparison significant: largest p_Holm = 0.012"
    assert group_detail(FAILS) == (
        "moon better than fedtrip: Δ +3, p_Holm = 0.021; feddyn better than fedtrip: Δ +1.5, p_Holm = 0.03"
    )
    assert group_detail(OPEN) == (
        "fedtrip vs moon not significant: Δ -1, p_Holm = 0.31; no test of fedtrip vs feddyn, fedtrip vs slowmo "
        "(1 seed pair(s): a paired test needs two); no test of fedtrip vs fedprox (no finished run of fedprox)"
    )
    assert group_detail(ClaimGroup(group="D")) == "nothing to compare with"
    untested = ClaimGroup(group="E", comparisons=[comparison("moon", "unclear")])
    assert group_detail(untested) == "fedtrip vs moon not significant: Δ –, p_Holm = –"


def test_a_claim_its_seeds_cannot_decide_says_so_once():
    assert reach_line("claim 1", result(groups=[HOLDS])) == []
    short = result(groups=[OPEN], unreachable=(3, 0.125, 0.25, 6))
    assert reach_line("claim 1", short) == [
        "claim 1: 3 seed pairs cannot decide it: the smallest one-sided p is 0.12, 0.25 after Holm over its 0 tested "
        "pairs (p < 0.05 needs 6 seeds)."
    ]
    OPEN.comparisons[1].p_claimed = 0.4
    try:
        one = result(groups=[OPEN], unreachable=(1, 0.5, 0.5, 6))
        assert reach_line("claim 2", one) == [
            "claim 2: 1 seed pair cannot decide it: the smallest one-sided p is 0.5, 0.5 after Holm over its 1 "
            "tested pair (p < 0.05 needs 6 seeds)."
        ]
    finally:
        OPEN.comparisons[1].p_claimed = None
    table = claimed_table()
    table.claims[0].unreachable = (3, 0.125, 0.25, 6)
    notes = claim_notes(table)
    assert notes[2] == reach_line("claim 1", table.claims[0])[0] and notes[3].startswith("claim 1, A: holds")
    table.claims[0].reason = "synthetic data is not the paper's data"
    assert not any("cannot decide" in line for line in claim_notes(table))


def claimed_table(reason: str = "", synthetic: bool = False):
    table = small_table()
    table.synthetic = synthetic
    status = "no_verdict" if reason else "fails"
    table.claims = [
        result(groups=[HOLDS, FAILS, OPEN], status=status, reason=reason),
        result(ORDER, groups=[HOLDS], status="no_verdict" if reason else "holds", reason=reason),
    ]
    table.rank_agreement = [
        RankAgreement(axis="algorithm", group="A", n=6, tau=0.6),
        RankAgreement(axis="algorithm", group="B", n=1, reason="fewer than two"),
        RankAgreement(axis="dataset", group="", n=2, tau=-1.0),
    ]
    table.claims.append(
        ClaimResult(claim=Claim(best="mnist", axis="dataset", quote="q", location="l"), axis="dataset", noun="table")
    )
    table.claims[2].reason = reason
    return table


def test_the_lines_under_a_table():
    table = claimed_table()
    assert claim_notes(table) == [
        'claim 1 (§V-B): "FedTrip is best."',
        "claim 1: fedtrip best on algorithm in every column: fails: holds in 1, fails in 1, inconclusive in 1 of 3 "
        "columns.",
        f"claim 1, A: holds ({group_detail(HOLDS)}).",
        f"claim 1, B: fails ({group_detail(FAILS)}); the paper's own values do not rank them so.",
        f"claim 1, C: inconclusive ({group_detail(OPEN)}).",
        'claim 2 (p. 7): "FedTrip beats FedAvg."',
        "claim 2: order fedtrip, fedavg (best first) on algorithm in column A: holds in 1 column.",
        f"claim 2, A: holds ({group_detail(HOLDS)}).",
        'claim 3 (l): "q"',
        "claim 3: mnist best on dataset: no cell to evaluate.",
        *rank_lines(table),
    ]
    assert rank_lines(table) == [
        "rank agreement with the paper on algorithm (Kendall τ-b of our means and the published values, per column): "
        "A +0.60 (n=6), B – (n=1).",
        "rank agreement with the paper on dataset (Kendall τ-b of our means and the published values, per table): "
        "-1.00 (n=2).",
    ]
    assert claim_notes(table)[-2:] == rank_lines(table) and table_notes(table)[-len(claim_notes(table)) :] == (
        claim_notes(table)
    )


def test_without_a_verdict_only_the_sentence_and_why_not():
    table = claimed_table(reason="synthetic data is not the paper's data", synthetic=True)
    assert claim_notes(table) == [
        'claim 1 (§V-B): "FedTrip is best."',
        "claim 1: fedtrip best on algorithm in every column: no verdict (synthetic data is not the paper's data).",
        'claim 2 (p. 7): "FedTrip beats FedAvg."',
        "claim 2: order fedtrip, fedavg (best first) on algorithm in column A: no verdict (synthetic data is not the "
        "paper's data).",
        'claim 3 (l): "q"',
        "claim 3: mnist best on dataset: no verdict (synthetic data is not the paper's data).",
    ]
    assert claim_legend(table) == []
    assert claim_notes(small_table()) == [] and claim_legend(small_table()) == []


LEGEND = (
    "claims: holds = the claimed label is significantly better than each label it is compared with (one-sided "
    "paired test over seeds, Holm-corrected across the claim's comparisons, p < 0.05); fails = one of them is "
    "significantly better than it; inconclusive = neither."
)


def test_the_legend_and_the_summary():
    table = claimed_table()
    assert claim_legend(table) == [LEGEND] and legend_notes(table)[-1] == LEGEND
    assert claims_summary([small_table(), table]) == [
        (
            "Claims",
            [
                "Best accuracy, claim 1: fedtrip best on algorithm in every column: fails: holds in 1, fails in 1, "
                "inconclusive in 1 of 3 columns",
                "Best accuracy, claim 2: order fedtrip, fedavg (best first) on algorithm in column A: holds in 1 column",
                "Best accuracy, claim 3: mnist best on dataset: no cell to evaluate",
            ],
        )
    ]
    assert claims_summary([small_table()]) == []


def test_every_format_shows_the_claims_their_summary_and_legend():
    table = claimed_table()
    first = "Best accuracy, claim 1: fedtrip best on algorithm in every column"
    markdown = render([table], "markdown")
    assert "- Claims\n  - " + first in markdown and f"- {claim_notes(table)[3]}" in markdown
    assert markdown.count(LEGEND) == 1
    latex = render([table], "latex")
    assert "\\item Claims" in latex and "Kendall $\\tau$-b" in latex and "$\\Delta$ +3" in latex
    html = render([table], "html")
    assert "<li>Claims<ul><li>" + first in html and "the paper&#x27;s own values do not rank them so" in html
    document = json.loads(render([table], "json"))
    assert document["tables"][0]["claims"][0]["groups"][1]["status"] == "fails"
    assert document["tables"][0]["rank_agreement"][0]["tau"] == 0.6
    assert claim_notes(table)[1] in document["tables"][0]["notes"]
    console = Console(width=400, record=True)
    for item in render([table], "rich"):
        console.print(item)
    text = console.export_text()
    assert "Claims" in text and first in text and claim_notes(table)[2] in text
