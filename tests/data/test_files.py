"""Checksums of data files (fedbench/data/files.py): a stamp makes the second check free and notices a changed file;
sha256 and unpublished checksums."""

from __future__ import annotations

import hashlib
import os

import pytest

from fedbench.data import files
from fedbench.data.files import FileSpec, verify_files
from fedbench.errors import DataError


def test_stamp_makes_the_second_check_free_and_notices_changes(tmp_path, monkeypatch):
    (tmp_path / "a.bin").write_bytes(b"hello")
    spec = FileSpec("a.bin", md5=hashlib.md5(b"hello").hexdigest())
    assert verify_files("demo", tmp_path, [spec], "get it")["verified"]
    calls = []
    real_digest = files.file_digest
    monkeypatch.setattr(files, "file_digest", lambda *a: calls.append(a) or real_digest(*a))
    assert verify_files("demo", tmp_path, [spec], "get it")["verified"]
    assert calls == [], "a matching stamp skips hashing"
    (tmp_path / "a.bin").write_bytes(b"HELLO")
    os.utime(tmp_path / "a.bin", ns=(1, 1))
    with pytest.raises(DataError, match="corrupt"):
        verify_files("demo", tmp_path, [spec], "get it")
    assert calls, "a changed file is hashed again"


def test_sha256_and_unpublished_checksums(tmp_path):
    (tmp_path / "b.bin").write_bytes(b"data")
    specs = [FileSpec("b.bin", sha256=hashlib.sha256(b"data").hexdigest()), FileSpec("b.bin")]
    result = verify_files("demo", tmp_path, specs, "get it")
    assert result["verified"] is False and "partially" in result["verification"]


def test_a_recorded_digest_is_named_by_its_length():
    from fedbench.data.files import digest_algorithm

    assert digest_algorithm("0" * 32) == "md5" and digest_algorithm("0" * 64) == "sha256"
    assert digest_algorithm("0" * 40) == "digest"  # no publisher's checksum of fedbench's has that length
