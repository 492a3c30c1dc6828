"""Where a run's checkpoint lives: the one answer, for the workers, the engine, the registry and the mirror.

A run's checkpoint is the file ``{spec_hash}.pt`` in the run's checkpoint folder, and its client-state files
(``engine/client_states.py``) lie in the folder ``{spec_hash}.pt.clients`` beside it. The checkpoint folder is

- ``--checkpoints FOLDER`` (a folder or ``file://`` URL, else ``$FEDBENCH_CHECKPOINTS``): storage every worker mounts
  (NFS, a cluster file system, a bucket mounted with s3fs/gcsfuse), so that a run whose worker died resumes on any
  machine from its last saved round;
- else ``checkpoints`` in the registry's home (the SQLite file's folder, else ./registry). A worker given
  ``--checkpoints URL`` (object storage: s3://, gs://, …) trains from this local copy and mirrors it to the URL under
  the same names (``mirror.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from fedbench.errors import ConfigError

CHECKPOINTS_ENV = "FEDBENCH_CHECKPOINTS"  # --checkpoints when the option is not given
SUFFIX = ".pt"
CLIENT_STATES_SUFFIX = ".clients"


def is_url(location: str | None) -> bool:
    """Whether ``--checkpoints`` names storage by URL (not a folder or ``file://`` URL, which are folders)."""
    return bool(location) and "://" in str(location) and not str(location).startswith("file://")


def resolve_checkpoints(text: str | None) -> str | None:
    """``--checkpoints`` (or ``$FEDBENCH_CHECKPOINTS``) as the same string for every worker: an absolute folder, or a
    storage URL whose driver is installed here (``mirror.check_url``); None: beside the registry. Checkpoints are
    written atomically (a temporary file, then a rename), so a shared folder never shows half a file."""
    text = text or os.environ.get(CHECKPOINTS_ENV) or None
    if text is None:
        return None
    if is_url(text):
        # local: fedbench.checkpoint.mirror imports this module (cycle); it also keeps torch out of runs' start-up
        from fedbench.checkpoint.mirror import check_url

        return check_url(text)
    _scheme, sep, rest = text.partition("://")
    folder = Path(rest if sep else text).expanduser().resolve()
    existing = next(path for path in (folder, *folder.parents) if path.exists())  # the folder, or what it is made in
    if not existing.is_dir():
        raise ConfigError(f"--checkpoints {text!r}: {existing} is a file; give a folder")
    return str(folder)


def registry_checkpoints(registry_home: Path) -> Path:
    """The checkpoint folder beside a registry whose files live in ``registry_home``."""
    return Path(registry_home) / "checkpoints"


def checkpoint_name(spec_hash: str) -> str:
    """The file name of a run's checkpoint, in every checkpoint folder and at a storage URL."""
    return f"{spec_hash}{SUFFIX}"


def run_checkpoint(spec_hash: str, registry_home: Path, checkpoints: str | None = None) -> Path:
    """The local file of a run's checkpoint: in the ``checkpoints`` folder (``resolve_checkpoints``) when given,
    else beside the registry, which is also where the local copy of a checkpoint kept at a storage URL lies."""
    folder = Path(checkpoints) if checkpoints and not is_url(checkpoints) else registry_checkpoints(registry_home)
    return folder / checkpoint_name(spec_hash)


def client_state_folder(checkpoint: Path) -> Path:
    """The folder of a run's client-state files: beside its checkpoint, named after it."""
    return checkpoint.with_name(checkpoint.name + CLIENT_STATES_SUFFIX)


def remove_checkpoint(checkpoint: Path) -> None:
    """Delete a run's checkpoint and its client-state files (a finished run needs neither)."""
    Path(checkpoint).unlink(missing_ok=True)
    folder = client_state_folder(Path(checkpoint))
    if folder.is_dir():
        for item in folder.iterdir():
            item.unlink(missing_ok=True)
        folder.rmdir()


__all__ = [
    "CHECKPOINTS_ENV",
    "checkpoint_name",
    "client_state_folder",
    "is_url",
    "registry_checkpoints",
    "remove_checkpoint",
    "resolve_checkpoints",
    "run_checkpoint",
]
