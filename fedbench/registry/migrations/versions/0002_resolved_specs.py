"""Store every run's spec fully resolved and re-key it by the resolved spec's hash.

fedbench 0.1.0 stored ``algorithm_params``, ``dataset_params``, ``model_params`` and ``partition_params``
as the recipe wrote them, so a changed default left the hash alone and a spelled-out default gave a second
hash for the same run. From 0.2 a spec holds every parameter (``fedbench.recipes.resolve``). This revision resolves
each stored spec with the defaults fedbench 0.1.0 had (``defaults_v0_1_0.json``, recorded when the
revision was written: resolving with today's defaults would misread a run if a default has changed since),
then with the current code for parameters added later (those keep old behaviour at their default and are
``HashNeutral``). Runs whose resolved specs coincide are one run: the most finished one is kept (done or
diverged before anything else, then the most rounds, then the oldest) and the others are removed with their
rounds. A checkpoint file named by an old hash is renamed (not read: it may come from anyone); from revision
0003 fedbench resumes only from checkpoints whose content hash the registry recorded, so such a run warns once and
trains again from round 0. A spec that no longer validates (a plug-in since removed) is left as it was.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

DEFAULTS_V0_1_0 = Path(__file__).resolve().parent.parent / "defaults_v0_1_0.json"
FINISHED = ("done", "diverged")


def resolve_v0_1_0(spec: dict[str, Any], defaults: dict[str, dict[str, dict[str, Any]]]):
    """The RunSpec a 0.1.0 registry row meant: its parameters over 0.1.0's defaults, then resolved. 0.1.0 trained
    every method at its first result revision: a spec a later fix changes (the method's ``Params.result_revision`` > 1) must
    not be taken for the fixed result, so it keeps revision 1."""
    # local: Alembic imports every revision script to find the ones to run; only this revision's upgrade of an old
    # registry needs the spec schema and the plug-in catalogues
    from fedbench.recipes.resolve import resolve_spec
    from fedbench.spec import PLUGIN_KINDS

    spec = {**spec, "algorithm_revision": 1}
    for kind in PLUGIN_KINDS:
        name = str(spec.get(kind, "iid" if kind == "partition" else ""))
        old_defaults = defaults[kind].get(name, {})
        spec[f"{kind}_params"] = {**old_defaults, **(spec.get(f"{kind}_params") or {})}
    return resolve_spec(spec)


def _keep_first(row: Any) -> tuple:
    return (row.status not in FINISHED, -(row.rounds_done or 0), row.id)


def _move_checkpoint(directory: Path | None, old: str, new: str) -> None:
    """The run's checkpoint follows its new hash: renamed, never read. (This revision once rewrote it after
    ``torch.load(weights_only=True)``; a checkpoint on shared storage may come from anyone, so nothing in it is
    unpickled here. From revision 0003 such a file is refused on resume anyway: its run warns and restarts.)"""
    if directory is None or not (directory / f"{old}.pt").exists() or (directory / f"{new}.pt").exists():
        return
    os.replace(directory / f"{old}.pt", directory / f"{new}.pt")


def upgrade() -> None:
    # local: as in resolve_v0_1_0, only an upgrade that runs needs them
    from pydantic import ValidationError

    from fedbench.errors import FedbenchError

    defaults = json.loads(DEFAULTS_V0_1_0.read_text())
    checkpoints = context.config.attributes.get("checkpoint_dir")
    connection = op.get_bind()
    runs = sa.table(
        "runs",
        sa.column("id", sa.Integer),
        sa.column("spec_hash", sa.String),
        sa.column("spec", sa.JSON),
        sa.column("status", sa.String),
        sa.column("rounds_done", sa.Integer),
    )
    rounds = sa.table("rounds", sa.column("run_id", sa.Integer))
    groups: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    for row in connection.execute(sa.select(runs)).all():
        stored = row.spec if isinstance(row.spec, dict) else json.loads(row.spec)
        try:
            spec = resolve_v0_1_0(stored, defaults)
        except (ValidationError, FedbenchError):
            continue
        groups.setdefault(spec.spec_hash, []).append((row, spec.model_dump(mode="json")))
    for new_hash, members in groups.items():
        members.sort(key=lambda member: _keep_first(member[0]))
        (kept, resolved), duplicates = members[0], members[1:]
        for row, _ in duplicates:
            connection.execute(sa.delete(rounds).where(rounds.c.run_id == row.id))
            connection.execute(sa.delete(runs).where(runs.c.id == row.id))
        if kept.spec_hash != new_hash or kept.spec != resolved:
            connection.execute(sa.update(runs).where(runs.c.id == kept.id).values(spec_hash=new_hash, spec=resolved))
        if kept.spec_hash != new_hash:
            _move_checkpoint(Path(checkpoints) if checkpoints else None, kept.spec_hash, new_hash)


def downgrade() -> None:
    raise NotImplementedError("fedbench registries only move forward; restore a backup to go back")
