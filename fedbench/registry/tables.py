"""The registry's two tables as SQLAlchemy Core tables: ``runs`` (one row per spec_hash) and ``rounds`` (the
per-round curve). Core, not the ORM: a row read back is a read-only ``Row`` with the columns as attributes, and the
commands that only read the registry (``runs``, ``show``, ``export``, ``report``) start without importing the ORM.
A change of a column takes a migration (``fedbench/registry/migrations``)."""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Column, DateTime, Float, ForeignKey, Integer, MetaData, String, Table, Text

from fedbench.vocab.status import RunStatus

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("spec_hash", String(32), unique=True, index=True, nullable=False),
    Column("spec", JSON, nullable=False),
    Column("labels", JSON, default=dict, nullable=False),
    Column("paper", String(64), index=True),
    Column("recipe", String(128)),
    Column("algorithm", String(64), nullable=False),
    Column("dataset", String(64), nullable=False),
    Column("seed", Integer, nullable=False),
    Column("scale", String(32), nullable=False),
    Column("synthetic", Boolean, default=False, nullable=False),
    Column("targets", JSON, default=list, nullable=False),
    # pending → running → done | diverged | failed | interrupted
    Column("status", String(16), index=True, default=RunStatus.PENDING, nullable=False),
    Column("error", Text),
    Column("rounds_done", Integer, default=0, nullable=False),
    Column("diverged_round", Integer),
    Column("worker", String(128)),
    Column("heartbeat_at", DateTime),
    Column("created_at", DateTime),
    Column("started_at", DateTime),
    Column("finished_at", DateTime),
    Column("wall_seconds", Float),
    Column("summary", JSON, default=dict, nullable=False),
    Column("provenance", JSON, default=dict, nullable=False),  # versions, git, device, host, data
    # sha256 of the run's checkpoint file as this run last wrote it: a resume reads only that exact file
    Column("checkpoint_sha256", String(64)),
)

# One round of a run's curve. Its columns (run_id aside) are the catalogue's ROUND_FIELDS (fedbench/vocab/metrics.py:
# meaning and unit of each); tests/vocab/test_vocab_metrics.py keeps them equal.
rounds = Table(
    "rounds",
    metadata,
    Column("run_id", ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("round", Integer, primary_key=True),
    Column("test_acc", Float),
    Column("test_loss", Float),
    Column("train_loss", Float),
    Column("personal_mean", Float),
    Column("personal_weighted_mean", Float),
    Column("personal_std", Float),
    Column("personal_per_client", JSON),
    Column("personal_val_mean", Float),  # mean over clients (LG-Mix model selection)
    Column("personal_val_per_client", JSON),
    Column("personal_metrics", JSON),  # {metric: per-client values} (AUC, Dice, ...)
    Column("finetune_mean", Float),  # fine-tune then evaluate (last round only)
    Column("finetune_weighted_mean", Float),
    Column("finetune_std", Float),
    Column("finetune_per_client", JSON),
    Column("wall_seconds", Float),
    Column("bytes_up", Integer),
    Column("bytes_down", Integer),
    # {diagnostic: JSON value} on the rounds the spec diagnoses (fedbench/vocab/diagnostics.py), NULL on the others:
    # written in the round's row, so it is dropped and redone with the round; reports select it by name
    Column("diagnostics", JSON),
)
