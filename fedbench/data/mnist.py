"""MNIST, Fashion-MNIST and EMNIST (balanced): gzipped IDX files.

Layouts are the ones torchvision and the official EMNIST archive use:
``mnist/MNIST/raw/*.gz``, ``fmnist/FashionMNIST/raw/*.gz`` and ``emnist/gzip.zip`` (read in place) or
its unpacked ``emnist/gzip/emnist-balanced-*.gz``.
"""

from __future__ import annotations

import gzip
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.files import Download, FileSpec, Source, verify_files
from fedbench.data.images import resize_uint8
from fedbench.errors import ConfigError, DataError

_IDX_TYPES: dict[int, DTypeLike] = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def parse_idx(data: bytes, what: str = "IDX file") -> np.ndarray:
    """Decode an IDX buffer (big-endian magic: two zero bytes, a type code, the number of dimensions)."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise DataError(
            f"{what} is not an IDX file (bad magic number {data[:4].hex()}); delete it and download it again"
        )
    ndim = data[3]
    header = 4 + 4 * ndim
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    if len(data) - header != expected:
        raise DataError(
            f"{what} is truncated: header says {dims} ({expected} bytes), found {len(data) - header}; "
            "delete it and download it again"
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims).copy()  # writable


def read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            return parse_idx(handle.read(), str(path))
    except (OSError, EOFError) as error:
        raise DataError(f"cannot read {path}: {error}; delete it and download it again") from None


def _images_labels(images: np.ndarray, labels: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataError(f"{what}: images {images.shape} and labels {labels.shape} do not match")
    return np.ascontiguousarray(images[:, None, :, :]), labels.astype(np.int64)


_MNIST_NAMES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def _idx_family(
    meta: DatasetMeta, root: Path, folder: str, md5s: tuple[str, ...], how: str, verify: bool
) -> DatasetArrays:
    specs = [FileSpec(f"{folder}/{name}", md5=md5) for name, md5 in zip(_MNIST_NAMES, md5s)]
    info = verify_files(meta.name, root, specs, how, verify)
    arrays = [read_idx(root / spec.path) for spec in specs]
    train_x, train_y = _images_labels(arrays[0], arrays[1], f"{meta.name} train")
    test_x, test_y = _images_labels(arrays[2], arrays[3], f"{meta.name} test")
    return DatasetArrays(meta, train_x, train_y, test_x, test_y, info=info)


# ---- MNIST ------------------------------------------------------------------------------------------
MNIST_MD5 = (
    "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "d53e105ee54ea40749a09fcbcd1e9432",
    "9fb629c4189551a2d022fa330f9573f3",
    "ec29112dd5afa0611ce80d1b7f02629c",
)
_MNIST_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_SOURCE = Source(
    layout="mnist/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (torchvision layout)",
    how_to_get="run `fedbench datasets download mnist` or copy torchvision's MNIST/raw/*.gz there",
    downloads=tuple(Download(_MNIST_MIRROR + n, f"MNIST/raw/{n}", md5=m) for n, m in zip(_MNIST_NAMES, MNIST_MD5)),
    license="CC BY-SA 3.0 (unverified)",
)
# FedTrip preset: Normalize((0.1307,), (0.3081,)) [fedtrip.md §2.2].
MNIST_META = DatasetMeta("mnist", 10, (1, 28, 28), (0.1307,), (0.3081,), used_by=("fedtrip",))


@register_dataset(
    MNIST_META,
    source=MNIST_SOURCE,
    files=tuple(f"MNIST/raw/{n}" for n in _MNIST_NAMES),
    checksums={f"MNIST/raw/{n}": f"md5:{m}" for n, m in zip(_MNIST_NAMES, MNIST_MD5)},
    counts=(60000, 10000),
)
def load_mnist(root: Path, verify: bool = True) -> DatasetArrays:
    return _idx_family(MNIST_META, root, "MNIST/raw", MNIST_MD5, MNIST_SOURCE.how_to_get, verify)


# ---- Fashion-MNIST ----------------------------------------------------------------------------------
FMNIST_MD5 = (
    "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "25c81989df183df01b3e8a0aad5dffbe",
    "bef4ecab320f06d8554ea6380940ec79",
    "bb300cfdad3c16e7a12a480ee83cd310",
)
_FMNIST_MIRROR = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
FMNIST_SOURCE = Source(
    layout="fmnist/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (torchvision layout)",
    how_to_get="run `fedbench datasets download fmnist` or copy torchvision's FashionMNIST/raw/*.gz there",
    downloads=tuple(
        Download(_FMNIST_MIRROR + n, f"FashionMNIST/raw/{n}", md5=m) for n, m in zip(_MNIST_NAMES, FMNIST_MD5)
    ),
    license="MIT",
)
# FedTrip reuses the MNIST statistics for FMNIST [fedtrip.md §2.2]; FedImpro uses ToTensor only and
# resizes to 32×32 (dataset_params: image_size=32, normalize=False) [fedimpro.md §2.2].
FMNIST_META = DatasetMeta("fmnist", 10, (1, 28, 28), (0.1307,), (0.3081,), used_by=("fedtrip", "fedimpro"))


@register_dataset(
    FMNIST_META,
    source=FMNIST_SOURCE,
    files=tuple(f"FashionMNIST/raw/{n}" for n in _MNIST_NAMES),
    checksums={f"FashionMNIST/raw/{n}": f"md5:{m}" for n, m in zip(_MNIST_NAMES, FMNIST_MD5)},
    counts=(60000, 10000),
)
def load_fmnist(root: Path, verify: bool = True, image_size: int = 28, normalize: bool = True) -> DatasetArrays:
    arrays = _idx_family(FMNIST_META, root, "FashionMNIST/raw", FMNIST_MD5, FMNIST_SOURCE.how_to_get, verify)
    return adjust_images(arrays, image_size=image_size, normalize=normalize)


def adjust_images(arrays: DatasetArrays, image_size: int | None = None, normalize: bool = True) -> DatasetArrays:
    """Apply a preset's resize (bilinear, antialiased as torchvision's Resize) and/or drop normalisation."""
    meta = arrays.meta
    if image_size and image_size != meta.input_shape[-1]:
        if image_size < 8:
            raise ConfigError(f"dataset_params.image_size={image_size} is too small")
        arrays.train_x = resize_uint8(arrays.train_x, image_size)
        arrays.test_x = resize_uint8(arrays.test_x, image_size)
        meta = replace(meta, input_shape=(meta.input_shape[0], image_size, image_size))
    if not normalize:
        meta = replace(meta, mean=(0.0,) * meta.input_shape[0], std=(1.0,) * meta.input_shape[0])
    arrays.meta = meta
    return arrays


# ---- EMNIST balanced ----------------------------------------------------------------------------------
EMNIST_ZIP_MD5 = "58c8d27c78d21e728a6bc7b3cc06412e"
EMNIST_SOURCE = Source(
    layout="emnist/gzip.zip (the official archive, read in place) or its unpacked emnist/gzip/emnist-balanced-*.gz",
    how_to_get="run `fedbench datasets download emnist` (gzip.zip, 536 MB, from the NIST EMNIST page)",
    downloads=(Download("https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip", "gzip.zip", md5=EMNIST_ZIP_MD5),),
    license="public (NIST)",
    notes=("Only the archive has a published checksum; unpacked members are reported as unverified.",),
)
# FedTrip: Normalize((0.5,), (0.5,)); 47 classes, 112,800 / 18,800 [fedtrip.md §2.2].
EMNIST_META = DatasetMeta("emnist", 47, (1, 28, 28), (0.5,), (0.5,), used_by=("fedtrip",))


def _emnist_member(split: str, part: str, kind: str) -> str:
    return f"emnist-{split}-{part}-{kind}-ubyte.gz"


@register_dataset(
    EMNIST_META,
    source=EMNIST_SOURCE,
    files=("gzip.zip",),
    checksums={"gzip.zip": f"md5:{EMNIST_ZIP_MD5}"},
    counts=(112800, 18800),
)
def load_emnist(root: Path, verify: bool = True, split: str = "balanced") -> DatasetArrays:
    """EMNIST images are stored transposed in the IDX files (as in torchvision); we transpose them back."""
    names = [_emnist_member(split, part, kind) for part in ("train", "test") for kind in ("images-idx3", "labels-idx1")]
    if (root / "gzip.zip").is_file():
        info = verify_files(
            "emnist", root, [FileSpec("gzip.zip", md5=EMNIST_ZIP_MD5)], EMNIST_SOURCE.how_to_get, verify
        )
        try:
            with zipfile.ZipFile(root / "gzip.zip") as archive:
                arrays = [parse_idx(gzip.decompress(archive.read(f"gzip/{n}")), f"gzip.zip:gzip/{n}") for n in names]
        except KeyError as error:
            raise DataError(
                f"dataset 'emnist': {root / 'gzip.zip'} has no member {error}; unknown split {split!r}?"
            ) from None
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise DataError(f"dataset 'emnist': cannot read {root / 'gzip.zip'} ({error}); download it again") from None
    else:
        specs = [FileSpec(f"gzip/{n}") for n in names]
        info = verify_files(
            "emnist", root, specs, EMNIST_SOURCE.how_to_get + " and unpack it, or leave gzip.zip in place", verify
        )
        arrays = [read_idx(root / s.path) for s in specs]
    train_x, train_y = _images_labels(arrays[0].transpose(0, 2, 1), arrays[1], "emnist train")
    test_x, test_y = _images_labels(arrays[2].transpose(0, 2, 1), arrays[3], "emnist test")
    if split != "balanced":
        meta = replace(EMNIST_META, num_classes=int(max(train_y.max(), test_y.max())) + 1)
    else:
        meta = EMNIST_META
    info["split"] = split
    return DatasetArrays(meta, train_x, train_y, test_x, test_y, info=info)
