"""Recompute every finished run's stored summary (``runs.summary``) from its stored curve.

Until this revision a worker summarised the test-accuracy curve, stored as fractions in [0, 1], against the
recipe's ``targets``, which are in % (``targets = [80, 90]``): no fraction reaches 80, so every stored
``rounds_to_target`` was null, while report tables (which recompute from the curves) were right. The summariser
now converts the curve with ``fedbench.vocab.metrics.to_percent`` before comparing; this revision runs it over
each ``done`` or ``diverged`` run's stored curve of ``SUMMARY_METRIC``, so ``show``, ``runs --json`` and ``export``
agree with ``report``. The targets are the ones the run was summarised with (the keys of its stored
``rounds_to_target``: "80", "90"), else the run's ``targets`` column. Only summaries that change are written; the
curves and every other column are left as they are. Unfinished runs have no summary yet: their worker writes it.

Revision ID: 0005_recomputed_summaries
Revises: 0004_round_diagnostics
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005_recomputed_summaries"
down_revision = "0004_round_diagnostics"
branch_labels = None
depends_on = None

FINISHED = ("done", "diverged")


def _json(value: Any) -> Any:
    """A JSON column's value as Python (SQLite may hand back the text)."""
    return json.loads(value) if isinstance(value, str) else value


def summary_targets(summary: dict[str, Any], targets: list[float] | None) -> list[float]:
    """The targets (in %) a stored summary was computed with: its ``rounds_to_target`` keys, else the run's
    ``targets`` column."""
    keys = (summary or {}).get("rounds_to_target")
    if isinstance(keys, dict) and keys:
        return [float(key) for key in keys]
    return [float(t) for t in targets or []]


def same_summary(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal summaries, a NaN (a diverged run's figure) equal to a NaN."""

    def nan_free(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: nan_free(item) for key, item in value.items()}
        return "NaN" if isinstance(value, float) and math.isnan(value) else value

    return nan_free(a) == nan_free(b)


def upgrade() -> None:
    # local: Alembic imports every revision script to find the ones to run; only an upgrade needs the summariser
    from fedbench.curves import summarize
    from fedbench.vocab.metrics import METRICS, SUMMARY_METRIC

    column = METRICS[SUMMARY_METRIC].column
    assert column is not None  # the summary metric is a rounds column (test_acc)
    connection = op.get_bind()
    runs = sa.table(
        "runs",
        sa.column("id", sa.Integer),
        sa.column("status", sa.String),
        sa.column("targets", sa.JSON),
        sa.column("summary", sa.JSON),
    )
    rounds = sa.table("rounds", sa.column("run_id", sa.Integer), sa.column("round", sa.Integer), sa.column(column))
    value = rounds.c[column]
    finished = connection.execute(sa.select(runs).where(runs.c.status.in_(FINISHED)).order_by(runs.c.id)).all()
    for run in finished:
        stored = _json(run.summary) or {}
        curve = connection.execute(
            sa.select(rounds.c.round, value)
            .where(rounds.c.run_id == run.id, value.is_not(None))
            .order_by(rounds.c.round)
        ).all()
        recomputed = summarize([(r, v) for r, v in curve], summary_targets(stored, _json(run.targets)))
        if not same_summary(stored, recomputed):
            connection.execute(sa.update(runs).where(runs.c.id == run.id).values(summary=recomputed))


def downgrade() -> None:
    raise NotImplementedError("fedbench registries only move forward; restore a backup to go back")
