"""One atomic checkpoint file per run: everything a resumed run needs, stored as data that cannot run code.

Training randomness is derived from (seed, stream, round, client) keys (``fedbench.seeding``), so a
checkpoint holds no RNG state: round, global weights and buffers, server state, client states.

Format (version 2, docs/security.md): a file in safetensors' layout. Its tensors are the payload's tensors; its
header metadata holds the format name and version, the spec hash, the round and the rest of the payload as JSON
(dicts, lists, tuples, str, int, float, bool, None; tensors referred to by key). Loading parses JSON and reads
raw tensor bytes: nothing is unpickled, so a file planted on shared checkpoint storage cannot execute anything.
Format version 1 was ``torch.save``'s pickle; such a file is refused like any other foreign file.

A checkpoint is bound to its run: it names the spec hash, and the sha256 of its bytes is recorded (by the
caller's ``CheckpointLedger``: the registry) when it is written. ``read_checkpoint`` refuses a file that is not
in the format, is truncated, belongs to another spec, or whose bytes differ from the recorded hash, raising
``CheckpointRejected`` with the reason; the engine then warns once and trains from round 0.

Files are written through ``atomic.py`` (a reader never sees half a checkpoint); where they lie is ``location.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import queue
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from fedbench.checkpoint.atomic import write_all_atomic
from fedbench.checkpoint.location import client_state_folder

FORMAT = "fedbench-checkpoint"
VERSION = 2
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit: a larger "header" is not one
_PICKLE_MAGICS = (b"PK\x03\x04", b"\x80")  # torch.save's zip archive; a bare pickle (protocol 2+)


class CheckpointRejected(Exception):
    """A checkpoint file that fails a check: ``reason`` says which, for the one warning line."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class CheckpointLedger(Protocol):
    """Where a run's checkpoint content hash is recorded when written, and read back before a resume."""

    def checkpoint_sha256(self) -> str | None: ...
    def record_checkpoint(self, sha256: str | None) -> None: ...


class CheckpointMirror(Protocol):
    """A copy of a run's checkpoint on other storage (``fedbench/checkpoint/mirror.py``: any fsspec URL), kept in step
    with the local file: ``publish`` after the engine wrote a checkpoint (``client_files``: the client-state files it
    wrote), before the ledger records it; ``retire`` the client-state files it superseded, after."""

    def publish(self, checkpoint: Path, client_files: list[Path]) -> None: ...
    def retire(self, names: list[str]) -> None: ...


# ------------------------------------------------------------------ payload ⇄ (tensors, JSON structure)
def _encode(value: Any, tensors: dict[str, torch.Tensor], seen: dict[int, str]) -> Any:
    """JSON for ``value``: scalars as themselves, every container and tensor as a one-key object (so no JSON
    object is ever a plain value): {"t": key} tensor, {"d": [[k, v], ...]} dict (keys may be ints or tuples),
    {"l": [...]} list, {"u": [...]} tuple."""
    if isinstance(value, torch.Tensor):
        key = seen.get(id(value))
        if key is None:  # the same tensor object twice (a state referring to another's tensor) is stored once
            key = seen[id(value)] = f"t{len(tensors)}"
            tensors[key] = value
        ref: dict[str, Any] = {"t": key}
        if value.requires_grad:
            ref["g"] = True
        if isinstance(value, torch.nn.Parameter):
            ref["p"] = True
        return ref
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value  # json writes repr(value): read back bit for bit (nan and inf included)
    if isinstance(value, dict):
        return {"d": [[_encode(k, tensors, seen), _encode(v, tensors, seen)] for k, v in value.items()]}
    if isinstance(value, list):
        return {"l": [_encode(v, tensors, seen) for v in value]}
    if isinstance(value, tuple):
        return {"u": [_encode(v, tensors, seen) for v in value]}
    raise TypeError(
        f"a checkpoint holds tensors, dicts, lists, tuples, str, int, float, bool and None; found {type(value).__name__}"
    )


def _decode(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, dict) and len(node) >= 1:
        if "t" in node:
            tensor = tensors.get(node["t"]) if isinstance(node["t"], str) else None
            if tensor is None:
                raise CheckpointRejected(f"its structure names a tensor {node['t']!r} the file does not hold")
            if node.get("p"):
                return torch.nn.Parameter(tensor, requires_grad=bool(node.get("g")))
            return tensor.requires_grad_(True) if node.get("g") else tensor
        if len(node) == 1:
            tag, items = next(iter(node.items()))
            if tag == "l" and isinstance(items, list):
                return [_decode(v, tensors) for v in items]
            if tag == "u" and isinstance(items, list):
                return tuple(_decode(v, tensors) for v in items)
            if tag == "d" and isinstance(items, list) and all(isinstance(i, list) and len(i) == 2 for i in items):
                out = {}
                for k, v in items:
                    key = _decode(k, tensors)
                    if not isinstance(key, (str, int, float, bool, tuple, type(None))):
                        raise CheckpointRejected(f"its structure has an unhashable key {k!r}")
                    out[key] = _decode(v, tensors)
                return out
    raise CheckpointRejected(f"its structure holds {str(node)[:60]!r}, which is not a checkpoint value")


# ------------------------------------------------------------------ the file: safetensors' layout
# An 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str:
# str}} padded with spaces to a multiple of 8, then the tensors' raw little-endian bytes (safetensors.org). Written
# and read here, streaming, rather than through the safetensors package, which builds the whole file in memory
# (copying every tensor twice) before it is written: for a ResNet-18 checkpoint its save took 1.9x torch.save's
# time, this streaming writer (hashing in a second thread) 1.2-1.6x on the same machine
# (benchmarks/checkpoint_format.py). tests/integration/test_checkpoint_safety.py checks that the package reads our files and
# that we read its files.
_DTYPE_NAMES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}


def _raw_bytes(tensor: torch.Tensor) -> memoryview:
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().data if flat.numel() else memoryview(b"")


def encode_checkpoint(payload: dict[str, Any]) -> tuple[bytes, list[torch.Tensor]]:
    """A version-2 checkpoint of ``payload`` (which names its ``spec_hash`` and ``round``): the header bytes and
    the tensors whose raw bytes follow it, in order."""
    tensors: dict[str, torch.Tensor] = {}
    structure = _encode({k: v for k, v in payload.items() if k not in ("spec_hash", "round")}, tensors, {})
    # widest items first, so every tensor starts at a multiple of its item size
    order = sorted(tensors, key=lambda key: (-tensors[key].element_size(), int(key[1:])))
    table: dict[str, Any] = {
        "__metadata__": {
            "format": FORMAT,
            "version": str(VERSION),
            "spec_hash": str(payload["spec_hash"]),
            "round": str(int(payload["round"])),
            "structure": json.dumps(structure, separators=(",", ":")),
        }
    }
    offset = 0
    for key in order:
        tensor = tensors[key]
        if tensor.dtype not in _DTYPE_NAMES:
            raise TypeError(f"a checkpoint cannot hold a {tensor.dtype} tensor")
        size = tensor.numel() * tensor.element_size()
        table[key] = {
            "dtype": _DTYPE_NAMES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    header = json.dumps(table, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header, [tensors[key] for key in order]


def save_checkpoint(path: Path, payload: dict[str, Any], record: Callable[[Path, str], None] | None = None) -> str:
    """Write ``payload`` as a version-2 checkpoint at ``path`` (atomic); returns the sha256 of its bytes. ``record``
    gets the new file (durable, under its temporary name) and that hash before the file replaces the previous one:
    the engine copies it to ``--checkpoints`` storage and records the hash in the registry there."""
    before_replace = None if record is None else (lambda temporaries, digests: record(temporaries[0], digests[0]))
    return save_checkpoints([(path, payload)], before_replace)[0]


def save_checkpoints(
    files: list[tuple[Path, dict[str, Any]]], before_replace: Callable[[list[Path], list[str]], None] | None = None
) -> list[str]:
    """Write each ``(path, payload)`` as a version-2 checkpoint, together (``write_all_atomic``); their sha256s."""
    encoded = []
    for path, payload in files:
        header, tensors = encode_checkpoint(payload)
        encoded.append((path, [memoryview(header), *(_raw_bytes(t) for t in tensors)]))
    return write_all_atomic(encoded, before_replace)


# ------------------------------------------------------------------ reading
def _header(data: bytearray) -> tuple[dict[str, Any], dict[str, str], int]:
    """(tensor table, metadata, start of the tensor bytes) of a version-2 checkpoint, or CheckpointRejected."""
    # A header length whose low byte is 0x80 (one checkpoint in 32) starts the file like a pickle: the magic
    # bytes name a pickle only where no JSON header follows a plausible length
    size = struct.unpack("<Q", data[:8])[0] if len(data) >= 8 else 0
    our_layout = 8 + size <= len(data) and size <= MAX_HEADER_BYTES and data[8:9] == b"{"
    if not our_layout and (data[:4] == _PICKLE_MAGICS[0] or data[:1] == _PICKLE_MAGICS[1]):
        raise CheckpointRejected(
            "it is a pickle (the format of fedbench 0.2 and earlier, or a file planted there), which fedbench "
            "never loads: it could run code"
        )
    if len(data) < 8:
        raise CheckpointRejected("it is truncated or not a fedbench checkpoint (too short)")
    (size,) = struct.unpack("<Q", data[:8])
    if size > MAX_HEADER_BYTES or 8 + size > len(data):
        raise CheckpointRejected("it is truncated or not a fedbench checkpoint (no complete header)")
    try:
        table = json.loads(bytes(data[8 : 8 + size]))
        metadata = table.pop("__metadata__", None) or {}
    except (ValueError, AttributeError, TypeError, RecursionError):
        raise CheckpointRejected("it is not a fedbench checkpoint (unreadable header)") from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise CheckpointRejected("it is not a fedbench checkpoint")
    if metadata.get("version") != str(VERSION):
        raise CheckpointRejected(
            f"it is a version {metadata.get('version')!r} fedbench checkpoint; this fedbench reads version {VERSION}"
        )
    start, available = 8 + size, len(data) - 8 - size
    try:  # every tensor's byte range fits its dtype and shape and lies inside the file
        end = 0
        for entry in table.values():
            begin, stop = (int(x) for x in entry["data_offsets"])
            shape = [int(n) for n in entry["shape"]]
            if any(n < 0 for n in shape) or not 0 <= begin <= stop:
                raise ValueError
            if stop - begin != math.prod(shape) * _DTYPES[entry["dtype"]].itemsize:
                raise ValueError
            end = max(end, stop)
    except (TypeError, KeyError, IndexError, ValueError, AttributeError):
        raise CheckpointRejected("it is not a fedbench checkpoint (malformed tensor table)") from None
    if end > available:
        raise CheckpointRejected(f"it is truncated ({len(data)} bytes of {start + end})")
    return table, metadata, start


def _tensors(data: bytearray, table: dict[str, Any], start: int) -> dict[str, torch.Tensor]:
    """The file's tensors, sharing the memory of ``data`` (no copy)."""
    out = {}
    for key, entry in table.items():
        dtype, shape = _DTYPES[entry["dtype"]], [int(n) for n in entry["shape"]]
        begin = int(entry["data_offsets"][0])
        count = math.prod(shape)
        if count == 0:
            out[key] = torch.empty(shape, dtype=dtype)
        elif begin % dtype.itemsize:  # not aligned (a file not written by fedbench): read through a copy
            raw = torch.frombuffer(data, dtype=torch.uint8, count=count * dtype.itemsize, offset=start + begin)
            out[key] = raw.clone().view(dtype).reshape(shape)
        else:
            out[key] = torch.frombuffer(data, dtype=dtype, count=count, offset=start + begin).reshape(shape)
    return out


_READ_CHUNK = 16 << 20


def _read(path: Path, hashing: bool) -> tuple[bytearray, str | None]:
    """The file's bytes, and (``hashing``) their sha256, computed in a second thread as the chunks arrive."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = bytearray(size)
        view = memoryview(data)
        digest = hashlib.sha256()
        chunks: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()

        def hash_chunks() -> None:
            while (chunk := chunks.get()) is not None:
                digest.update(chunk)

        hasher = threading.Thread(target=hash_chunks, daemon=True)
        if hashing:
            hasher.start()
        offset = 0
        try:
            while offset < size:
                count = handle.readinto(view[offset : offset + _READ_CHUNK])
                if not count:
                    break
                if hashing:
                    chunks.put(view[offset : offset + count])
                offset += count
        finally:
            if hashing:
                chunks.put(None)
                hasher.join()
        if offset != size or handle.read(1):
            raise CheckpointRejected("it changed while it was read")
    return data, digest.hexdigest() if hashing else None


def read_checkpoint(
    path: Path, spec_hash: str, device: torch.device | str = "cpu", expected_sha256: str | None = None, *, bound=False
) -> dict[str, Any]:
    """The payload of the checkpoint at ``path``, checked: format and version, complete, spec hash, and — when
    ``bound`` (a ledger recorded it) — the sha256 of its bytes against ``expected_sha256``. Raises
    ``CheckpointRejected`` with the reason (``FileNotFoundError`` if there is no file). The file is read once into
    memory and everything is checked and decoded from those bytes; nothing in it is ever unpickled."""
    data, actual = _read(Path(path), hashing=bound)
    table, metadata, start = _header(data)
    if metadata.get("spec_hash") != spec_hash:
        raise CheckpointRejected(f"it belongs to another spec ({metadata.get('spec_hash')!r}, not {spec_hash!r})")
    if bound:
        if expected_sha256 is None:
            raise CheckpointRejected("the registry holds no record of it (it was not written by this run)")
        if actual != expected_sha256:
            raise CheckpointRejected(
                f"its content (sha256 {str(actual)[:12]}…) differs from the registry's record ({expected_sha256[:12]}…): "
                "changed since this run wrote it"
            )
    try:
        structure = json.loads(metadata["structure"])
        round_index = int(metadata["round"])
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise CheckpointRejected(f"it is corrupt ({type(exc).__name__} in its metadata)") from None
    tensors = _tensors(data, table, start)
    device = torch.device(device)
    if device.type != "cpu":
        tensors = {k: t.to(device) for k, t in tensors.items()}
    try:
        payload = _decode(structure, tensors)
    except (TypeError, ValueError, RecursionError) as exc:  # e.g. an unhashable key, nesting beyond the stack
        raise CheckpointRejected(f"its structure is malformed ({type(exc).__name__})") from None
    if not isinstance(payload, dict):
        raise CheckpointRejected("its structure is not a checkpoint payload")
    payload.update(spec_hash=spec_hash, round=round_index)
    return payload


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def load_checkpoint(
    path: Path, spec_hash: str, device: torch.device | str = "cpu", expected_sha256: str | None = None
) -> dict[str, Any] | None:
    """``read_checkpoint`` for inspection (tests, tools): None if the file is missing or fails a check.
    With ``expected_sha256`` its bytes must also match that hash. The client states the checkpoint keeps in files
    (its ``client_files`` manifest) are read in, each checked against the manifest's sha256, so ``client_states``
    holds every client's state as the run had it."""
    try:
        payload = read_checkpoint(path, spec_hash, device, expected_sha256, bound=expected_sha256 is not None)
        folder = client_state_folder(Path(path))
        for client, (name, sha256) in payload.pop("client_files", {}).items():
            payload["client_states"][client] = read_checkpoint(folder / name, spec_hash, device, sha256, bound=True)[
                "state"
            ]
    except (FileNotFoundError, CheckpointRejected):
        return None
    payload["client_states"] = dict(sorted(payload["client_states"].items()))
    return payload


__all__ = [
    "CheckpointLedger",
    "CheckpointMirror",
    "CheckpointRejected",
    "FORMAT",
    "VERSION",
    "encode_checkpoint",
    "file_sha256",
    "load_checkpoint",
    "read_checkpoint",
    "save_checkpoint",
    "save_checkpoints",
]
