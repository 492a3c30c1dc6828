"""The reproduction ledger's rules (``fedbench/report/render/ledger.py``) on hand-built tables: a cell counts only
with every run its recipe asks for and a published value; a variant recipe is reported beside its recipe and not
counted in the paper's headline; a claim's group is reported only when all its cells are run at the paper's scale.
The ledger over real exports is tests/report/test_evidence.py's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from report_fixtures import cell, small_table

from fedbench.report.cells import ClaimGroup, ClaimResult, Verdict
from fedbench.report.render.ledger import _claim_complete, counted, headline, in_progress, table_counts


def judged(status: str, n: int = 3, expected: int = 3):
    c = cell("fedavg", "mnist", [90.0] * n, expected=expected, published=90.0)
    c.verdict = Verdict(status)
    return c


def test_a_cell_counts_with_every_run_and_a_verdict_and_is_in_progress_with_fewer():
    assert counted(judged("higher")) and not in_progress(judged("higher"))
    assert not counted(judged("higher", n=2)) and in_progress(judged("higher", n=2))
    unjudged = cell("fedavg", "mnist", [90.0] * 3)
    assert not counted(unjudged) and not in_progress(unjudged)  # no published value: nothing to reproduce


def evidence_of(recipe_name: str, statuses: list[str], variant_of: str | None = None):
    table = small_table()
    table.view = table.view.model_copy(update={"kind": "runs"})
    table.cells = {(f"r{i}", "mnist"): judged(s) for i, s in enumerate(statuses)}
    recipe = SimpleNamespace(name=recipe_name, title=recipe_name, variant_of=variant_of)
    return SimpleNamespace(paper="p", recipe=recipe, tables=[table], runs=[object()] * len(statuses), export=Path())


def test_the_headline_counts_a_papers_recipes_not_their_variants():
    base = evidence_of("t1", ["reproduced", "lower", "inconclusive"])
    never = cell("fedavg", "svhn", [], expected=3, published=50.0)  # a published cell without a run (no data)
    never.verdict = Verdict("not_comparable", reason="no finished run")
    variant = evidence_of("t1_other_reading", ["reproduced", "reproduced", "reproduced"], variant_of="t1")
    base.tables[0].cells[("never", "svhn")] = never
    assert table_counts(base.tables[0]) == {
        "reproduced": 1,
        "higher": 0,
        "lower": 1,
        "inconclusive": 1,
        "not_comparable": 0,
        "cells": 3,
        "in_progress": 0,
        "not_run": 1,
    }
    rows = headline([base, variant])
    assert rows[2] == "| p | 3 | 1 | 0 | 1 | 1 | 0 | 3 |"


def test_a_claim_group_is_reported_when_all_its_cells_are_run():
    table = small_table()
    table.cells[("fedavg", "mnist")].expected = 3
    result = ClaimResult(claim=None, axis="algorithm", noun="column", groups=[ClaimGroup("mnist")])  # type: ignore[arg-type]
    assert not _claim_complete(table, result, "mnist")  # fed_prox has 1 of its 3 seeds on mnist
    table.cells[("fed_prox", "mnist")] = cell("fed_prox", "mnist", [88.0, 87.0, 86.0])
    assert _claim_complete(table, result, "mnist")
    assert not _claim_complete(table, result, "svhn")  # no cell in that group


def test_each_data_file_is_named_with_the_algorithm_of_its_digest():
    from fedbench.report.render.ledger import _digests

    md5, sha256 = "68e3f8846a6bd62f0c9bf841c0d9eacc", "ab" * 32
    runs = [
        SimpleNamespace(provenance={"data": {"digests": {"organamnist.npz": md5}}}),
        SimpleNamespace(provenance={"data": {"digests": {"camelyon.tar": sha256, "organamnist.npz": md5}}}),
        SimpleNamespace(provenance=None),
    ]
    assert _digests(runs) == [f"`camelyon.tar` sha256 `{sha256}`", f"`organamnist.npz` md5 `{md5}`"]
