"""Record each run's checkpoint content hash (``runs.checkpoint_sha256``).

From this revision a checkpoint is a safetensors file that cannot run code on load (fedbench.checkpoint.format,
format version 2), and a run resumes only from the exact file it wrote: the sha256 of the file's bytes is
recorded here each time it is written. Existing rows get NULL: a checkpoint left by an older fedbench (a
pickle, format version 1) is never loaded; its run warns once and trains again from round 0.

Revision ID: 0003_checkpoint_hash
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_checkpoint_hash"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("checkpoint_sha256", sa.String(64), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("fedbench registries only move forward; restore a backup to go back")
