"""Time loading MNIST-size data (raw IDX vs prepared cache) and building 100-client partitions.

    python benchmarks/data_load.py [--real-test-files /work/shared/data/mnist-t10k]

Writes a scratch data root with MNIST-format files of the official sizes (60,000 train / 10,000 test): the
real test IDX files when given (tiled 6× for train), random bytes otherwise. Prints seconds per step.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

from fedbench.data import load_dataset
from fedbench.data.mnist import read_idx
from fedbench.data.partition import make_partition
from fedbench.data.provision import prepare_dataset


def idx(array: np.ndarray) -> bytes:
    return bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_mnist(root: Path, real: Path | None) -> None:
    raw = root / "mnist" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    if real:
        test_x = read_idx(real / "t10k-images-idx3-ubyte.gz")
        test_y = read_idx(real / "t10k-labels-idx1-ubyte.gz")
    else:
        rng = np.random.default_rng(0)
        test_x = rng.integers(0, 256, (10000, 28, 28), dtype=np.uint8)
        test_y = rng.integers(0, 10, 10000).astype(np.uint8)
    for name, array in (
        ("train-images-idx3-ubyte.gz", np.tile(test_x, (6, 1, 1))),
        ("train-labels-idx1-ubyte.gz", np.tile(test_y, 6)),
        ("t10k-images-idx3-ubyte.gz", test_x),
        ("t10k-labels-idx1-ubyte.gz", test_y),
    ):
        with gzip.open(raw / name, "wb", compresslevel=6) as handle:
            handle.write(idx(array))


def timed(label: str, fn, repeat: int = 3):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    print(f"{label:<48s} {best * 1000:8.1f} ms (best of {repeat})")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real-test-files", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fedbench-bench-"))
    try:
        write_mnist(root, args.real_test_files)
        timed(
            "load raw IDX.gz (60k+10k, no verify)",
            lambda: load_dataset("mnist", root, verify=False, use_prepared=False),
        )
        timed("prepare (parse + write cache)", lambda: prepare_dataset("mnist", root, verify=False), repeat=1)
        arrays = timed("load prepared (memory-mapped)", lambda: load_dataset("mnist", root, verify=False))
        assert "prepared" in arrays.info
        labels = np.asarray(arrays.train_y)
        timed("materialise prepared train_x in RAM", lambda: np.array(arrays.train_x))
        for name, params in (
            ("iid", {}),
            ("dirichlet", {"alpha": 0.1, "min_size": 10}),
            ("dirichlet", {"alpha": 0.5}),
            ("shards", {"shards_per_client": 2}),
            ("orthogonal", {"clusters": 5}),
            ("samples_per_client", {"samples_per_client": 600, "alpha": 0.5}),
        ):
            timed(
                f"partition {name} {params} × 100 clients",
                lambda name=name, params=params: make_partition(
                    name, labels, None, 100, np.random.default_rng(0), params
                ),
            )

        def end_to_end():
            loaded = load_dataset("mnist", root, verify=False)
            return make_partition(
                "dirichlet", np.asarray(loaded.train_y), None, 100, np.random.default_rng(0), {"alpha": 0.5}
            )

        timed("prepared load + dirichlet(0.5) for 100 clients", end_to_end)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
