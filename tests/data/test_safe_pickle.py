"""Pickled data files cannot run code (fedbench.data.safe_pickle, docs/security.md "Downloaded data files").

CIFAR's python batches (written by Python 2's cPickle: byte strings as BINSTRING, numpy named
``numpy.core.multiarray``) and FedBN's pickles (Python 3, HIGHEST_PROTOCOL) load through the restricted
unpickler; a planted pickle is refused before it runs — after a checksum mismatch when one is published, by the
unpickler otherwise — and a run that reads pickles without a matched checksum warns once."""

from __future__ import annotations

import dataclasses
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import data_fixtures as fx
from fedbench.cli import app
from fedbench.data import cifar, load_dataset
from fedbench.data.files import file_digest
from fedbench.data.safe_pickle import UnsafePickle, load_arrays_pickle
from fedbench.errors import DataError
from fedbench.settings import Settings


class Python2Pickler(pickle._Pickler):  # the pure-Python pickler, whose opcodes can be chosen
    """Writes what Python 2's cPickle wrote for CIFAR: bytes as (SHORT_)BINSTRING, numpy as ``numpy.core``."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_bytes(self, obj: bytes) -> None:
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_bytes

    def save_global(self, obj, name=None) -> None:
        module, qualname = obj.__module__.replace("numpy._core", "numpy.core"), name or obj.__qualname__
        self.write(pickle.GLOBAL + f"{module}\n{qualname}\n".encode())
        self.memoize(obj)

    dispatch[type] = save_global
    dispatch[type(np.ndarray.__reduce__(np.zeros(1))[0])] = save_global


def python2_cifar_batch(path: Path, n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = rng.integers(0, 10, n).tolist()
    batch = {b"batch_label": b"training batch 1 of 5", b"labels": labels, b"data": data, b"filenames": [b"a.png"] * n}
    with open(path, "wb") as handle:
        Python2Pickler(handle, protocol=2).dump(batch)
    return data, labels


class CreatesMarker:
    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_python2_cifar_batches_load_through_the_restricted_unpickler(tmp_path, monkeypatch):
    folder = tmp_path / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    written = [python2_cifar_batch(folder / f.path.split("/")[-1], 4 + i, i) for i, f in enumerate(cifar.CIFAR10_FILES)]
    raw = (folder / "data_batch_1").read_bytes()
    assert b"cnumpy.core.multiarray\n_reconstruct" in raw and b"U\x04data" in raw  # the real format's opcodes
    monkeypatch.setattr(
        cifar,
        "CIFAR10_FILES",
        tuple(dataclasses.replace(f, md5=file_digest(tmp_path / "cifar10" / f.path)) for f in cifar.CIFAR10_FILES),
    )
    arrays = load_dataset("cifar10", tmp_path)
    np.testing.assert_array_equal(arrays.train_x.reshape(-1, 3072), np.concatenate([d for d, _ in written[:5]]))
    np.testing.assert_array_equal(arrays.test_y, written[5][1])
    assert arrays.info["verified"] and "unchecked_pickles" not in arrays.info


def test_fedbn_pickles_of_arrays_and_of_paths_load(tmp_path):
    fx.write_digits5(tmp_path)
    images, labels = load_arrays_pickle(tmp_path / "digits5" / "SVHN" / "train.pkl")
    assert images.dtype == np.uint8 and images.shape == (8, 32, 32, 3) and labels.shape == (8,)
    arrays = np.array([np.arange(3), "x", None], dtype=object)  # object arrays hold pickled values inside
    (tmp_path / "objects.pkl").write_bytes(pickle.dumps(arrays, pickle.HIGHEST_PROTOCOL))
    back = load_arrays_pickle(tmp_path / "objects.pkl")
    assert back[1] == "x" and back[2] is None and np.array_equal(back[0], np.arange(3))


def test_a_planted_pickle_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps({"data": CreatesMarker(marker)}, protocol=2))
    with pytest.raises(UnsafePickle, match="io.open"):
        load_arrays_pickle(tmp_path / "evil.pkl")
    assert not marker.exists()
    pickle.loads((tmp_path / "evil.pkl").read_bytes())  # the same file read the usual way runs its command
    assert marker.exists()


def test_a_planted_cifar_batch_is_stopped_by_its_checksum_then_by_the_unpickler(tmp_path, monkeypatch):
    fx.write_cifar10(tmp_path)
    root = tmp_path / "cifar10"
    monkeypatch.setattr(
        cifar,
        "CIFAR10_FILES",
        tuple(dataclasses.replace(f, md5=file_digest(root / f.path)) for f in cifar.CIFAR10_FILES),
    )
    marker = tmp_path / "pwned"
    (root / "cifar-10-batches-py" / "data_batch_3").write_bytes(pickle.dumps(CreatesMarker(marker), protocol=2))
    unpickled = []
    monkeypatch.setattr(cifar, "load_arrays_pickle", lambda path: unpickled.append(path) or pytest.fail("unpickled"))
    with pytest.raises(DataError, match="data_batch_3 is corrupt"):  # checksum first: nothing is unpickled
        load_dataset("cifar10", tmp_path)
    assert unpickled == [] and not marker.exists()
    monkeypatch.undo()
    with pytest.raises(DataError, match="cannot read CIFAR batch .*data_batch_3.*io.open"):  # --no-verify
        load_dataset("cifar10", tmp_path, verify=False)
    assert not marker.exists()


def test_a_planted_digits5_pickle_is_refused(tmp_path):
    fx.write_digits5(tmp_path)
    marker = tmp_path / "pwned"
    target = tmp_path / "digits5" / "USPS" / "test.pkl"
    target.write_bytes(pickle.dumps((CreatesMarker(marker), [1]), pickle.HIGHEST_PROTOCOL))
    with pytest.raises(DataError, match="USPS/test.pkl"):
        load_dataset("digits5", tmp_path)
    assert not marker.exists()


def test_reading_pickles_unchecked_warns_once(tmp_path, monkeypatch):
    """--no-verify on CIFAR, and Digits5 (no checksum published): one warning line each, through the CLI."""
    from fedbench.execution.batch import prepare_batch
    from fedbench.execution.options import ExecutionOptions
    from fedbench.execution.selection import select_runs

    fx.write_cifar10(tmp_path)
    fx.write_digits5(tmp_path)
    monkeypatch.setattr(
        cifar,
        "CIFAR10_FILES",
        tuple(dataclasses.replace(f, md5=file_digest(tmp_path / "cifar10" / f.path)) for f in cifar.CIFAR10_FILES),
    )
    checked = CliRunner().invoke(app, ["datasets", "check", "cifar10", "--data-dir", str(tmp_path)])
    assert checked.exit_code == 0 and "warning" not in checked.output, checked.output
    unchecked = CliRunner().invoke(app, ["datasets", "check", "cifar10", "--data-dir", str(tmp_path), "--no-verify"])
    lines = [line for line in unchecked.output.splitlines() if "warning" in line]
    assert unchecked.exit_code == 0 and len(lines) == 1 and "unpickled unchecked (--no-verify)" in lines[0]
    recipe = tmp_path / "d5.toml"
    recipe.write_text(
        """
paper = "pickletest"
name = "d5"
seeds = [0, 1]
[setup]
algorithm = "fedavg"
dataset = "digits5"
model = "digits_mlp"
partition = "natural"
num_clients = 5
clients_per_round = 5
rounds = 1
"""
    )
    planned = select_runs([recipe], device="cpu")
    options = ExecutionOptions(
        registry_url=f"sqlite:///{tmp_path / 'r.db'}", device="cpu", settings=Settings(data_root=str(tmp_path))
    )
    work = prepare_batch(planned, options)
    assert len(planned) == 2 and len(work.warnings) == 1  # two runs, one data set: one line
    assert "'digits5': 10 pickle file(s)" in work.warnings[0] and "no checksum is published" in work.warnings[0]
