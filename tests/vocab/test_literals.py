"""The vocabulary is said once. Outside ``fedbench/vocab/`` no module compares a run's status with a string literal,
passes one as a status or lists statuses by hand, and no module re-declares a group of table figures (a tuple of
figure names, or a figure tested for membership in one): a group is a property of the figures, kept in the
catalogue. A status or figure group spelled by hand in a second module drifts from the catalogue the day one of them
changes (a new status the claim loop never waits for, a figure the report groups wrongly). A single
``figure == "name"`` stays allowed: it is where that figure's own computation or rule is bound to its name.

A per-round diagnostic is never spelled as a string outside ``fedbench/vocab/``: the engine's producers, the report's
drawers and the methods that report one name it by the catalogue's constant (``vocab.diagnostics.WEIGHT_DIVERGENCE``
…), so that the catalogue, ``PRODUCERS`` and ``DRAWERS`` are the only places a diagnostic is added."""

from __future__ import annotations

import ast
from pathlib import Path

from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES
from fedbench.vocab.figures import FIGURE_NAMES
from fedbench.vocab.status import RunStatus

PACKAGE = Path(__file__).resolve().parents[2] / "fedbench"
STATUSES = {s.value for s in RunStatus}
FIGURES = set(FIGURE_NAMES)
DIAGNOSTIC_SET = set(DIAGNOSTIC_NAMES)
# Frozen history: a migration states the schema and values of its own time, never today's catalogue.
FROZEN = ("registry/migrations/",)


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for element in node.elts for s in _strings(element)]
    return []


def _names(node: ast.AST) -> set[str]:
    return {
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute)
    }


def vocabulary_literals(source: str) -> list[tuple[int, str]]:
    """(line, literal) of each status written by hand (compared with a status, given as a ``status`` argument, or
    listed with another status) and of each hand-made group of figures (a tuple of figure names only, or a figure
    tested with ``in`` against literals)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            about = set().union(*(_names(side) for side in sides))
            literals = [s for side in sides for s in _strings(side)]
            if "status" in about:
                found += [(node.lineno, s) for s in literals if s in STATUSES]
            if "figure" in about and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                found += [(node.lineno, s) for s in literals if s in FIGURES]
        elif isinstance(node, ast.keyword) and node.arg == "status":
            found += [(node.value.lineno, s) for s in _strings(node.value) if s in STATUSES]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            listed = _strings(node)
            if sum(s in STATUSES for s in listed) >= 2:
                found += [(node.lineno, s) for s in listed if s in STATUSES]
            if len(listed) >= 2 and set(listed) <= FIGURES:
                found += [(node.lineno, s) for s in listed]
    return sorted(set(found))


def test_no_status_or_figure_literal_outside_the_vocabulary():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("vocab/", *FROZEN)):
            continue
        offenders += [
            f"fedbench/{relative}:{line}: {literal!r}" for line, literal in vocabulary_literals(path.read_text())
        ]
    assert not offenders, "use fedbench.vocab (RunStatus, FIGURES) instead of:\n" + "\n".join(offenders)


def test_the_check_finds_each_kind_of_literal():
    source = """
if run.status == "done": pass
if view.figure in ("best", "final"): pass
registry.finish(7, status="failed")
WAITING = ("pending", "running")
labels = {"done": 1}
"""
    assert vocabulary_literals(source) == [
        (2, "done"),
        (3, "best"),
        (3, "final"),
        (4, "failed"),
        (5, "pending"),
        (5, "running"),
    ]


def diagnostic_literals(source: str) -> list[tuple[int, str]]:
    """(line, literal) of each string constant that is a diagnostic's name (a dict key, a comparison, an argument, a
    stream's key alike); ``__all__`` lists Python names (a function may be called after what it computes)."""
    tree = ast.parse(source)
    exported = {
        id(element)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for element in ast.walk(node.value)
    }
    found = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in DIAGNOSTIC_SET
        and id(node) not in exported
    ]
    return sorted(set(found))


def test_no_diagnostic_name_literal_outside_the_vocabulary():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("vocab/", *FROZEN)):
            continue
        offenders += [
            f"fedbench/{relative}:{line}: {literal!r}" for line, literal in diagnostic_literals(path.read_text())
        ]
    assert not offenders, "use fedbench.vocab.diagnostics' constants (WEIGHT_DIVERGENCE, …) instead of:\n" + "\n".join(
        offenders
    )


def test_the_check_finds_each_diagnostic_literal():
    source = """
if "val_loss" in spec.diagnostics: pass
out = {"weight_divergence": value}
STREAM = "feature_snapshot"
message = f"diagnostic {name!r} is not a val_loss"
reported = frozenset({MIXING_WEIGHTS})
__all__ = ["val_loss"]
"""
    assert diagnostic_literals(source) == [(2, "val_loss"), (3, "weight_divergence"), (4, "feature_snapshot")]
