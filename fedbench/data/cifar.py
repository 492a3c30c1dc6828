"""CIFAR-10 and CIFAR-100: the official "python version" pickles, unpacked from the official tarballs
(``cifar10/cifar-10-batches-py/``, ``cifar100/cifar-100-python/``)."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import IMAGENET, NONE3, with_normalization
from fedbench.data.files import Download, FileSpec, Source, verify_files
from fedbench.data.safe_pickle import load_arrays_pickle
from fedbench.errors import ConfigError, DataError

# Normalisation presets (mean, std) per paper; ``dataset_params.normalization`` selects one.
CIFAR10_NORMALIZATION = {
    # FedImpro [code] (and FedTR's "per-channel mean/std" [proposal]): the data set's own statistics.
    "cifar": ((0.49139968, 0.48215827, 0.44653124), (0.24703233, 0.24348505, 0.26158768)),
    # FedDr+ and FedTrip [code]: ImageNet statistics.
    "imagenet": IMAGENET,
    "none": NONE3,
}
CIFAR100_NORMALIZATION = {
    # FedImpro [code]; FedDr+ [code] uses the same values rounded to 3 digits.
    "cifar": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "imagenet": IMAGENET,
    "none": NONE3,
}


def read_cifar_pickle(path: Path, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = load_arrays_pickle(path)  # only after verify_files matched its checksum (or --no-verify)
        data = np.asarray(batch["data"], dtype=np.uint8)
        labels = np.asarray(batch[label_key], dtype=np.int64)
    except (OSError, pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as error:
        raise DataError(f"cannot read CIFAR batch {path} ({error!r}); delete it and download it again") from None
    if data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
        raise DataError(f"CIFAR batch {path} has data {data.shape} and {len(labels)} labels; expected (N, 3072)")
    # Rows are 1024 red, 1024 green, 1024 blue values in row-major order: already CHW.
    return data.reshape(-1, 3, 32, 32), labels


# ---- CIFAR-10 ---------------------------------------------------------------------------------------
CIFAR10_FILES = (
    FileSpec("cifar-10-batches-py/data_batch_1", md5="c99cafc152244af753f735de768cd75f"),
    FileSpec("cifar-10-batches-py/data_batch_2", md5="d4bba439e000b95fd0a9bffe97cbabec"),
    FileSpec("cifar-10-batches-py/data_batch_3", md5="54ebc095f3ab1f0389bbae665268c751"),
    FileSpec("cifar-10-batches-py/data_batch_4", md5="634d18415352ddfa80567beed471001a"),
    FileSpec("cifar-10-batches-py/data_batch_5", md5="482c414d41f54cd18b22e5b47cb7c3cb"),
    FileSpec("cifar-10-batches-py/test_batch", md5="40351d587109b95175f43aff81a1287e"),
)
CIFAR10_SOURCE = Source(
    layout="cifar10/cifar-10-batches-py/{data_batch_1..5,test_batch} (official tarball unpacked)",
    how_to_get="run `fedbench datasets download cifar10` (cifar-10-python.tar.gz from the official CIFAR page, unpacked in place)",
    downloads=(
        Download(
            "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            "cifar-10-python.tar.gz",
            md5="c58f30108f718f92721af3b95e74349a",
            extract=True,
        ),
    ),
    license="no formal licence; cite Krizhevsky 2009",
)
CIFAR10_META = DatasetMeta(
    "cifar10", 10, (3, 32, 32), *CIFAR10_NORMALIZATION["cifar"], used_by=("fedtr", "feddrplus", "fedtrip", "fedimpro")
)


@register_dataset(
    CIFAR10_META,
    source=CIFAR10_SOURCE,
    files=tuple(f.path for f in CIFAR10_FILES),
    checksums={f.path: f"md5:{f.md5}" for f in CIFAR10_FILES},
    counts=(50000, 10000),
)
def load_cifar10(root: Path, verify: bool = True, normalization: str = "cifar") -> DatasetArrays:
    """``normalization``: 'cifar' (FedImpro, FedTR), 'imagenet' (FedDr+, FedTrip), 'none'."""
    meta = with_normalization(CIFAR10_META, CIFAR10_NORMALIZATION, normalization)
    info = verify_files("cifar10", root, CIFAR10_FILES, CIFAR10_SOURCE.how_to_get, verify, pickled=True)
    train = [read_cifar_pickle(root / f.path, "labels") for f in CIFAR10_FILES[:5]]
    test_x, test_y = read_cifar_pickle(root / CIFAR10_FILES[5].path, "labels")
    train_x = np.concatenate([x for x, _ in train])
    train_y = np.concatenate([y for _, y in train])
    info["normalization"] = normalization
    return DatasetArrays(meta, train_x, train_y, test_x, test_y, info=info)


# ---- CIFAR-100 --------------------------------------------------------------------------------------
CIFAR100_FILES = (
    FileSpec("cifar-100-python/train", md5="16019d7e3df5f24257cddd939b257f8d"),
    FileSpec("cifar-100-python/test", md5="f0ef6b0ae62326f3e7ffdfab6717acfc"),
)
CIFAR100_SOURCE = Source(
    layout="cifar100/cifar-100-python/{train,test} (official tarball unpacked)",
    how_to_get="run `fedbench datasets download cifar100` (cifar-100-python.tar.gz from the official CIFAR page, unpacked in place)",
    downloads=(
        Download(
            "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
            "cifar-100-python.tar.gz",
            md5="eb9058c3a382ffc7106e4002c42a8d85",
            extract=True,
        ),
    ),
    license="no formal licence; cite Krizhevsky 2009",
)
CIFAR100_META = DatasetMeta(
    "cifar100", 100, (3, 32, 32), *CIFAR100_NORMALIZATION["cifar"], used_by=("feddrplus", "fedimpro")
)


@register_dataset(
    CIFAR100_META,
    source=CIFAR100_SOURCE,
    files=tuple(f.path for f in CIFAR100_FILES),
    checksums={f.path: f"md5:{f.md5}" for f in CIFAR100_FILES},
    counts=(50000, 10000),
)
def load_cifar100(root: Path, verify: bool = True, normalization: str = "cifar", labels: str = "fine") -> DatasetArrays:
    """``labels``: 'fine' (100 classes) or 'coarse' (20 superclasses)."""
    if labels not in ("fine", "coarse"):
        raise ConfigError(f"dataset_params.labels={labels!r} for cifar100; choose 'fine' or 'coarse'")
    meta = with_normalization(CIFAR100_META, CIFAR100_NORMALIZATION, normalization)
    if labels == "coarse":
        meta = replace(meta, num_classes=20)
    info = verify_files("cifar100", root, CIFAR100_FILES, CIFAR100_SOURCE.how_to_get, verify, pickled=True)
    train_x, train_y = read_cifar_pickle(root / CIFAR100_FILES[0].path, f"{labels}_labels")
    test_x, test_y = read_cifar_pickle(root / CIFAR100_FILES[1].path, f"{labels}_labels")
    info.update(normalization=normalization, labels=labels)
    return DatasetArrays(meta, train_x, train_y, test_x, test_y, info=info)
