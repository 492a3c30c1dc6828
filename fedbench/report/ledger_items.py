"""What the reproduction ledger is made of: a cause of a difference from the paper (``PAPER/causes.toml``) and a
recipe's evidence (its runs file, the runs in it, the tables rendered from them). Shared by ``evidence.py``, which
reads and renders them, and ``render/ledger.py``, which writes the ledger, so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from fedbench.recipes.schema import Recipe
from fedbench.report.cells import Table

# What a difference between our runs and the paper can be due to (a cause's ``kind`` in PAPER/causes.toml).
CAUSE_KINDS = {
    "bug": "a fedbench bug, fixed (the affected cells were run again)",
    "reading": "a reading of the paper: the spec's default and an alternative, both run",
    "seed-variance": "seed variance",
    "paper-error": "an error in the paper (a printed number at odds with its own other numbers or text)",
    "unexplained": "not explained yet (what was ruled out is said)",
}


class Cause(BaseModel):
    """Why a cell of a table (or a claim in a group of cells) differs from the paper. ``row``/``column`` ``"*"``
    match every row/column; a claim's cause names the claim (its number in the table, from 1) and its group."""

    model_config = ConfigDict(extra="forbid")

    recipe: str
    table: str  # the table view's name (``[[tables]] name``)
    row: str = "*"
    column: str = "*"
    claim: int | None = None
    group: str = "*"  # a claim's group: the column or row it is evaluated in
    kind: str  # one of CAUSE_KINDS
    text: str

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in CAUSE_KINDS:
            raise ValueError(f"unknown kind {value!r}")
        return value

    def covers_cell(self, recipe: str, table: str, row: str, column: str) -> bool:
        return (
            self.claim is None
            and (self.recipe, self.table) == (recipe, table)
            and self.row in ("*", row)
            and self.column in ("*", column)
        )

    def covers_claim(self, recipe: str, table: str, claim: int, group: str) -> bool:
        return (self.recipe, self.table, self.claim) == (recipe, table, claim) and self.group in ("*", group)


@dataclass
class RecipeEvidence:
    """One recipe's exported runs, the recipe, and what was found of them in the rendering."""

    paper: str
    export: Path
    recipe: Recipe
    recipe_file: Path
    runs: list[Any] = field(default_factory=list)  # the exported runs (registry.transfer.RunLine)
    planned: int = 0  # runs the recipe compiles to at its full scale
    stale: int = 0  # exported runs that are not runs of the recipe as it stands (its spec changed since)
    tables: list[Table] = field(default_factory=list)
