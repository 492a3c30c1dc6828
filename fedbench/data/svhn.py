"""SVHN (cropped digits, 32×32): the official MATLAB files ``svhn/{train,test,extra}_32x32.mat``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.files import Download, FileSpec, Source, verify_files
from fedbench.errors import DataError

SVHN_FILES = {
    "train": FileSpec("train_32x32.mat", md5="e26dedcc434d2e4c54c9b2d4a06d8373"),
    "test": FileSpec("test_32x32.mat", md5="eb5a983be6a315427106f1b164d9cef3"),
    "extra": FileSpec("extra_32x32.mat", md5="a93ce644f1a588dc4d68dda5feec44a7"),
}
_URL = "http://ufldl.stanford.edu/housenumbers/"
SVHN_SOURCE = Source(
    layout="svhn/{train,test}_32x32.mat (+ extra_32x32.mat with dataset_params.extra=true)",
    how_to_get="run `fedbench datasets download svhn` (train_32x32.mat and test_32x32.mat from the official SVHN page)",
    downloads=tuple(Download(_URL + f.path, f.path, md5=f.md5) for k, f in SVHN_FILES.items() if k != "extra"),
    license="non-commercial use only (unverified)",
)
# FedImpro [code]: ToTensor only (its MEAN/STD 0.5 are defined but unused) → no normalisation.
SVHN_META = DatasetMeta("svhn", 10, (3, 32, 32), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), used_by=("fedimpro",))


def read_svhn_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    # local: keeps scipy out of datasets' and run's start-up
    from scipy.io import loadmat

    try:
        mat = loadmat(path)
        images, labels = mat["X"], mat["y"]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:  # IndexError: scipy on a non-.mat file
        raise DataError(f"cannot read SVHN file {path} ({error!r}); delete it and download it again") from None
    if images.ndim != 4 or images.shape[:3] != (32, 32, 3) or images.shape[3] != labels.shape[0]:
        raise DataError(
            f"SVHN file {path}: X {images.shape} / y {labels.shape}, expected (32, 32, 3, N) / (N, 1); delete it and download it again"
        )
    # X is (H, W, C, N); label 10 stands for the digit 0.
    return np.ascontiguousarray(images.transpose(3, 2, 0, 1), dtype=np.uint8), labels.reshape(-1).astype(np.int64) % 10


@register_dataset(
    SVHN_META,
    source=SVHN_SOURCE,
    files=("train_32x32.mat", "test_32x32.mat"),
    checksums={f.path: f"md5:{f.md5}" for f in SVHN_FILES.values()},
    counts=(73257, 26032),
)
def load_svhn(root: Path, verify: bool = True, extra: bool = False) -> DatasetArrays:
    """``extra=True`` appends the 531,131 'extra' images to the training pool (FedImpro does not)."""
    specs = [SVHN_FILES["train"], SVHN_FILES["test"]] + ([SVHN_FILES["extra"]] if extra else [])
    info = verify_files("svhn", root, specs, SVHN_SOURCE.how_to_get, verify)
    train_x, train_y = read_svhn_mat(root / SVHN_FILES["train"].path)
    test_x, test_y = read_svhn_mat(root / SVHN_FILES["test"].path)
    if extra:
        extra_x, extra_y = read_svhn_mat(root / SVHN_FILES["extra"].path)
        train_x, train_y = np.concatenate([train_x, extra_x]), np.concatenate([train_y, extra_y])
    info["extra"] = extra
    return DatasetArrays(SVHN_META, train_x, train_y, test_x, test_y, info=info)
