"""The papers' claims evaluated on our runs (``fedbench/report/claims.py``): the pairs a claim makes, the one-sided
test in the figure's better direction, Holm over the claim's comparisons, the verdict per group and over them, "no
verdict" for synthetic data and other scales, whether the paper's own values agree, and Kendall's τ-b between our
means and the published values. Unit tests on hand-built tables (the paired test replaced where its p is the
subject), then a registry of real-like runs (full scale, not synthetic) where holds, fails and inconclusive arise
from the stored curves through ``build_table``."""

from __future__ import annotations

import math

import pytest
from report_fixtures import cell

from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.views import Claim, TableView
from fedbench.registry import Registry
from fedbench.report import claims as claims_module
from fedbench.report.cells import Cell, Comparison, Table
from fedbench.report.claims import (
    ClaimComparison,
    ClaimGroup,
    ClaimResult,
    RankAgreement,
    cell_sign,
    claim_cells,
    claim_pairs,
    evaluate_claim,
    evaluate_claims,
    kendall_tau,
    no_verdict_reason,
    one_sided,
    paper_agrees,
    rank_agreement,
    unreachable_claim,
)
from fedbench.report.stats import holm
from fedbench.report.table import build_table

BEST = Claim(best="c", quote="C is best.", location="§5")


def table(cells: list[Cell], claims: list[Claim] = (BEST,), synthetic=False, scale="full", **view) -> Table:
    """A table of ``cells`` (rows: algorithm, columns: dataset, in the order the cells come) declaring ``claims``."""
    rows = list(dict.fromkeys(c.row for c in cells))
    columns = list(dict.fromkeys(c.column for c in cells))
    view = TableView(name="t", rows=["algorithm"], columns=["dataset"], claims=list(claims), **view)
    return Table("r", "p", view, scale, synthetic, rows, columns, {(c.row, c.column): c for c in cells}, "%")


def fake_tests(monkeypatch, results: dict[tuple[str, str, str], tuple[float | None, float]]) -> list[tuple]:
    """Replace the paired test: (better, worse, group) → (two-sided p, difference); the calls it got."""
    calls = []

    def compare(a: Cell, b: Cell, label: str, figure: str) -> Comparison:
        calls.append((a.row, b.row, label, figure))
        p, difference = results[(a.row, b.row, a.column)]
        return Comparison(baseline=label, pairs=3, difference=difference, p_value=p, reason="" if p else "why")

    monkeypatch.setattr(claims_module, "compare_cell", compare)
    return calls


# ------------------------------------------------------------------------------------------- pieces
@pytest.mark.parametrize(
    "difference, sign, expected",
    [(2.0, 1, 0.02), (-2.0, 1, 0.98), (2.0, -1, 0.98), (-2.0, -1, 0.02), (0.0, 1, 0.98), (0.0, -1, 0.98)],
)
def test_the_one_sided_p_is_half_the_two_sided_one_in_the_direction_the_difference_points(difference, sign, expected):
    assert one_sided(0.04, difference, sign) == pytest.approx(expected, abs=1e-15)


def test_no_verdict_on_synthetic_data_or_another_scale():
    assert no_verdict_reason(True, "full") == "synthetic data is not the paper's data"
    assert no_verdict_reason(True, "smoke") == "synthetic data is not the paper's data"
    assert no_verdict_reason(False, "smoke") == "scale 'smoke' is not the paper's setting"
    assert no_verdict_reason(False, "full") == ""


def test_a_best_claim_pairs_the_best_with_each_other_label_and_an_order_each_label_with_the_next():
    assert claim_pairs(BEST, ["a", "c", "b"]) == [("c", "a"), ("c", "b")]
    order = Claim(order=["a", "b", "c"], quote="q", location="l")
    assert claim_pairs(order, ["c", "b", "a", "d"]) == [("a", "b"), ("b", "c")]


def test_groups_are_the_other_keys_labels_in_table_order_without_added_quoted_or_static_cells():
    cells = [
        cell("a", "x", [1.0, 2.0]),
        cell("c", "x", [1.0, 2.0]),
        cell("a", "y", [1.0, 2.0]),
        cell("d", "x", [1.0, 2.0], added=True),
        cell("d", "y", [1.0, 2.0]),
        cell("e", "y", [1.0, 2.0], published_only=True),
        cell("f", "y", [1.0, 2.0], static=True),
        Cell(row="g", column="y", labels={"dataset": "y"}, expected=1),  # no label on the axis
        Cell(row="h", column="x", labels={"algorithm": "h"}, expected=1),  # none on the group's key
        cell("h", "y", [1.0, 2.0]),
    ]
    built = table(cells)
    groups = claim_cells(built, "algorithm", ["dataset"])
    assert list(groups) == ["x", "y"]
    assert {g: list(members) for g, members in groups.items()} == {"x": ["a", "c"], "y": ["a", "d", "h"]}
    assert groups["x"]["c"] is built.cells[("c", "x")]
    assert list(claim_cells(built, "algorithm", [])) == [""]
    swapped = claim_cells(built, "dataset", ["algorithm"])
    assert {g: list(m) for g, m in swapped.items()} == {"a": ["x", "y"], "c": ["x"], "d": ["y"], "h": ["y"]}


def test_the_better_side_of_a_cell_follows_its_metric_and_the_figure():
    assert cell_sign(TableView(name="t", figure="best"), cell("a", "x", [1.0])) == 1
    assert cell_sign(TableView(name="t", figure="rounds_to_target", target=1), cell("a", "x", [1.0])) == -1
    assert cell_sign(TableView(name="t", figure="best", metric="test_loss"), cell("a", "x", [1.0])) == -1
    view = TableView(name="t", figure="final", metrics={"Loss": "test_loss", "Acc": "test_acc"})
    loss, acc = cell("a", "x", [1.0]), cell("a", "x", [1.0])
    loss.labels["metric"], acc.labels["metric"] = "Loss", "Acc"
    assert cell_sign(view, loss) == -1 and cell_sign(view, acc) == 1
    assert cell_sign(view, cell("a", "x", [1.0])) == 1  # a cell without the pseudo-axis: the view's metric


def test_the_papers_own_values_agree_only_when_they_rank_every_pair_strictly_as_claimed():
    view = TableView(name="t", figure="best")
    cells = {
        "c": cell("c", "x", [1.0], published=90.0),
        "a": cell("a", "x", [1.0], published=80.0),
        "b": cell("b", "x", [1.0], published=90.0),
        "s": cell("s", "x", [1.0], published=">200"),
        "n": cell("n", "x", [1.0]),
    }

    def pairs(*worse: str) -> list[ClaimComparison]:
        return [ClaimComparison(better="c", worse=w) for w in worse]

    assert paper_agrees(view, pairs("a"), cells) is True
    assert paper_agrees(view, pairs("a", "b"), cells) is False  # a tie is not a rank
    assert paper_agrees(view, pairs("a", "s"), cells) is None
    assert paper_agrees(view, pairs("n"), cells) is None
    assert paper_agrees(view, pairs("missing"), cells) is None
    assert paper_agrees(view, pairs("s", "b"), cells) is False  # a contradiction outweighs a missing number
    assert paper_agrees(view, [ClaimComparison(better="a", worse="c")], cells) is False
    rounds = TableView(name="t", figure="rounds_to_target", target=1.0)
    assert paper_agrees(rounds, [ClaimComparison(better="a", worse="c")], cells) is True  # fewer rounds are better
    assert paper_agrees(view, [], cells) is True


def test_kendall_tau_is_the_tie_corrected_tau_b():
    assert kendall_tau([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == pytest.approx(1.0)
    assert kendall_tau([1.0, 2.0, 3.0], [30.0, 20.0, 10.0]) == pytest.approx(-1.0)
    # 5 concordant pairs of 6, one tied in the first ranking: τ-b = 5 / √(5·6), where τ-a would be 5/6
    assert kendall_tau([1.0, 2.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(5 / math.sqrt(30), abs=1e-12)
    assert kendall_tau([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


# ------------------------------------------------------------------------------------------- verdicts
def three_groups() -> list[Cell]:
    """Columns x, y, z of methods c (claimed), a and b, with published values; ours: the published value ± 1 over
    three seeds (60 ± 1 where the paper prints none)."""
    out = []
    for column, published in (("x", (90, 80, 70)), ("y", (90, 95, 70)), ("z", (None, 80, 70))):
        for row, value in zip("cab", published):
            mean = 60.0 if value is None else float(value)
            out.append(cell(row, column, [mean - 1, mean, mean + 1], published=value))
    return out


# (better, worse, column) → (two-sided p, better − worse): x holds, y fails (a is better), z inconclusive
TESTS = {
    ("c", "a", "x"): (0.004, 5.0),
    ("c", "b", "x"): (0.002, 6.0),
    ("c", "a", "y"): (0.006, -4.0),
    ("c", "b", "y"): (0.001, 3.0),
    ("c", "a", "z"): (0.5, 1.0),
    ("c", "b", "z"): (None, 2.0),
}


def test_holds_fails_and_inconclusive_come_from_one_sided_holm_corrected_tests(monkeypatch):
    calls = fake_tests(monkeypatch, TESTS)
    result = evaluate_claim(table(three_groups()), BEST)
    assert calls == [(b, w, w, "best") for b, w, _ in TESTS]
    assert (result.axis, result.noun, result.reason) == ("algorithm", "column", "")
    assert [(g.group, g.status, g.paper_agrees) for g in result.groups] == [
        ("x", "holds", True),
        ("y", "fails", False),
        ("z", "inconclusive", None),
    ]
    comparisons = [c for g in result.groups for c in g.comparisons]
    tested = comparisons[:5]
    claimed = [0.002, 0.001, 1 - 0.003, 0.0005, 0.25]
    assert [c.p_claimed for c in tested] == pytest.approx(claimed, abs=1e-15)
    assert [c.p_claimed_holm for c in tested] == pytest.approx(holm(claimed), abs=1e-15)
    assert [c.p_against_holm for c in tested] == pytest.approx(holm([1 - p for p in claimed]), abs=1e-15)
    assert [c.outcome for c in comparisons] == ["supports", "supports", "contradicts", "supports", "unclear", ""]
    last = comparisons[5]
    assert (last.p_value, last.p_claimed, last.p_claimed_holm, last.reason, last.difference) == (
        None,
        None,
        None,
        "why",
        2.0,
    )
    assert (tested[0].better, tested[0].worse, tested[0].pairs, tested[0].difference, tested[0].p_value) == (
        "c",
        "a",
        3,
        5.0,
        0.004,
    )
    assert result.status == "fails"
    assert result.counts() == {"holds": 1, "fails": 1, "inconclusive": 1, "no_verdict": 0, "groups": 3}


def test_the_correction_runs_over_every_comparison_of_the_claim_at_alpha(monkeypatch):
    # four comparisons of one-sided p 0.012: significant alone, and after Holm (×4 = 0.048 < 0.05) only just
    fake_tests(monkeypatch, {(b, w, col): (0.024, 1.0) for b, w, col in TESTS if col != "z"})
    result = evaluate_claim(table([c for c in three_groups() if c.column != "z"]), BEST)
    assert [g.status for g in result.groups] == ["holds", "holds"] and result.status == "holds"
    assert result.groups[0].comparisons[0].p_claimed_holm == pytest.approx(0.048)
    strict = evaluate_claim(table([c for c in three_groups() if c.column != "z"]), BEST, alpha=0.048)
    assert strict.status == "inconclusive"  # p_Holm must be below alpha, not equal to it
    fake_tests(monkeypatch, {(b, w, col): (0.024, -1.0) for b, w, col in TESTS if col != "z"})
    against = evaluate_claim(table([c for c in three_groups() if c.column != "z"]), BEST)
    assert against.status == "fails" and against.groups[0].comparisons[0].p_against_holm == pytest.approx(0.048)
    assert evaluate_claim(table([c for c in three_groups() if c.column != "z"]), BEST, alpha=0.048).status == (
        "inconclusive"
    )


def test_within_limits_the_groups_and_an_order_claim_tests_each_label_against_the_next(monkeypatch):
    results = {**TESTS, ("a", "b", "y"): (0.01, 25.0), ("c", "a", "y"): (0.01, 5.0)}
    fake_tests(monkeypatch, results)
    claim = Claim(order=["c", "a", "b"], within=["y"], quote="q", location="l")
    result = evaluate_claim(table(three_groups()), claim)
    assert [g.group for g in result.groups] == ["y"]
    assert [(c.better, c.worse) for c in result.groups[0].comparisons] == [("c", "a"), ("a", "b")]
    assert result.groups[0].status == "holds" and result.status == "holds"
    assert result.groups[0].paper_agrees is False  # the paper prints a (95) above c (90)


def test_a_group_without_a_finished_run_or_another_label_is_inconclusive(monkeypatch):
    fake_tests(monkeypatch, {("c", "a", "x"): (0.001, 5.0)})
    empty = Cell(row="b", column="x", labels={"algorithm": "b", "dataset": "x"}, expected=3)
    result = evaluate_claim(table([cell("c", "x", [1.0, 2.0]), cell("a", "x", [1.0, 2.0]), empty]), BEST)
    assert [(c.worse, c.outcome, c.reason) for c in result.groups[0].comparisons] == [
        ("a", "supports", ""),
        ("b", "", "no finished run of b"),
    ]
    assert result.groups[0].status == "inconclusive" and result.status == "inconclusive"
    missing = evaluate_claim(table([cell("a", "x", [1.0, 2.0])]), BEST)
    assert [(c.better, c.worse, c.reason) for c in missing.groups[0].comparisons] == [
        ("c", "a", "no finished run of c")
    ]
    alone = evaluate_claim(table([cell("c", "x", [1.0, 2.0])]), BEST)
    assert alone.groups[0].comparisons == [] and alone.groups[0].status == "inconclusive"
    none = evaluate_claim(table([cell("c", "x", [1.0, 2.0])]), Claim(best="c", within=["q"], quote="q", location="l"))
    assert none.groups == [] and none.status == "inconclusive"


@pytest.mark.parametrize(
    "synthetic, scale, reason",
    [
        (True, "full", "synthetic data is not the paper's data"),
        (False, "smoke", "scale 'smoke' is not the paper's setting"),
    ],
)
def test_synthetic_data_and_other_scales_give_no_verdict(monkeypatch, synthetic, scale, reason):
    fake_tests(monkeypatch, TESTS)
    result = evaluate_claim(table(three_groups(), synthetic=synthetic, scale=scale), BEST)
    assert (result.status, result.reason) == ("no_verdict", reason)
    assert [g.status for g in result.groups] == ["no_verdict"] * 3
    assert result.counts()["no_verdict"] == 3


def test_every_declared_claim_is_evaluated_and_carried_by_the_tables_json(monkeypatch):
    fake_tests(monkeypatch, TESTS)
    order = Claim(order=["c", "b"], within=["x"], quote="q2", location="l2")
    built = table(three_groups(), claims=[BEST, order])
    built.claims, built.rank_agreement = evaluate_claims(built), rank_agreement(built)
    assert [r.claim for r in built.claims] == [BEST, order]
    document = built.to_json()
    first = document["claims"][0]
    assert {k: first[k] for k in ("kind", "labels", "axis", "within", "quote", "location", "status", "reason")} == {
        "kind": "best",
        "labels": ["c"],
        "axis": "algorithm",
        "within": [],
        "quote": "C is best.",
        "location": "§5",
        "status": "fails",
        "reason": "",
    }
    assert first["counts"] == {"holds": 1, "fails": 1, "inconclusive": 1, "no_verdict": 0, "groups": 3}
    # the fake tests say 3 seed pairs each: no real test over 3 could decide the claim's 5 tested pairs
    assert first["unreachable"] == {"pairs": 3, "smallest_p": 0.125, "smallest_p_holm": 0.625, "pairs_needed": 7}
    assert first["groups"][0]["group"] == "x" and first["groups"][0]["status"] == "holds"
    assert first["groups"][0]["paper_agrees"] is True
    assert first["groups"][1]["comparisons"][0] == {
        "better": "c",
        "worse": "a",
        "pairs": 3,
        "difference": -4.0,
        "p_value": 0.006,
        "p_claimed": pytest.approx(0.997),
        "p_claimed_holm": pytest.approx(0.997),
        "p_against_holm": pytest.approx(0.015),
        "outcome": "contradicts",
        "reason": "",
    }
    assert document["claims"][1]["kind"] == "order" and document["claims"][1]["labels"] == ["c", "b"]
    assert document["rank_agreement"][0] == {
        "axis": "algorithm",
        "group": "x",
        "n": 3,
        "tau": pytest.approx(1.0),
        "variant": "tau-b",
        "reason": "",
    }
    assert len(document["rank_agreement"]) == 3  # one axis: once, whatever the number of claims on it


def test_a_claim_its_seeds_cannot_decide_says_how_far_they_fall_short():
    # one-sided: half the sign-flip test's smallest two-sided p, 2^(1−n); Holm multiplies it by the tested pairs
    assert unreachable_claim([3] * 5) == (3, 0.125, 0.625, 7)  # 7 pairs: 5 / 128 = 0.039 < 0.05
    assert unreachable_claim([3, 2]) == (3, 0.125, 0.25, 6)  # the most pairs of any test decides the smallest p
    assert unreachable_claim([5] * 36) == (5, 0.03125, 1.0, 10)  # FedTR: 5 runs, 36 pairs; 36 / 1024 < 0.05
    assert unreachable_claim([10] * 30) is None  # FedTrip's 10 trials over Table IV's 30 pairs: 30 / 1024 < 0.05
    assert unreachable_claim([5]) is None and unreachable_claim([5], alpha=0.04) is None
    assert unreachable_claim([5], alpha=0.03125) == (5, 0.03125, 0.03125, 6)  # p must fall below alpha
    assert unreachable_claim([4]) == (4, 0.0625, 0.0625, 5)
    assert unreachable_claim([]) is None


# ------------------------------------------------------------------------------------------- rank agreement
def test_rank_agreement_per_group_of_each_claimed_axis_over_labels_with_both_values():
    cells = three_groups()
    cells[4].mean = None  # a in y: no value of ours (e.g. never reached the target)
    built = table(cells, claims=[BEST, Claim(best="x", axis="dataset", quote="q", location="l")])
    entries = rank_agreement(built)
    assert [(e.axis, e.group, e.n) for e in entries] == [
        ("algorithm", "x", 3),
        ("algorithm", "y", 2),
        ("algorithm", "z", 2),
        ("dataset", "c", 2),
        ("dataset", "a", 2),
        ("dataset", "b", 3),
    ]
    assert [e.tau for e in entries[:3]] == [pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0)]
    for c in cells:  # our means all equal: one ranking all ties, τ undefined
        c.mean = 2.0 if c.mean is not None else None
    assert [(e.tau, e.reason) for e in rank_agreement(table(cells))] == [(None, "one ranking is all ties")] * 3
    for i, c in enumerate(cells):
        if c.mean is not None:
            c.mean = float(i)
    x = rank_agreement(table(cells))[0]
    assert (x.tau, x.reason, x.variant) == (pytest.approx(-1.0), "", "tau-b")  # ours c < a < b, the paper's c > a > b
    lone = rank_agreement(table([cell("c", "x", [1.0, 2.0], published=3.0), cell("a", "x", [1.0], published="n/a")]))
    assert (lone[0].n, lone[0].tau, lone[0].reason) == (
        1,
        None,
        "fewer than two labels with both our mean and a published number",
    )
    assert rank_agreement(table(cells, claims=[])) == []


def test_result_types_serialise_every_field():
    assert ClaimComparison(better="c", worse="a").to_json() == {
        "better": "c",
        "worse": "a",
        "pairs": 0,
        "difference": None,
        "p_value": None,
        "p_claimed": None,
        "p_claimed_holm": None,
        "p_against_holm": None,
        "outcome": "",
        "reason": "",
    }
    fresh = ClaimResult(claim=BEST, axis="algorithm", noun="column")
    assert (fresh.status, fresh.reason, fresh.groups, fresh.unreachable) == ("inconclusive", "", [], None)
    assert fresh.to_json()["unreachable"] is None
    assert (ClaimGroup(group="g").status, ClaimGroup(group="g").paper_agrees) == ("inconclusive", None)
    group = ClaimGroup(group="x", status="holds", comparisons=[ClaimComparison(better="c", worse="a")])
    assert group.to_json()["comparisons"] == [ClaimComparison(better="c", worse="a").to_json()]
    assert set(group.to_json()) == {"group", "status", "comparisons", "paper_agrees"}
    assert RankAgreement(axis="a", group="g", n=0).to_json() == {
        "axis": "a",
        "group": "g",
        "n": 0,
        "tau": None,
        "variant": "tau-b",
        "reason": "",
    }
    result = ClaimResult(claim=Claim(order=["a", "b"], quote="q", location="l"), axis="x", noun="row")
    assert result.labels == ["a", "b"] and result.to_json()["groups"] == []


# ------------------------------------------------------------------------------------------- real-like runs
SEEDS = list(range(8))  # 8 seed pairs: an exact test's smallest one-sided p is 1/256, enough for Holm over 6
RECIPE = f"""
paper = "testpaper"
name = "claims"
seeds = {SEEDS}

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "iid"
num_clients = 4
clients_per_round = 2
rounds = 2
optimizer = {{ lr = 0.1 }}

[matrix]
algorithm = ["fedavg", "fedprox", "fedtrip"]
local_epochs = [1, 2, 3]

[scale.smoke]
rounds = 1

[[tables]]
name = "acc"
rows = ["algorithm"]
columns = ["local_epochs"]
figure = "best"

[tables.published]
fedtrip = {{ "1" = 90, "2" = 95 }}
fedprox = {{ "1" = 80, "2" = 85 }}
fedavg = {{ "1" = 70, "2" = 75, "3" = 60 }}

[[tables.claims]]
best = "fedtrip"
quote = "FedTrip is best in every setting."
location = "§5, p. 7"

[[tables.claims]]
order = ["fedprox", "fedavg"]
within = ["2"]
quote = "FedProx beats FedAvg with two local epochs."
location = "§5, p. 8"
"""


def accuracy(algorithm: str, epochs: int, seed: int) -> float:
    """The best test accuracy of a run: with 1 epoch fedtrip > fedprox > fedavg, with 2 fedprox > fedtrip > fedavg,
    with 3 fedtrip and fedprox alternate by seed (no difference on average), both above fedavg."""
    noise = {"fedavg": 0.001 * (seed % 3), "fedprox": 0.002 * ((3 * seed) % 4), "fedtrip": 0.003 * ((7 * seed) % 5)}
    level = {
        1: {"fedtrip": 0.9, "fedprox": 0.8, "fedavg": 0.7},
        2: {"fedtrip": 0.85, "fedprox": 0.95, "fedavg": 0.75},
        3: {"fedtrip": 0.8 + 0.02 * (-1) ** seed, "fedprox": 0.8 - 0.02 * (-1) ** seed, "fedavg": 0.6},
    }
    return level[epochs][algorithm] + noise[algorithm]


@pytest.fixture
def stored(write_recipe, registry_url):
    """The recipe's 72 runs finished in a registry, each with a two-round curve whose best is ``accuracy``."""
    recipe = load_recipe(write_recipe(RECIPE))
    registry = Registry(registry_url)
    planned = expand(recipe)
    registry.ensure_runs([p.registry_entry() for p in planned])
    for p in planned:
        run_id = registry.claim(p.spec_hash)
        best = accuracy(p.spec.algorithm, p.spec.local_epochs, p.spec.seed)
        for r, acc in enumerate([0.1, best], 1):
            registry.log_round(
                run_id, RoundRecord(round=r, train_loss=0.1, wall_seconds=1, bytes_up=1, bytes_down=1, test_acc=acc)
            )
        registry.finish(run_id, "done")
    return recipe, registry


def test_real_like_runs_hold_fail_and_leave_a_claim_inconclusive(stored):
    recipe, registry = stored
    built = build_table(recipe, recipe.tables[0], registry)
    assert [c.n for c in built.cells.values()] == [8] * 9
    best, order = built.claims
    assert [(g.group, g.status) for g in best.groups] == [("1", "holds"), ("2", "fails"), ("3", "inconclusive")]
    assert best.status == "fails" and order.status == "holds"
    assert [(c.worse, c.outcome) for c in best.groups[1].comparisons] == [
        ("fedavg", "supports"),
        ("fedprox", "contradicts"),
    ]
    assert [(c.worse, c.outcome) for c in best.groups[2].comparisons] == [
        ("fedavg", "supports"),
        ("fedprox", "unclear"),
    ]
    against_fedprox = best.groups[1].comparisons[1]
    assert against_fedprox.difference == pytest.approx(-10.0, abs=1.5) and against_fedprox.pairs == 8
    assert [g.paper_agrees for g in best.groups] == [True, True, None]
    assert [(c.better, c.worse) for c in order.groups[0].comparisons] == [("fedprox", "fedavg")]
    taus = [(e.group, e.n, e.tau) for e in built.rank_agreement]
    assert taus == [("1", 3, pytest.approx(1.0)), ("2", 3, pytest.approx(1 / 3)), ("3", 1, None)]
    assert built.to_json()["claims"][0]["status"] == "fails"
    assert best.unreachable is None and order.unreachable is None  # 8 pairs: 6 / 256 < 0.05


@pytest.mark.parametrize(
    "scale, synthetic, reason",
    [
        ("smoke", False, "scale 'smoke' is not the paper's setting"),
        ("full", True, "synthetic data is not the paper's data"),
    ],
)
def test_the_same_recipe_on_another_scale_or_synthetic_data_gives_no_verdict(stored, scale, synthetic, reason):
    recipe, registry = stored
    built = build_table(recipe, recipe.tables[0], registry, scale=scale, synthetic=synthetic)
    assert [(c.status, c.reason) for c in built.claims] == [("no_verdict", reason)] * 2
