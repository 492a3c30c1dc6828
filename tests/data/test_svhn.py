"""The SVHN loader (fedbench/data/svhn.py) reads a tiny file written in the official .mat format."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import check_arrays
from fedbench.data import load_dataset, svhn
from fedbench.data.files import file_digest
from fedbench.errors import DataError


def test_svhn_mat(tmp_path, monkeypatch):
    written = fx.write_svhn(tmp_path)
    root = tmp_path / "svhn"
    patched = {
        k: dataclasses.replace(f, md5=file_digest(root / f.path)) if (root / f.path).exists() else f
        for k, f in svhn.SVHN_FILES.items()
    }
    monkeypatch.setattr(svhn, "SVHN_FILES", patched)
    arrays = load_dataset("svhn", tmp_path)
    check_arrays(arrays, 15, 7, (3, 32, 32))
    np.testing.assert_array_equal(arrays.train_x, written["train_x"])
    np.testing.assert_array_equal(arrays.train_y, written["train_y"])
    assert arrays.train_y.max() <= 9
    assert arrays.info["verified"]
    with pytest.raises(DataError, match="extra_32x32.mat"):
        load_dataset("svhn", tmp_path, extra=True)
