"""Data sets published as pickles (CIFAR's python batches, FedBN's Digits5/Office/DomainNet splits), read so that
a file cannot run code: a restricted unpickler that builds numpy arrays and plain values only.

A pickle may name any importable callable and have it called while loading; that is how a planted file runs a
command. These formats need none of that: dicts, lists, tuples, str/bytes/int/float (pickle opcodes, no import)
and numpy arrays, which pickle as ``numpy.core.multiarray._reconstruct(numpy.ndarray, ...)`` plus a
``numpy.dtype`` (``numpy.core.numeric._frombuffer`` at protocol 5; ``_codecs.encode`` for bytes written by
Python 3 at protocol 2). Those names are allowed;
any other raises ``UnsafePickle`` before anything is called. Loaders still verify published checksums first
(``fedbench.data.files.verify_files``), so a file that matched is also the publisher's.
"""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path
from typing import Any

import numpy as np


class UnsafePickle(pickle.UnpicklingError):
    """A pickle that names something other than numpy arrays and plain values."""


def _allowed() -> dict[tuple[str, str], Any]:
    reconstruct = np.ndarray.__reduce__(np.zeros(1))[0]  # whatever numpy itself pickles arrays with
    scalar = np.float64(0).__reduce__()[0]
    frombuffer = np.zeros(2).__reduce_ex__(5)[0]  # protocol 5 (Python 3.8+'s HIGHEST_PROTOCOL): numeric._frombuffer
    allowed: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): codecs.encode,
    }
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):  # numpy 1 and 2 spell it differently
        allowed[(module, "_reconstruct")] = reconstruct
        allowed[(module, "scalar")] = scalar
    for module in ("numpy.core.numeric", "numpy._core.numeric"):
        allowed[(module, "_frombuffer")] = frombuffer
    return allowed


_ALLOWED = _allowed()


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED.get((module, name))
        if found is None:
            raise UnsafePickle(f"it names {module}.{name}; only numpy arrays and plain values are read")
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("it refers to persistent objects")


def load_arrays_pickle(path: Path) -> Any:
    """The object pickled in ``path`` (Python 2 strings read as latin-1, as the official CIFAR code does), built
    only from numpy arrays and plain values. Raises ``UnsafePickle`` for anything else, nothing having run."""
    with open(path, "rb") as handle:
        return _ArraysOnly(handle, encoding="latin1").load()


__all__ = ["UnsafePickle", "load_arrays_pickle"]
