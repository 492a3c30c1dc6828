"""The checkpoint file format and its writer, checked against the documented layout (docs/security.md: safetensors'
layout, the payload as JSON in the header metadata) and by hand-built files: which files are read, and the reason
each rejected one gets (the one warning line a user sees): properties the run-level tests leave unchecked
(mutation testing of ``fedbench/checkpoint/format.py`` showed it). Every value a state may hold round-trips exactly,
any damage is a rejection and never another error, and the largest header is safetensors' own limit, 100,000,000
bytes (safetensors' Rust reader: ``MAX_HEADER_SIZE``): a header of exactly that size is read, one byte more is
refused."""

from __future__ import annotations

import hashlib
import json
import math
import struct
import threading
from pathlib import Path

import pytest
import torch

from fedbench.checkpoint.format import (
    CheckpointRejected,
    encode_checkpoint,
    file_sha256,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
    save_checkpoints,
)
from fedbench.checkpoint.location import client_state_folder

# The documented header metadata (docs/security.md): literals, not the module's constants, so that a change of the
# format's name or version shows up here.
FORMAT, VERSION = "fedbench-checkpoint", "2"
SAFETENSORS_DTYPES = {
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


def hand_built(tensors: dict[str, tuple[str, list[int], bytes]], structure, **metadata) -> bytes:
    """A file in safetensors' layout, built here from the specification: 8-byte little-endian header length, the
    JSON header, then the tensor bytes in the order given (data offsets as they fall, aligned or not)."""
    table: dict = {
        "__metadata__": {
            "format": FORMAT,
            "version": VERSION,
            "spec_hash": "abc",
            "round": "1",
            "structure": structure if isinstance(structure, str) else json.dumps(structure),
            **metadata,
        }
    }
    offset, body = 0, b""
    for key, (dtype, shape, raw) in tensors.items():
        table[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        body += raw
    header = json.dumps(table).encode()
    return struct.pack("<Q", len(header)) + header + body


def header_of(path: Path) -> dict:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + size])


def rejection(path: Path, data: bytes, **kwargs) -> str:
    path.write_bytes(data)
    with pytest.raises(CheckpointRejected) as caught:
        read_checkpoint(path, "abc", **kwargs)
    assert str(caught.value) == caught.value.reason
    return caught.value.reason


# ------------------------------------------------------------------ the layout
def test_a_hand_built_file_with_the_documented_metadata_is_read(tmp_path):
    data = hand_built(
        {"x": ("F32", [2], struct.pack("<2f", 1.5, -2.0)), "y": ("I64", [], struct.pack("<q", 7))},
        {"d": [["w", {"t": "x"}], [3, {"u": [{"t": "y"}, {"l": [None, 2.5]}]}]]},
    )
    (tmp_path / "c.pt").write_bytes(data)
    payload = read_checkpoint(tmp_path / "c.pt", "abc")
    assert payload["w"].tolist() == [1.5, -2.0] and payload["spec_hash"] == "abc" and payload["round"] == 1
    assert isinstance(payload[3], tuple) and payload[3][0].item() == 7 and payload[3][1] == [None, 2.5]


def test_the_header_holds_the_documented_metadata_and_the_rest_of_the_payload(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"spec_hash": "abc", "round": 4, "server": {"w": torch.ones(2)}, "note": "n"})
    metadata = header_of(path)["__metadata__"]
    assert {k: metadata[k] for k in ("format", "version", "spec_hash", "round")} == {
        "format": FORMAT,
        "version": VERSION,
        "spec_hash": "abc",
        "round": "4",
    }
    structure = json.loads(metadata["structure"])
    assert [key for key, _ in structure["d"]] == ["server", "note"]  # spec hash and round are header fields only


def test_every_dtype_is_laid_out_as_safetensors_reads_it_aligned_and_padded(tmp_path):
    """Every dtype a checkpoint holds is read by the reference reader with the same values; the header is padded to
    a multiple of 8 and each tensor starts at a multiple of its item size (narrow ones given first)."""
    safetensors = pytest.importorskip("safetensors.torch")
    tensors = {
        f"k{i}": (torch.arange(5) % 2).to(dtype) if dtype == torch.bool else torch.arange(3 + i).to(dtype)
        for i, dtype in enumerate(reversed(list(SAFETENSORS_DTYPES)))
    }
    tensors["empty"] = torch.zeros(0, 2)
    for note in ("", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg"):  # every header length modulo 8
        path = tmp_path / f"c{len(note)}.pt"
        save_checkpoint(path, {"spec_hash": "abc", "round": 1, "note": note, **tensors})
        header = header_of(path)
        (size,) = struct.unpack("<Q", path.read_bytes()[:8])
        assert size % 8 == 0
        entries = {k: v for k, v in header.items() if k != "__metadata__"}
        for entry in entries.values():
            itemsize = {v: k for k, v in SAFETENSORS_DTYPES.items()}[entry["dtype"]].itemsize
            assert entry["data_offsets"][0] % itemsize == 0
        assert path.stat().st_size == 8 + size + max(e["data_offsets"][1] for e in entries.values())
        theirs = safetensors.load_file(path)
        ours = read_checkpoint(path, "abc")
        for key, tensor in tensors.items():
            assert ours[key].dtype == tensor.dtype and torch.equal(ours[key], tensor)
            assert sum(t.dtype == tensor.dtype and torch.equal(t, tensor) for t in theirs.values()) >= 1
            assert SAFETENSORS_DTYPES[tensor.dtype] in {e["dtype"] for e in entries.values()}


def test_wide_tensors_are_aligned_even_after_narrow_ones_of_odd_sizes(tmp_path):
    """Three bools and one int16 before two float64 in the payload: the float64 still start at a multiple of 8."""
    path = tmp_path / "c.pt"
    payload = {
        "flags": torch.tensor([True, False, True]),
        "count": torch.tensor([3], dtype=torch.int16),
        "w": torch.tensor([0.5, -1.5], dtype=torch.float64),
        "v": torch.tensor([2.0], dtype=torch.float32),
    }
    save_checkpoint(path, {"spec_hash": "abc", "round": 1, **payload})
    entries = {k: v for k, v in header_of(path).items() if k != "__metadata__"}
    itemsizes = {"BOOL": 1, "I16": 2, "F64": 8, "F32": 4}
    assert all(e["data_offsets"][0] % itemsizes[e["dtype"]] == 0 for e in entries.values())
    back = read_checkpoint(path, "abc")
    assert all(torch.equal(back[k], v) and back[k].dtype == v.dtype for k, v in payload.items())


def test_gradients_and_parameters_round_trip(tmp_path):
    path = tmp_path / "c.pt"
    payload = {
        "spec_hash": "abc",
        "round": 1,
        "grad": torch.ones(2).requires_grad_(True),
        "plain": torch.ones(2),
        "param": torch.nn.Parameter(torch.ones(2)),
        "frozen": torch.nn.Parameter(torch.ones(2), requires_grad=False),
    }
    save_checkpoint(path, payload)
    back = read_checkpoint(path, "abc")
    assert back["grad"].requires_grad and not isinstance(back["grad"], torch.nn.Parameter)
    assert not back["plain"].requires_grad and not isinstance(back["plain"], torch.nn.Parameter)
    assert isinstance(back["param"], torch.nn.Parameter) and back["param"].requires_grad
    assert isinstance(back["frozen"], torch.nn.Parameter) and not back["frozen"].requires_grad


def test_a_checkpoint_without_tensors_is_read_also_when_it_starts_like_a_pickle(tmp_path):
    """No tensor bytes: the header ends the file. One header length in 32 starts it with 0x80 (a pickle's magic)."""
    for pad in range(512):
        payload = {"spec_hash": "abc", "round": 2, "note": "x" * pad}
        if encode_checkpoint(payload)[0][:1] == b"\x80":
            break
    path = tmp_path / "c.pt"
    save_checkpoint(path, payload)
    assert path.read_bytes()[:1] == b"\x80"
    assert read_checkpoint(path, "abc")["note"] == payload["note"]
    save_checkpoint(path, {"spec_hash": "abc", "round": 2, "s": {}})
    assert read_checkpoint(path, "abc")["s"] == {}


def test_an_unaligned_tensor_of_another_writer_is_read(tmp_path):
    data = hand_built(
        {"a": ("U8", [1], b"\x05"), "b": ("F32", [2], struct.pack("<2f", 0.25, 8.0))},
        {"d": [["a", {"t": "a"}], ["b", {"t": "b"}]]},
    )
    (tmp_path / "c.pt").write_bytes(data)
    payload = read_checkpoint(tmp_path / "c.pt", "abc")
    assert payload["a"].tolist() == [5] and payload["b"].tolist() == [0.25, 8.0]


def test_tensors_go_to_the_device_asked_for(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"spec_hash": "abc", "round": 1, "w": torch.ones(2), "s": {"v": torch.zeros(1)}})
    payload = read_checkpoint(path, "abc", device="meta")
    assert payload["w"].device.type == "meta" and payload["s"]["v"].device.type == "meta"


def test_an_unsupported_value_or_dtype_is_refused_with_its_name():
    with pytest.raises(TypeError) as caught:
        encode_checkpoint({"spec_hash": "abc", "round": 1, "x": object()})
    assert str(caught.value) == (
        "a checkpoint holds tensors, dicts, lists, tuples, str, int, float, bool and None; found object"
    )
    with pytest.raises(TypeError) as caught:
        encode_checkpoint({"spec_hash": "abc", "round": 1, "x": torch.zeros(1, dtype=torch.complex64)})
    assert str(caught.value) == "a checkpoint cannot hold a torch.complex64 tensor"


# ------------------------------------------------------------------ reasons of rejected files
def test_each_kind_of_foreign_or_damaged_file_gets_its_reason(tmp_path):
    path = tmp_path / "c.pt"
    pickle_reason = (
        "it is a pickle (the format of fedbench 0.2 and earlier, or a file planted there), which fedbench never "
        "loads: it could run code"
    )
    good = hand_built({"x": ("F32", [2], struct.pack("<2f", 1.0, 2.0))}, {"d": [["w", {"t": "x"}]]})
    assert rejection(path, b"\x80\x04\x95") == pickle_reason
    assert rejection(path, b"PK\x03\x04" + b"\x00" * 40) == pickle_reason
    # a plausible length, but no JSON header after it: a pickle
    assert rejection(path, b"\x80" + b"\x00" * 7 + b"x" * 200) == pickle_reason
    # a JSON-looking byte after a length the file cannot hold: a pickle too
    assert rejection(path, b"\x80" + b"\x00" * 7 + b"{" + b" " * 10) == pickle_reason
    assert rejection(path, b"abc") == "it is truncated or not a fedbench checkpoint (too short)"
    assert rejection(path, struct.pack("<Q", 5)) == "it is truncated or not a fedbench checkpoint (no complete header)"
    assert rejection(path, good[:20]) == "it is truncated or not a fedbench checkpoint (no complete header)"
    assert rejection(path, b"hello, this is a text file") == (
        "it is truncated or not a fedbench checkpoint (no complete header)"
    )
    assert rejection(path, struct.pack("<Q", 4) + b"{]  ") == "it is not a fedbench checkpoint (unreadable header)"
    for header in (b'{"__metadata__": [1]}', b'{"__metadata__": {"format": "other"}}', b"{}"):
        assert rejection(path, struct.pack("<Q", len(header)) + header) == "it is not a fedbench checkpoint"
    assert rejection(path, hand_built({}, {"d": []}, version="1")) == (
        "it is a version '1' fedbench checkpoint; this fedbench reads version 2"
    )
    cut = len(good) - 3
    assert rejection(path, good[:cut]) == f"it is truncated ({cut} bytes of {len(good)})"
    assert rejection(path, good, expected_sha256=None, bound=True) == (
        "the registry holds no record of it (it was not written by this run)"
    )
    actual = hashlib.sha256(good).hexdigest()
    assert rejection(path, good, expected_sha256="0123456789abcdef" * 4, bound=True) == (
        f"its content (sha256 {actual[:12]}…) differs from the registry's record (0123456789ab…): "
        "changed since this run wrote it"
    )
    path.write_bytes(good)
    with pytest.raises(CheckpointRejected) as caught:
        read_checkpoint(path, "xyz")
    assert caught.value.reason == "it belongs to another spec ('abc', not 'xyz')"


@pytest.mark.parametrize(
    "entry",
    [
        {"dtype": "F32", "shape": [-1, -2], "data_offsets": [0, 8]},  # negative sizes whose product fits
        {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},  # 8 bytes, but the file holds 8 in all
        {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]},
        {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]},
        {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]},
        {"dtype": "F32", "shape": [2]},
    ],
)
def test_a_malformed_tensor_table_is_rejected(tmp_path, entry):
    metadata = {"format": FORMAT, "version": VERSION, "spec_hash": "abc", "round": "1", "structure": '{"d":[]}'}
    header = json.dumps({"__metadata__": metadata, "x": entry}).encode()
    data = struct.pack("<Q", len(header)) + header + b"\x00" * 8
    reason = rejection(tmp_path / "c.pt", data)
    if entry.get("data_offsets") == [4, 12]:
        assert reason == f"it is truncated ({len(data)} bytes of {len(data) + 4})"
    else:
        assert reason == "it is not a fedbench checkpoint (malformed tensor table)"


def test_a_second_tensor_must_fill_exactly_its_range(tmp_path):
    metadata = {"format": FORMAT, "version": VERSION, "spec_hash": "abc", "round": "1", "structure": '{"d":[]}'}
    table = {
        "__metadata__": metadata,
        "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "y": {"dtype": "F32", "shape": [2], "data_offsets": [8, 12]},
    }
    header = json.dumps(table).encode()
    reason = rejection(tmp_path / "c.pt", struct.pack("<Q", len(header)) + header + b"\x00" * 16)
    assert reason == "it is not a fedbench checkpoint (malformed tensor table)"


@pytest.mark.parametrize(
    ("structure", "reason"),
    [
        ("{", "it is corrupt (JSONDecodeError in its metadata)"),
        ('{"l": []}', "its structure is not a checkpoint payload"),
        ("[1]", "its structure holds '[1]', which is not a checkpoint value"),
        ('{"d": [["k", [1]]]}', "its structure holds '[1]', which is not a checkpoint value"),
        ('{"d": ["ab"]}', "its structure holds \"{'d': ['ab']}\", which is not a checkpoint value"),
        ('{"d": [5]}', "its structure holds \"{'d': [5]}\", which is not a checkpoint value"),
        ('{"d": 5}', "its structure holds \"{'d': 5}\", which is not a checkpoint value"),
        ('{"x": [["k", 1]]}', "its structure holds \"{'x': [['k', 1]]}\", which is not a checkpoint value"),
        ('{"u": 5}', "its structure holds \"{'u': 5}\", which is not a checkpoint value"),
        ('{"d": [["k", {}]]}', "its structure holds '{}', which is not a checkpoint value"),
        (
            '{"d": [["k", {"a": 1, "b": 2}]]}',
            "its structure holds \"{'a': 1, 'b': 2}\", which is not a checkpoint value",
        ),
        (
            '{"d": [["k", {"q": "' + "y" * 80 + '"}]]}',
            "its structure holds " + repr(str({"q": "y" * 80})[:60]) + ", which is not a checkpoint value",
        ),
        ('{"d": [[{"l": [1]}, 1]]}', "its structure has an unhashable key {'l': [1]}"),
        ('{"d": [[{"u": [{"l": []}]}, 1]]}', "its structure is malformed (TypeError)"),
        ('{"d": [["w", {"t": "t9"}]]}', "its structure names a tensor 't9' the file does not hold"),
        ('{"d": [["w", {"t": 5}]]}', "its structure names a tensor 5 the file does not hold"),
    ],
)
def test_a_malformed_structure_is_rejected_with_its_reason(tmp_path, structure, reason):
    assert rejection(tmp_path / "c.pt", hand_built({}, structure)) == reason


def test_a_file_that_shrank_while_it_was_read_is_rejected(tmp_path, monkeypatch):
    """The size the file had when opened is more than it holds (it was cut meanwhile): rejected, not padded."""
    import os

    path = tmp_path / "c.pt"
    save_checkpoint(path, {"spec_hash": "abc", "round": 1, "w": torch.ones(2)})
    real_fstat = os.fstat

    class Larger:
        def __init__(self, result):
            self.st_size = result.st_size + 64

    monkeypatch.setattr(os, "fstat", lambda fd: Larger(real_fstat(fd)))
    outcome: list = []

    def read() -> None:
        try:
            read_checkpoint(path, "abc")
            outcome.append("read")
        except CheckpointRejected as exc:
            outcome.append(exc.reason)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert outcome == ["it changed while it was read"]


def test_a_large_checkpoint_is_hashed_and_read_in_chunks_exactly(tmp_path):
    """17 MiB of tensor bytes: the writer hashes in a second thread and the reader in 16 MiB chunks; both hashes are
    the file's sha256 and the values come back exactly."""
    path = tmp_path / "big.pt"
    weights = torch.arange(17 * (1 << 18), dtype=torch.float32)  # 17 MiB
    digest = save_checkpoint(path, {"spec_hash": "abc", "round": 1, "w": weights})
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest() == file_sha256(path)
    back = read_checkpoint(path, "abc", expected_sha256=digest, bound=True)
    assert torch.equal(back["w"], weights)


# ------------------------------------------------------------------ writing
def test_save_checkpoint_hands_the_durable_temporary_file_beside_it_before_replacing(tmp_path):
    path = tmp_path / "deep" / "er" / "run.pt"  # folders that do not exist yet
    first = save_checkpoint(path, {"spec_hash": "abc", "round": 1})
    seen: list = []

    def record(temporary: Path, digest: str) -> None:
        seen.append((temporary.parent, temporary.name, file_sha256(temporary), digest, file_sha256(path)))

    second = save_checkpoint(path, {"spec_hash": "abc", "round": 2}, record=record)
    ((folder, name, temporary_hash, digest, current_hash),) = seen
    assert folder == path.parent and name.startswith("run.pt") and name.endswith(".tmp")
    assert temporary_hash == digest == second == file_sha256(path) and current_hash == first
    assert read_checkpoint(path, "abc")["round"] == 2
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.pt"]


def test_several_files_are_written_together_and_none_replaced_if_the_callback_fails(tmp_path):
    paths = [tmp_path / f"{i}.pt" for i in range(3)]
    for path in paths:
        save_checkpoint(path, {"spec_hash": "abc", "round": 1})
    seen: list = []

    def refuse(temporaries: list[Path], digests: list[str]) -> None:
        seen.append([file_sha256(t) for t in temporaries] == digests)
        raise RuntimeError("the registry is gone")

    with pytest.raises(RuntimeError, match="the registry is gone"):
        save_checkpoints([(p, {"spec_hash": "abc", "round": 2}) for p in paths], refuse)
    assert seen == [True]
    assert [read_checkpoint(p, "abc")["round"] for p in paths] == [1, 1, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.pt", "1.pt", "2.pt"]
    digests = save_checkpoints([(p, {"spec_hash": "abc", "round": 3}) for p in paths])
    assert digests == [file_sha256(p) for p in paths] and [read_checkpoint(p, "abc")["round"] for p in paths] == [3] * 3


# ------------------------------------------------------------------ the run's files
def test_load_checkpoint_reads_filed_client_states_and_checks_them(tmp_path):
    path = tmp_path / "run.pt"
    folder = client_state_folder(path)
    state = {"c": torch.arange(3.0)}
    sha = save_checkpoint(folder / "4-r2.state", {"spec_hash": "abc", "round": 2, "client": 4, "state": state})
    payload = {
        "spec_hash": "abc",
        "round": 2,
        "client_states": {5: {}, 1: {}},
        "client_files": {4: ["4-r2.state", sha]},
    }
    digest = save_checkpoint(path, payload)
    loaded = load_checkpoint(path, "abc")
    assert set(loaded) == {"spec_hash", "round", "client_states"}  # the manifest is resolved, not passed on
    assert list(loaded["client_states"]) == [1, 4, 5]  # every client's state, in client order
    assert torch.equal(loaded["client_states"][4]["c"], state["c"])
    assert load_checkpoint(path, "abc", expected_sha256=digest)["round"] == 2
    assert load_checkpoint(path, "abc", expected_sha256="0" * 64) is None
    save_checkpoint(folder / "4-r2.state", {"spec_hash": "abc", "round": 2, "client": 4, "state": {"c": torch.ones(3)}})
    assert load_checkpoint(path, "abc") is None  # the client file is not the one the manifest recorded
    assert load_checkpoint(tmp_path / "missing.pt", "abc") is None


def test_hash_of_a_file_is_its_sha256(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 100)
    assert file_sha256(tmp_path / "f") == hashlib.sha256(b"x" * 100).hexdigest()


def test_the_format_round_trips_every_value_a_state_may_hold_exactly(tmp_path):
    shared = torch.arange(6, dtype=torch.float32)
    payload = {
        "spec_hash": "abc",
        "round": 3,
        "server": {"params": shared, "buffers": {"bn.num_batches_tracked": torch.tensor(5)}, "state": {}},
        "client_states": {
            0: {"c": torch.randn(4, dtype=torch.float64), "same": shared, "view": shared[2:4]},
            2: {"affinity": {(0, 2): 0.1 + 0.2, (2, 0): math.inf}, "pair": (torch.ones(2), [1, "a", None, True])},
        },
        "finetune_start": None,
        "empty": torch.zeros(0, 3),
        "grad": torch.nn.Parameter(torch.ones(2)),
        "nan": math.nan,
        "half": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        "mask": torch.tensor([[True, False]]),
        "strided": torch.arange(12.0).reshape(3, 4).t(),  # not contiguous
    }
    save_checkpoint(tmp_path / "c.pt", payload)
    back = read_checkpoint(tmp_path / "c.pt", "abc")
    assert back["round"] == 3 and back["client_states"][2]["affinity"] == {(0, 2): 0.1 + 0.2, (2, 0): math.inf}
    assert isinstance(back["client_states"][2]["pair"], tuple) and back["client_states"][2]["pair"][1] == [
        1,
        "a",
        None,
        True,
    ]
    assert torch.equal(back["client_states"][0]["c"], payload["client_states"][0]["c"])
    assert back["client_states"][0]["same"] is back["server"]["params"]  # one tensor stays one tensor
    assert torch.equal(back["client_states"][0]["view"], shared[2:4])
    assert back["server"]["buffers"]["bn.num_batches_tracked"].dtype == torch.int64
    assert back["empty"].shape == (0, 3) and isinstance(back["grad"], torch.nn.Parameter) and back["grad"].requires_grad
    assert math.isnan(back["nan"])
    for key in ("half", "mask", "strided"):
        assert back[key].dtype == payload[key].dtype and torch.equal(back[key], payload[key])
    with pytest.raises(TypeError, match="found object"):
        encode_checkpoint({"spec_hash": "abc", "round": 1, "x": object()})


def test_the_file_is_in_safetensors_layout_both_ways(tmp_path):
    """Our files are safetensors files (the reference reader agrees on every tensor), and a tensor table written
    by the reference writer is read by ours: the layout is the documented one, not a private variant."""
    safetensors = pytest.importorskip("safetensors.torch")
    payload = {"spec_hash": "abc", "round": 2, "w": torch.randn(5, 3), "n": torch.tensor(7), "b": torch.ones(4).bool()}
    save_checkpoint(tmp_path / "ours.pt", payload)
    theirs = safetensors.load_file(tmp_path / "ours.pt")
    mine = read_checkpoint(tmp_path / "ours.pt", "abc")
    assert len(theirs) == 3 and {k: v for k, v in mine.items() if isinstance(v, torch.Tensor)}.keys() == {"w", "n", "b"}
    assert sorted(tuple(t.shape) for t in theirs.values()) == sorted(tuple(mine[k].shape) for k in ("w", "n", "b"))
    assert all(any(torch.equal(t, mine[k]) for t in theirs.values()) for k in ("w", "n", "b"))
    # the reference writer with our metadata: read back by ours
    from fedbench.checkpoint.format import FORMAT, VERSION

    metadata = {
        "format": FORMAT,
        "version": str(VERSION),
        "spec_hash": "abc",
        "round": "1",
        "structure": '{"d":[["w",{"t":"x"}]]}',
    }
    (tmp_path / "theirs.pt").write_bytes(safetensors.save({"x": torch.arange(6.0).reshape(2, 3)}, metadata=metadata))
    assert torch.equal(read_checkpoint(tmp_path / "theirs.pt", "abc")["w"], torch.arange(6.0).reshape(2, 3))


def test_a_checkpoint_with_a_wrong_recorded_hash_is_refused_and_a_right_one_read(tmp_path):
    path = tmp_path / "c.pt"
    digest = save_checkpoint(path, {"spec_hash": "abc", "round": 1, "x": torch.ones(2)})
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert read_checkpoint(path, "abc", expected_sha256=digest, bound=True)["round"] == 1
    with pytest.raises(CheckpointRejected, match="differs"):
        read_checkpoint(path, "abc", expected_sha256="0" * 64, bound=True)
    assert not list(tmp_path.glob("*.tmp"))  # the atomic write left no temporary file


def test_a_checkpoint_whose_header_length_starts_like_a_pickle_is_read(tmp_path):
    """The header length is the file's first 8 bytes (little-endian): one length in 32 (low byte 0x80) starts the
    file with a pickle's magic byte. Such a checkpoint is ours (a JSON header follows) and is read back."""
    for pad in range(512):
        payload = {"spec_hash": "abc", "round": 2, "note": "x" * pad, "w": torch.arange(4.0)}
        if encode_checkpoint(payload)[0][:1] == b"\x80":
            break
    else:
        pytest.fail("no padding gave a header length with low byte 0x80")
    path = tmp_path / "c.pt"
    digest = save_checkpoint(path, payload)
    assert path.read_bytes()[:1] == b"\x80"
    loaded = read_checkpoint(path, "abc", expected_sha256=digest, bound=True)
    assert loaded["note"] == payload["note"] and torch.equal(loaded["w"], payload["w"])


def test_any_damage_to_a_checkpoint_is_a_rejection_never_another_error(tmp_path):
    """Random byte changes (header, structure, tensor bytes), cuts and nesting beyond the stack: reading either
    gives a payload (a changed tensor value; the registry's hash catches that) or raises CheckpointRejected."""
    import random

    path = tmp_path / "c.pt"
    save_checkpoint(path, {"spec_hash": "abc", "round": 1, "s": {(0, 1): [1.5, None]}, "w": torch.arange(8.0)})
    good = path.read_bytes()
    rng = random.Random(0)
    outcomes = {"read": 0, "rejected": 0}
    for trial in range(300):
        data = bytearray(good)
        if trial % 3 == 2:
            data = data[: rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
        try:
            read_checkpoint(path, "abc")
            outcomes["read"] += 1
        except CheckpointRejected:
            outcomes["rejected"] += 1
    assert outcomes["rejected"] > 100 and sum(outcomes.values()) == 300
    from fedbench.checkpoint.format import FORMAT, VERSION

    deep = "[" * 100_000 + "]" * 100_000
    for structure in (deep, '{"l": ' * 50_000 + "1" + "}" * 50_000):
        metadata = {"format": FORMAT, "version": str(VERSION), "spec_hash": "abc", "round": "1", "structure": structure}
        header = json.dumps({"__metadata__": metadata}).encode()
        header += b" " * (-len(header) % 8)
        path.write_bytes(struct.pack("<Q", len(header)) + header)
        with pytest.raises(CheckpointRejected):
            read_checkpoint(path, "abc")


def test_a_header_whose_length_looks_like_a_pickle_is_still_read(tmp_path):
    """The header length is little-endian: a header of 0x480 bytes makes a file begin with \\x80\\x04, a protocol-4
    pickle's first two bytes. Such a checkpoint (1 in 32 of them, headers being padded to 8 bytes) is ours and is
    read, not refused as a pickle — which made the run start again from round 0."""
    for size in range(256):
        payload = {"spec_hash": "abc", "round": 1, "x": torch.ones(2), "note": "n" * size}
        header, _ = encode_checkpoint(payload)
        if header[0] == 0x80:
            break
    assert header[0] == 0x80
    save_checkpoint(tmp_path / "c.pt", payload)
    assert read_checkpoint(tmp_path / "c.pt", "abc")["note"] == payload["note"]


# the largest header: about 200 MB written and read, so the file's last test
LIMIT = 100_000_000


def file_with_header_of(size: int) -> bytes:
    metadata = {
        "format": "fedbench-checkpoint",
        "version": "2",
        "spec_hash": "abc",
        "round": "1",
        "structure": '{"d":[]}',
    }
    header = json.dumps({"__metadata__": metadata}).encode()
    return struct.pack("<Q", size) + header + b" " * (size - len(header))


def test_a_header_of_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "c.pt"
    path.write_bytes(file_with_header_of(LIMIT))
    assert read_checkpoint(path, "abc")["round"] == 1
    path.write_bytes(file_with_header_of(LIMIT + 1))
    with pytest.raises(CheckpointRejected) as caught:
        read_checkpoint(path, "abc")
    assert caught.value.reason == "it is truncated or not a fedbench checkpoint (no complete header)"
