"""The reproduction ledger (``reproductions/README.md``, written by ``fedbench ledger``): per paper and table, the
cells run at the paper's scale and their verdicts, the machine, the fedbench commits and the wall time of the runs,
and every difference from the paper with its cause (``PAPER/causes.toml``).

A cell counts as run at the paper's scale when all the runs its recipe asks for (the paper's trials) are finished;
cells with fewer are listed as in progress, never counted. Differences are the counted cells not reproduced
(higher, lower, inconclusive) and the claims that do not hold in a group whose cells are all counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from fedbench.data.files import digest_algorithm
from fedbench.report.cells import VERDICTS, Cell, ClaimResult, Table
from fedbench.report.ledger_items import CAUSE_KINDS, Cause, RecipeEvidence
from fedbench.report.render.claim_lines import statement
from fedbench.report.render.notes import margin_words, ours_text, paper_text, verdict_mark

NO_CAUSE = "**no cause recorded** (add one to causes.toml)"
COMMIT_DIGITS = 12
CLAIM_WORDS = {"holds": "holds", "fails": "fails", "inconclusive": "inconclusive", "no_verdict": "no verdict"}


def counted(cell: Cell) -> bool:
    """A cell run at the paper's scale: a published number to compare with, and every run the recipe asks for."""
    return cell.verdict is not None and cell.n > 0 and cell.n >= cell.expected


def in_progress(cell: Cell) -> bool:
    return cell.verdict is not None and 0 < cell.n < cell.expected


def run_tables(item: RecipeEvidence) -> list[Table]:
    """The recipe's tables of runs with a published number in at least one cell."""
    return [t for t in item.tables if t.view.kind == "runs" and any(c.verdict is not None for c in t.cells.values())]


def table_counts(table: Table) -> dict[str, int]:
    cells = [c for c in table.cells.values() if counted(c)]
    out = {status: sum(c.verdict.status == status for c in cells) for status in VERDICTS}  # type: ignore[union-attr]
    everything = table.cells.values()
    not_run = sum(c.verdict is not None and c.n == 0 for c in everything)  # e.g. a data set not at hand
    return {**out, "cells": len(cells), "in_progress": sum(in_progress(c) for c in everything), "not_run": not_run}


def _group_cells(table: Table, result: ClaimResult, group: str) -> list[Cell]:
    cells = table.cells.values()
    if result.noun == "column":
        return [c for c in cells if c.column == group]
    if result.noun == "row":
        return [c for c in cells if c.row == group]
    return list(cells)


def _claim_complete(table: Table, result: ClaimResult, group: str) -> bool:
    """Every cell of the group that has runs planned is run at the paper's scale."""
    cells = [c for c in _group_cells(table, result, group) if c.expected and not c.published_only]
    return bool(cells) and all(c.n >= c.expected for c in cells)


def find_cause(causes: Sequence[Cause], recipe: str, table: str, row: str, column: str) -> Cause | None:
    return next((c for c in causes if c.covers_cell(recipe, table, row, column)), None)


def find_claim_cause(causes: Sequence[Cause], recipe: str, table: str, claim: int, group: str) -> Cause | None:
    return next((c for c in causes if c.covers_claim(recipe, table, claim, group)), None)


def _cause_text(cause: Cause | None) -> str:
    if cause is None:
        return NO_CAUSE
    return f"*{cause.kind}*: {_cell_escape(cause.text)}"


def _interval_text(cell: Cell) -> str:
    """The verdict's evidence: ours − paper and its 95% interval, "−15 [−18, −12]"."""
    verdict = cell.verdict
    if verdict is None or verdict.difference is None:
        return "–"

    def number(value: float | None) -> str:
        return "–" if value is None else f"{value:+.3g}"

    return f"{number(verdict.difference)} [{number(verdict.ci_low)}, {number(verdict.ci_high)}]"


def _cell_escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def _provenance(runs: Sequence[Any]) -> dict[str, Counter[str]]:
    machines: Counter[str] = Counter()
    commits: Counter[str] = Counter()
    data: Counter[str] = Counter()
    for run in runs:
        prov = run.provenance or {}
        machines[f"{prov.get('device', '?')}, torch {prov.get('torch', '?')}, Python {prov.get('python', '?')}"] += 1
        commit = str(prov.get("git_commit") or "unknown")[:COMMIT_DIGITS]
        commits[commit + (" (uncommitted changes)" if prov.get("git_dirty") else "")] += 1
        verified = (prov.get("data") or {}).get("verified")
        data["verified" if verified else "not verified"] += 1
    return {"machines": machines, "commits": commits, "data": data}


def _listing(counter: Counter[str]) -> str:
    return "; ".join(f"{key} ({count} run{'s' if count != 1 else ''})" for key, count in counter.most_common())


def _digests(runs: Sequence[Any]) -> list[str]:
    seen: dict[str, str] = {}
    for run in runs:
        for name, digest in sorted(((run.provenance or {}).get("data") or {}).get("digests", {}).items()):
            seen.setdefault(name, digest)
    return [f"`{name}` {digest_algorithm(digest)} `{digest}`" for name, digest in sorted(seen.items())]


def recipe_section(item: RecipeEvidence, causes: Sequence[Cause]) -> list[str]:
    name, paper = item.recipe.name, item.paper
    wall = sum(float(run.wall_seconds or 0.0) for run in item.runs)
    prov = _provenance(item.runs)
    out = [f"### {item.recipe.title or name}", ""]
    if item.recipe.variant_of:
        out += [
            f"A variant of `{item.recipe.variant_of}`: the same cells under another reading of the paper (the recipe "
            "says which and why); not counted in the headline.",
            "",
        ]
    out += [
        f"Recipe [`recipes/{name}.toml`](../recipes/{name}.toml); runs [`{paper}/{name}.jsonl`]({paper}/{name}.jsonl); "
        f"report [`{paper}/{name}.md`]({paper}/{name}.md), [`{paper}/{name}.html`]({paper}/{name}.html) and its plots "
        f"[`{paper}/{name}/`]({paper}/{name}/).",
        "",
        f"- runs: {len(item.runs)} finished of the {item.planned} the recipe compiles to at its full scale"
        + (f"; {item.stale} exported runs are not runs of the recipe as it stands (not shown)" if item.stale else ""),
        f"- wall time: {_hours(wall)} (the runs' own, summed)",
        f"- machine: {_listing(prov['machines']) or '–'}",
        f"- fedbench commit: {_listing(prov['commits']) or '–'}",
        f"- data: checksums {_listing(prov['data']) or '–'}"
        + (f": {', '.join(_digests(item.runs))}" if item.runs else ""),
        "",
        "| table | cells run | reproduced | higher | lower | inconclusive | not comparable | in progress | not run | margin |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    differences: list[str] = []
    claims: list[str] = []
    for table in run_tables(item):
        counts = table_counts(table)
        out.append(
            f"| {_cell_escape(table.title)} | {counts['cells']} | {counts['reproduced']} | {counts['higher']} | "
            f"{counts['lower']} | {counts['inconclusive']} | {counts['not_comparable']} | {counts['in_progress']} | "
            f"{counts['not_run']} | {_cell_escape(margin_words(table))} |"
        )
        figure = table.view.figure
        for row in table.rows:
            for column in table.columns:
                cell = table.cells.get((row, column))
                if cell is None or not counted(cell) or cell.verdict.status == "reproduced":  # type: ignore[union-attr]
                    continue
                cause = find_cause(causes, name, table.view.name, row, column)
                differences.append(
                    f"| {_cell_escape(table.view.name)} | {_cell_escape(row)} | {_cell_escape(column)} | "
                    f"{_cell_escape(ours_text(cell, figure))} | {_cell_escape(paper_text(cell, figure))} | "
                    f"{_interval_text(cell)} | "
                    f"{cell.verdict.status}{_cell_escape(verdict_mark(cell))} | {_cause_text(cause)} |"  # type: ignore[union-attr]
                )
        for number, result in enumerate(table.claims, start=1):
            for group in result.groups:
                if not _claim_complete(table, result, group.group):
                    continue
                line = f"- {table.view.name}, claim {number} ({statement(result)}), {group.group}: "
                line += CLAIM_WORDS[group.status]
                if group.status != "holds":
                    cause = find_claim_cause(causes, name, table.view.name, number, group.group)
                    line += f": {_cause_text(cause)}"
                claims.append(line)
    if differences:
        out += [
            "",
            "Differences from the paper (cells run at its scale that did not reproduce):",
            "",
            "| table | row | column | ours | paper | ours − paper, 95% interval | verdict | cause |",
            "|---|---|---|---|---|---|---|---|",
            *differences,
        ]
    if claims:
        out += ["", "The paper's claims, in the groups run at its scale:", "", *claims]
    return [*out, ""]


def headline(evidence: Sequence[RecipeEvidence]) -> list[str]:
    out = [
        "| paper | cells run at the paper's scale | reproduced | higher | lower | inconclusive | in progress | runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for paper in dict.fromkeys(e.paper for e in evidence):
        mine = [e for e in evidence if e.paper == paper and not e.recipe.variant_of]  # variants re-run these cells
        totals: Counter[str] = Counter()
        for item in mine:
            for table in run_tables(item):
                totals.update(table_counts(table))
        runs = sum(len(e.runs) for e in mine)
        out.append(
            f"| {paper} | {totals['cells']} | {totals['reproduced']} | {totals['higher']} | {totals['lower']} | "
            f"{totals['inconclusive']} | {totals['in_progress']} | {runs} |"
        )
    return out


def ledger(evidence: Sequence[RecipeEvidence], causes: dict[str, list[Cause]]) -> str:
    out = [
        "# Reproductions",
        "",
        "<!-- Generated by `fedbench ledger` from the runs files below: do not edit. A difference's cause goes in "
        "PAPER/causes.toml; then run `fedbench ledger` again. -->",
        "",
        "Runs trained at a paper's full scale on its real data, exported with `fedbench export` so that they outlive "
        "the machine that trained them, and the reports fedbench renders from them. Everything here but the runs "
        "files and the causes is generated: `fedbench ledger` writes it, `fedbench ledger --check` (run by the test "
        "suite) fails when a committed report or this ledger differs from what fedbench renders from the runs files. The "
        "reports leave out the views computed from a data set rather than from runs (partitions): those depend on "
        "having the data, and `fedbench report --recipe RECIPE --table partition` renders them where it is.",
        "",
        "Read the runs back and render a table yourself:",
        "",
        "```bash",
        "fedbench import reproductions/fedtrip/fedtrip_table4.jsonl --registry sqlite:///registry/repro.db",
        "fedbench report --recipe recipes/fedtrip_table4.toml --registry sqlite:///registry/repro.db",
        "```",
        "",
        "Verdict rules: a cell is *reproduced* when the 90% interval of ours − paper lies inside the equivalence "
        "margin (the table's *margin* column), *higher* or *lower* when the 95% interval lies beyond it, "
        "*inconclusive* otherwise (more seeds would decide it); a cell counts here only when all the runs its recipe "
        "asks for (the paper's trials) are finished (*in progress* otherwise). A figure of the seed-mean curve "
        "(rounds to a target, its costs) is judged by a bootstrap over seeds. Kinds of cause: "
        + "; ".join(f"*{kind}*: {words}" for kind, words in CAUSE_KINDS.items())
        + ".",
        "",
        "## Headline",
        "",
        "Per paper, the cells of its recipes as the spec reads the paper (variants, which run the same cells under "
        "another reading, are reported beside their recipe below, not counted here):",
        "",
        *headline(evidence),
        "",
    ]
    for paper in dict.fromkeys(e.paper for e in evidence):
        out += [f"## {paper}", ""]
        for item in (e for e in evidence if e.paper == paper):
            out += recipe_section(item, causes.get(paper, []))
    return "\n".join(out).rstrip("\n") + "\n"
