"""The registry as fedbench 0.1.0 wrote it: tables ``runs`` and ``rounds``.

A registry created before fedbench used Alembic already has these tables (perhaps from a version that
lacked some nullable columns): the columns it lacks are added, and nothing else changes.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _tables(metadata: sa.MetaData) -> list[sa.Table]:
    # Written out as in 0.1.0 (not imported from fedbench.registry.tables, which moves on with later revisions).
    runs = sa.Table(
        "runs",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("spec_hash", sa.String(32), nullable=False, unique=True, index=True),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("paper", sa.String(64), index=True),
        sa.Column("recipe", sa.String(128)),
        sa.Column("algorithm", sa.String(64), nullable=False),
        sa.Column("dataset", sa.String(64), nullable=False),
        sa.Column("seed", sa.Integer, nullable=False),
        sa.Column("scale", sa.String(32), nullable=False),
        sa.Column("synthetic", sa.Boolean, nullable=False),
        sa.Column("targets", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("error", sa.Text),
        sa.Column("rounds_done", sa.Integer, nullable=False),
        sa.Column("diverged_round", sa.Integer),
        sa.Column("worker", sa.String(128)),
        sa.Column("heartbeat_at", sa.DateTime),
        sa.Column("created_at", sa.DateTime),
        sa.Column("started_at", sa.DateTime),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("wall_seconds", sa.Float),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("provenance", sa.JSON, nullable=False),
    )
    rounds = sa.Table(
        "rounds",
        metadata,
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("round", sa.Integer, primary_key=True),
        *(
            sa.Column(name, sa.Float)
            for name in (
                "test_acc",
                "test_loss",
                "train_loss",
                "personal_mean",
                "personal_weighted_mean",
                "personal_std",
            )
        ),
        sa.Column("personal_per_client", sa.JSON),
        sa.Column("personal_val_mean", sa.Float),
        sa.Column("personal_val_per_client", sa.JSON),
        sa.Column("personal_metrics", sa.JSON),
        *(sa.Column(name, sa.Float) for name in ("finetune_mean", "finetune_weighted_mean", "finetune_std")),
        sa.Column("finetune_per_client", sa.JSON),
        sa.Column("wall_seconds", sa.Float),
        sa.Column("bytes_up", sa.Integer),
        sa.Column("bytes_down", sa.Integer),
    )
    return [runs, rounds]


def upgrade() -> None:
    connection = op.get_bind()
    inspector = sa.inspect(connection)
    metadata = sa.MetaData()
    for table in _tables(metadata):
        if not inspector.has_table(table.name):
            table.create(connection)
            continue
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present:  # columns added during 0.1 development are all nullable
                op.add_column(table.name, sa.Column(column.name, column.type, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("fedbench registries only move forward; restore a backup to go back")
