"""Every client's persistent state (SCAFFOLD's c_i, FedDyn's g_k, FedTrip's historical model, LG-Mix's and Ditto's
personal models, MOON's previous model…), kept in memory up to a budget and spilled to one file per client.

Why: a run holds a state for every client that ever trained, but touches only a round's participants. Keeping all
of them in memory and writing all of them into every checkpoint does not scale: 100 clients of SCAFFOLD
with VGG-11 hold 100 × 9.75 M float32 control variates, 3.9 GB written per round; 1,000 clients of a personalised
method hold 1,000 models. So:

- **Incremental checkpoints.** A client's state is written to its own file when it changed since the last
  checkpoint (the clients a round trained, plus any a hook reached), never otherwise. The run's checkpoint
  (``checkpoint.py``) holds a manifest ``client_files``: client → (file name, sha256). File names carry the round
  (``{client}-r{round}.state``), so a file is never overwritten: until the new checkpoint is in place (and the
  registry recorded its hash), the previous checkpoint's manifest still names intact files. Superseded files are
  deleted only after that (``commit``), and files no manifest names (left by a crash) when a run starts or resumes.
- **Spilled to disk.** Once a checkpoint has written them, the least recently used states beyond ``memory_budget``
  bytes leave memory; the next use reads the file back (bit for bit, sha256 checked against the manifest). With a
  run that writes no checkpoint (tests, the library without a path) nothing can spill and everything stays resident.

Empty states (the ``{}`` every client of FedAvg gets) cost nothing and stay in the checkpoint itself, as do all
states of a checkpoint written before this store existed (read as-is, and written to files at the next checkpoint).

The store is a ``MutableMapping[int, dict]``: reading an entry through the mapping marks it changed, because hooks
mutate the dict they receive; evaluation and fine-tuning read through ``peek``, which never does.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import torch

from fedbench.checkpoint.format import CheckpointRejected, file_sha256, read_checkpoint, save_checkpoints
from fedbench.errors import FedbenchError
from fedbench.settings import DEFAULT_MEMORY_BUDGET  # how much client state stays in memory: its one default

_FILE_NAME = re.compile(r"^(\d+)-r(\d+)\.state$")


def state_bytes(value: Any) -> int:
    """Bytes of the tensors in a (nested) state."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(state_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(state_bytes(v) for v in value)
    return 0


class ClientStateError(FedbenchError):
    """A client-state file a run needs is missing or changed since its checkpoint named it: before a resume the
    engine then starts again from round 0; during a run the run fails with this one line (and restarts)."""


class ClientStates(MutableMapping[int, dict[str, Any]]):
    """Client → state dict, resident up to ``memory_budget`` bytes, spilling to ``folder`` (None: never spills)."""

    def __init__(
        self,
        initial: dict[int, dict[str, Any]] | None = None,
        *,
        folder: Path | None = None,
        spec_hash: str = "",
        device: torch.device | str = "cpu",
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        self.folder, self.spec_hash, self.device, self.memory_budget = folder, spec_hash, device, memory_budget
        self._resident: OrderedDict[int, dict[str, Any]] = OrderedDict()  # least recently used first
        self._sizes: dict[int, int] = {}  # bytes of each resident state, as of its last write or read
        self._files: dict[int, tuple[str, str]] = {}  # client → (file name, sha256) of the last checkpoint
        self._changed: set[int] = set()  # clients whose state may differ from their file
        self._superseded: set[str] = set()  # files the next commit may delete
        self.last_written: list[Path] = []  # the files the last ``write_changed`` wrote
        for client, state in (initial or {}).items():
            self[client] = state

    # ------------------------------------------------------------------ the mapping (marks changed)
    def __getitem__(self, client: int) -> dict[str, Any]:
        state = self._load(client)
        self._changed.add(client)
        return state

    def __setitem__(self, client: int, state: dict[str, Any]) -> None:
        self._resident[client] = state
        self._resident.move_to_end(client)
        self._changed.add(client)

    def __delitem__(self, client: int) -> None:
        if client not in self._resident and client not in self._files:
            raise KeyError(client)
        self._resident.pop(client, None)
        self._sizes.pop(client, None)
        self._changed.add(client)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(set(self._resident) | set(self._files) - self._deleted()))

    def __len__(self) -> int:
        return len(set(self._resident) | set(self._files) - self._deleted())

    def __contains__(self, client: object) -> bool:
        return client in self._resident or (client in self._files and client not in self._deleted())

    def _deleted(self) -> set[int]:
        return {c for c in self._changed if c not in self._resident}

    # ------------------------------------------------------------------ read-only access
    def peek(self, client: int) -> dict[str, Any]:
        """A copy of ``client``'s state ({} if it has none) that the caller may change freely: evaluation and
        fine-tuning read states this way, so they never mark one changed nor pull a spilled one into memory."""
        if client in self._resident:
            return copy.deepcopy(self._resident[client])
        if client in self._files and client not in self._changed:
            return self._read(client)
        return {}

    def resident_clients(self) -> list[int]:
        return list(self._resident)

    # ------------------------------------------------------------------ files
    def _load(self, client: int) -> dict[str, Any]:
        if client in self._resident:
            self._resident.move_to_end(client)
            return self._resident[client]
        if client not in self._files or client in self._changed:
            raise KeyError(client)
        state = self._read(client)
        self._resident[client] = state
        self._sizes[client] = state_bytes(state)
        return state

    def _read(self, client: int) -> dict[str, Any]:
        assert self.folder is not None  # only a store with a folder has files
        name, sha256 = self._files[client]
        path = self.folder / name
        try:
            payload = read_checkpoint(path, self.spec_hash, self.device, sha256, bound=True)
        except (OSError, CheckpointRejected) as exc:
            reason = exc.reason if isinstance(exc, CheckpointRejected) else (exc.strerror or str(exc))
            raise ClientStateError(f"client state file {path} cannot be used: {reason}") from None
        state = payload.get("state")
        if payload.get("client") != client or not isinstance(state, dict):
            raise ClientStateError(f"client state file {path} does not hold client {client}'s state")
        return state

    def restore(self, inline: dict[int, dict[str, Any]], files: dict[int, tuple[str, str]]) -> None:
        """The states of a checkpoint: ``inline`` ones (empty states; every state of an older checkpoint) and the
        ``files`` of its manifest. Inline non-empty states count as changed, so the next checkpoint files them."""
        self._resident.clear()
        self._sizes.clear()
        self._changed.clear()
        self._files = {int(client): (str(name), str(sha)) for client, (name, sha) in files.items()}
        for client, state in inline.items():
            self._resident[client] = state
            if state:
                self._changed.add(client)
        self.remove_unreferenced()

    def verify_files(self) -> None:
        """Every file the manifest names exists and has the sha256 it recorded (a resume checks this once, before
        its first round, so a damaged file restarts the run from round 0 rather than failing mid-run)."""
        for client, (name, sha256) in sorted(self._files.items()):
            match = _FILE_NAME.match(name)
            if self.folder is None or match is None or int(match.group(1)) != client:
                raise ClientStateError(f"its client-state manifest names {name!r} for client {client}")
            path = self.folder / name
            try:
                actual = file_sha256(path)
            except OSError as exc:
                raise ClientStateError(f"client state file {path} cannot be read ({exc.strerror or exc})") from None
            if actual != sha256:
                raise ClientStateError(f"client state file {path} changed since the checkpoint recorded it")

    def write_changed(self, round_index: int) -> tuple[dict[int, dict[str, Any]], dict[int, list[str]]]:
        """Write the state of every changed client to a new file (round ``round_index``); returns what the
        checkpoint holds: (inline states, manifest client → [file name, sha256]). Inline are the empty states,
        and every state of a store without a folder (nothing to spill to: the checkpoint holds them all)."""
        if self.folder is None:
            self._changed.clear()
            return dict(self._resident), {}
        to_write = []
        for client in sorted(self._changed):
            old = self._files.pop(client, None)
            if old is not None:
                self._superseded.add(old[0])
            state = self._resident.get(client)
            if state:  # a deleted or empty state has no file
                name = f"{client}-r{round_index}.state"
                payload = {"spec_hash": self.spec_hash, "round": round_index, "client": client, "state": state}
                to_write.append((client, name, payload))
                self._sizes[client] = state_bytes(state)
        digests = save_checkpoints([(self.folder / name, payload) for _, name, payload in to_write])
        for (client, name, _), sha256 in zip(to_write, digests):
            self._files[client] = (name, sha256)
        self.last_written = [self.folder / name for _, name, _ in to_write]
        self._changed.clear()
        inline = {client: state for client, state in self._resident.items() if not state}
        return inline, {client: [name, sha] for client, (name, sha) in sorted(self._files.items())}

    def commit(self) -> list[str]:
        """After the checkpoint that names the new files is in place (and recorded): delete superseded files and
        let the least recently used filed states leave memory until the resident ones fit the budget. Returns the
        names of the files deleted."""
        if self.folder is None:
            return []
        removed = sorted(self._superseded)
        for name in removed:
            (self.folder / name).unlink(missing_ok=True)
        self._superseded.clear()
        resident = sum(self._sizes.get(client, 0) for client in self._resident)
        for client in list(self._resident):
            if resident <= self.memory_budget:
                break
            if client in self._files and client not in self._changed:
                del self._resident[client]
                resident -= self._sizes.pop(client, 0)
        return removed

    def abandon_written(self) -> None:
        """The checkpoint that was to name the files ``write_changed`` just wrote failed: delete them (nothing names
        them; on a full disk the space matters). The run stops there, and resumes from the last checkpoint."""
        for path in self.last_written:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        self.last_written = []

    def remove_unreferenced(self) -> None:
        """Delete files no manifest names: superseded ones a crash left, or a whole earlier attempt's when a run
        starts from round 0."""
        if self.folder is None or not self.folder.is_dir():
            return
        keep = {name for name, _ in self._files.values()}
        for path in self.folder.iterdir():
            if path.name not in keep and (_FILE_NAME.match(path.name) or path.name.endswith(".tmp")):
                path.unlink(missing_ok=True)


__all__ = [
    "ClientStateError",
    "ClientStates",
    "DEFAULT_MEMORY_BUDGET",
    "state_bytes",
]
