"""Store per-round diagnostics (``rounds.diagnostics``, a JSON object ``{name: value}``).

A spec that asks for diagnostics (``RunSpec.diagnostics``: layer-wise weight divergence, validation loss, mixing
weights; ``fedbench/vocab/diagnostics.py``) records them with the rounds it diagnoses, in the round's own row: one
insert per round as before, dropped with the round when a resumed run redoes it, and read by a report only when it
selects the column. Existing rows get NULL: their specs asked for none.

Revision ID: 0004_round_diagnostics
Revises: 0003_checkpoint_hash
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_round_diagnostics"
down_revision = "0003_checkpoint_hash"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(sa.Column("diagnostics", sa.JSON, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("fedbench registries only move forward; restore a backup to go back")
