"""The largest header a checkpoint may have is safetensors' own limit, 100,000,000 bytes (safetensors' Rust reader:
``MAX_HEADER_SIZE``): a header of exactly that size is read, one byte more is refused. About 200 MB written and
read, so this file runs last in the mutation map (``tests/mutation_map.toml``)."""

from __future__ import annotations

import json
import struct

import pytest

from fedbench.checkpoint.format import CheckpointRejected, read_checkpoint

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
