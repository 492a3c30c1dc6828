"""SQLAlchemy tables: ``runs`` (one row per spec_hash) and ``rounds`` (the per-round curve)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from fedbench.vocab.status import RunStatus


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    spec_hash: Mapped[str] = mapped_column(String(32), unique=True, index=True)
    spec: Mapped[dict] = mapped_column(JSON)
    labels: Mapped[dict] = mapped_column(JSON, default=dict)
    paper: Mapped[str | None] = mapped_column(String(64), index=True)
    recipe: Mapped[str | None] = mapped_column(String(128))
    algorithm: Mapped[str] = mapped_column(String(64))
    dataset: Mapped[str] = mapped_column(String(64))
    seed: Mapped[int] = mapped_column(Integer)
    scale: Mapped[str] = mapped_column(String(32))
    synthetic: Mapped[bool] = mapped_column(Boolean, default=False)
    targets: Mapped[list] = mapped_column(JSON, default=list)
    # pending → running → done | diverged | failed | interrupted
    status: Mapped[str] = mapped_column(String(16), index=True, default=RunStatus.PENDING)
    error: Mapped[str | None] = mapped_column(Text)
    rounds_done: Mapped[int] = mapped_column(Integer, default=0)
    diverged_round: Mapped[int | None] = mapped_column(Integer)
    worker: Mapped[str | None] = mapped_column(String(128))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime | None] = mapped_column(DateTime)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    wall_seconds: Mapped[float | None] = mapped_column(Float)
    summary: Mapped[dict] = mapped_column(JSON, default=dict)
    provenance: Mapped[dict] = mapped_column(JSON, default=dict)  # versions, git, device, host, data
    # sha256 of the run's checkpoint file as this run last wrote it: a resume reads only that exact file
    checkpoint_sha256: Mapped[str | None] = mapped_column(String(64))


class RoundRow(Base):
    """One round of a run's curve. Its columns (run_id aside) are the catalogue's ROUND_FIELDS
    (fedbench/vocab/metrics.py: meaning and unit of each); tests/vocab/test_vocab_metrics.py keeps them equal."""

    __tablename__ = "rounds"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    round: Mapped[int] = mapped_column(Integer, primary_key=True)
    test_acc: Mapped[float | None] = mapped_column(Float)
    test_loss: Mapped[float | None] = mapped_column(Float)
    train_loss: Mapped[float | None] = mapped_column(Float)
    personal_mean: Mapped[float | None] = mapped_column(Float)
    personal_weighted_mean: Mapped[float | None] = mapped_column(Float)
    personal_std: Mapped[float | None] = mapped_column(Float)
    personal_per_client: Mapped[list | None] = mapped_column(JSON)
    personal_val_mean: Mapped[float | None] = mapped_column(Float)  # mean over clients (LG-Mix model selection)
    personal_val_per_client: Mapped[list | None] = mapped_column(JSON)
    personal_metrics: Mapped[dict | None] = mapped_column(JSON)  # {metric: per-client values} (AUC, Dice, ...)
    finetune_mean: Mapped[float | None] = mapped_column(Float)  # fine-tune then evaluate (last round only)
    finetune_weighted_mean: Mapped[float | None] = mapped_column(Float)
    finetune_std: Mapped[float | None] = mapped_column(Float)
    finetune_per_client: Mapped[list | None] = mapped_column(JSON)
    wall_seconds: Mapped[float | None] = mapped_column(Float)
    bytes_up: Mapped[int | None] = mapped_column(Integer)
    bytes_down: Mapped[int | None] = mapped_column(Integer)
