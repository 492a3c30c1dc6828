"""Checkpoints on object storage: ``fedbench run --checkpoints s3://bucket/fedbench`` (any fsspec URL: s3://, gs://,
az://, …, with the fsspec driver of that storage installed, e.g. ``pip install s3fs``).

A worker trains from a local copy (a temporary folder of its own) and mirrors each checkpoint to the URL, so a run
whose worker died on machine A resumes on machine B from A's last round:

- ``fetch`` (before the run starts): the run's checkpoint and the client-state files its manifest names are copied
  from the URL into the local folder. The engine then checks them exactly as it checks local files (format, spec,
  the sha256 the registry recorded, every client file's sha256), so storage cannot hand a run a file it did not
  write.
- ``publish`` (after the engine wrote a checkpoint, before the registry records its hash): the new client-state files
  first, then the checkpoint. A checkpoint on the storage therefore never names a file that is not there yet. On
  object stores an upload appears whole or not at all; elsewhere it goes to a temporary name and is moved in place.
- ``retire`` (after the registry recorded it): the client-state files the new checkpoint superseded.
- ``remove`` (when the run finishes): the run's checkpoint and client-state files.

The URL is shown without credentials (``hide_userinfo`` of fedbench/urls.py, where every URL masking lives).
Failures of the storage are ``CheckpointStorageError``s naming the URL and what to do.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from fedbench.checkpoint.format import CheckpointRejected, file_sha256, read_checkpoint
from fedbench.checkpoint.location import checkpoint_name, client_state_folder
from fedbench.errors import ConfigError, FedbenchError
from fedbench.urls import hide_userinfo

# Object stores: an uploaded object becomes visible whole, so uploading straight to the final name is atomic.
_ATOMIC_PUT = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory"}


class CheckpointStorageError(FedbenchError):
    """The checkpoint storage of ``--checkpoints URL`` failed (unreachable, denied, full)."""


def check_url(url: str) -> str:
    """``url`` if fsspec can open its storage here, else a ``ConfigError`` saying what to install."""
    # local: optional dependency (pip install fedbench-repro[s3])
    import fsspec

    protocol = url.split("://", 1)[0]
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise ConfigError(
            f"--checkpoints {hide_userinfo(url)}: fsspec knows no storage {protocol!r}; give a folder, a file:// URL or a "
            "URL such as s3://bucket/path, gs://bucket/path"
        ) from None
    except ImportError as exc:
        raise ConfigError(
            f"--checkpoints {hide_userinfo(url)}: the {protocol}:// driver is not installed ({exc}); install it "
            f"(e.g. pip install s3fs for s3://, gcsfs for gs://) on every worker"
        ) from None
    return url.rstrip("/")


class CheckpointMirror:
    """The copy at ``url`` of one run's checkpoint and client-state folder, named as in a local checkpoint folder
    (``location.py``)."""

    def __init__(self, url: str, spec_hash: str):
        # local: optional dependency (pip install fedbench-repro[s3])
        import fsspec

        self.url = url.rstrip("/")
        try:
            self.fs, root = fsspec.core.url_to_fs(self.url)
        except Exception as exc:  # the driver's own errors: bad credentials, bad URL
            raise self._error("cannot be opened", exc) from None
        self.root = root.rstrip("/")
        self.spec_hash, self.name = spec_hash, checkpoint_name(spec_hash)
        self.atomic_put = bool(set(_protocols(self.fs)) & _ATOMIC_PUT)

    def _error(self, what: str, exc: BaseException) -> CheckpointStorageError:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return CheckpointStorageError(
            f"checkpoint storage {hide_userinfo(self.url)} {what} ({hide_userinfo(str(reason))}); check the URL, the credentials "
            "and the space there, then re-run: the run resumes from its last checkpoint"
        )

    def _remote(self, name: str, client_file: bool = False) -> str:
        folder = client_state_folder(Path(self.name)).name
        return f"{self.root}/{folder}/{name}" if client_file else f"{self.root}/{name}"

    def _call(self, what: str, function, *args: Any) -> Any:
        try:
            return function(*args)
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise self._error(what, exc) from None

    # ------------------------------------------------------------------ storage → local
    def fetch(self, local: Path) -> None:
        """Copy the run's checkpoint (if the storage has one) and the client files it names to ``local`` and its
        client-state folder. A checkpoint that cannot be read is copied all the same: the engine rejects it with
        its reason and starts the run again."""
        remote = self._remote(self.name)
        if not self._call("cannot be read", self.fs.exists, remote):
            return
        self._download(remote, local)
        try:
            manifest = read_checkpoint(local, self.spec_hash).get("client_files", {})
        except CheckpointRejected:
            return
        folder = client_state_folder(local)
        for _client, (name, sha256) in sorted(manifest.items()):
            path = folder / Path(name).name
            if not (path.exists() and file_sha256(path) == sha256):
                try:
                    self._download(self._remote(Path(name).name, client_file=True), path)
                except FileNotFoundError:
                    return  # the engine finds it missing, says so and starts again

    def _download(self, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=local.name, suffix=".tmp")
        os.close(fd)
        try:
            self._call(f"cannot be read ({remote})", self.fs.get_file, remote, tmp)
            os.replace(tmp, local)
        finally:
            Path(tmp).unlink(missing_ok=True)

    # ------------------------------------------------------------------ local → storage
    def publish(self, local: Path, client_files: list[Path]) -> None:
        """Upload the client-state files a checkpoint wrote, then the checkpoint itself."""
        for path in client_files:
            self._upload(path, self._remote(path.name, client_file=True))
        self._upload(local, self._remote(self.name))

    def _upload(self, local: Path, remote: str) -> None:
        if self.atomic_put:
            self._call(f"cannot be written ({remote})", self.fs.put_file, str(local), remote)
            return
        partial = f"{remote}.part"
        self._call(f"cannot be written ({remote})", self.fs.put_file, str(local), partial)
        self._call(f"cannot be written ({remote})", self.fs.mv, partial, remote)

    def retire(self, names: list[str]) -> None:
        """Delete the client-state files a newer checkpoint superseded (already gone: fine)."""
        for name in names:
            try:
                self._call("cannot be written", self.fs.rm_file, self._remote(name, client_file=True))
            except FileNotFoundError:
                pass

    def remove(self) -> None:
        """Delete the run's checkpoint and client-state files from the storage (the run is finished)."""
        for remote, recursive in ((self._remote(self.name), False), (self._remote("", client_file=True), True)):
            try:
                if self._call("cannot be listed", self.fs.exists, remote.rstrip("/")):
                    self._call("cannot be written", self.fs.rm, remote.rstrip("/"), recursive)
            except FileNotFoundError:
                pass


def check_reachable(url: str) -> None:
    """Open the storage at ``url`` and look for its folder: a host that does not resolve, a refused connection or
    credentials it denies is one ``CheckpointStorageError`` before a batch registers its runs, instead of the
    same failure recorded on every run. FTP and SFTP connect when opened, object stores on the first request."""
    mirror = CheckpointMirror(url, spec_hash="")
    mirror._call("cannot be reached", mirror.fs.exists, mirror.root)


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


__all__ = ["CheckpointMirror", "CheckpointStorageError", "check_reachable", "check_url"]
