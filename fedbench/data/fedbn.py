"""Feature-shift benchmarks packaged by FedBN (one domain = one client): Digits5, Office-Caltech10 and
DomainNet (10 classes). LG-Mix follows these packages [lgmix.md §2.2].

Layouts are the unpacked FedBN archives (``digit_dataset.zip``, ``office_caltech_10_dataset.zip``,
``domainnet_dataset.zip``), which hold pickles written with ``pickle.dump(obj, f, HIGHEST_PROTOCOL)``:
Digits5 ``(images uint8, labels)``; Office/DomainNet ``(image paths relative to the data folder, text labels)``.
None has a published checksum, so these datasets load as ``verified=False``, and a run warns that the pickles are
read unchecked; they are read by a restricted unpickler (``fedbench.data.safe_pickle``: numpy arrays and plain
values only), so a planted file cannot run code.
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import HALF3, IMAGENET, NONE3, read_train_test, with_normalization
from fedbench.data.files import FileSpec, Source, missing_error, verify_files
from fedbench.data.images import read_images, resize_uint8, to_nchw
from fedbench.data.safe_pickle import load_arrays_pickle
from fedbench.errors import ConfigError, DataError


def read_pickle(path: Path, dataset: str):
    try:
        return load_arrays_pickle(path)  # numpy arrays and plain values only: a planted file cannot run code
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as error:
        raise DataError(f"dataset {dataset!r}: cannot read {path} ({error!r}); download and unpack it again") from None


def _pair(obj, path: Path, dataset: str):
    if isinstance(obj, np.ndarray) and obj.dtype == object and len(obj) == 2:
        obj = tuple(obj)
    if not isinstance(obj, (tuple, list)) or len(obj) != 2:
        raise DataError(
            f"dataset {dataset!r}: {path} should hold a pair (images or paths, labels), found {type(obj).__name__}"
        )
    return obj


# ---- Digits5 --------------------------------------------------------------------------------------------
DIGITS5_DOMAINS = ("MNIST", "SVHN", "USPS", "SynthDigits", "MNIST_M")  # client order A..E [lgmix.md §2.2]
DIGITS5_SOURCE = Source(
    layout="digits5/{MNIST,SVHN,USPS,SynthDigits,MNIST_M}/{train,test}.pkl (+ partitions/train_part0..9.pkl); "
    "HeteroPFL's {train,test}_stratified.pkl names are accepted too",
    how_to_get="download FedBN's digit_dataset.zip (Google Drive id 1moBE_ASD5vIOaU8ZHm_Nsj0KAfX5T0Sf, linked from "
    "github.com/med-air/FedBN) and unpack its folders into digits5/",
    license="mixed (MNIST CC BY-SA; SVHN non-commercial; MNIST-M derived from BSDS500): do not redistribute",
)
DIGITS5_META = DatasetMeta("digits5", 10, (3, 28, 28), *NONE3, used_by=("lgmix",), group_kind="domain")


def _digits_file(root: Path, domain: str, split: str) -> Path:
    for name in (f"{split}.pkl", f"{split}_stratified.pkl"):
        if (root / domain / name).is_file():
            return root / domain / name
    return root / domain / f"{split}.pkl"


@register_dataset(
    DIGITS5_META,
    source=DIGITS5_SOURCE,
    files=tuple(f"{d}/{s}.pkl" for d in DIGITS5_DOMAINS for s in ("train", "test")),
    group_names=DIGITS5_DOMAINS,
    num_groups=5,
)
def load_digits5(
    root: Path, verify: bool = True, train_file: str = "train", image_size: int = 28, normalization: str = "none"
) -> DatasetArrays:
    """``train_file``: 'train' (the full 80 % pool, LG-Mix) or 'part0'…'part9' (FedBN's ≈743-image 10 %
    partitions). Every domain is resized to ``image_size`` with 3 channels (gray repeated), as
    HeteroPFL's Resize(28) + RGB conversion. ``normalization``: 'none' (LG-Mix) or 'fedbn' (0.5/0.5)."""
    meta = with_normalization(DIGITS5_META, {"none": NONE3, "fedbn": HALF3}, normalization)
    if train_file != "train" and not (train_file.startswith("part") and train_file[4:].isdigit()):
        raise ConfigError(f"dataset_params.train_file={train_file!r} for digits5; use 'train' or 'part0'..'part9'")
    train_paths = [
        (root / d / "partitions" / f"train_{train_file}.pkl")
        if train_file != "train"
        else _digits_file(root, d, "train")
        for d in DIGITS5_DOMAINS
    ]
    test_paths = [_digits_file(root, d, "test") for d in DIGITS5_DOMAINS]
    missing = [str(p.relative_to(root)) for p in train_paths + test_paths if not p.is_file()]
    if missing:
        raise missing_error("digits5", root, missing, DIGITS5_SOURCE.how_to_get)
    files = [str(p.relative_to(root)) for p in train_paths + test_paths]
    info = verify_files("digits5", root, [FileSpec(f) for f in files], DIGITS5_SOURCE.how_to_get, verify, pickled=True)

    def read(paths: list[Path]):
        xs, ys, gs = [], [], []
        for domain, path in enumerate(paths):
            images, labels = _pair(read_pickle(path, "digits5"), path, "digits5")
            images = to_nchw(np.asarray(images).astype(np.uint8, copy=False), channels=3)
            xs.append(resize_uint8(images, image_size))
            ys.append(np.asarray(labels).reshape(-1).astype(np.int64) % 10)  # SVHN's 10 is the digit 0
            gs.append(np.full(len(ys[-1]), domain, dtype=np.int64))
            if len(xs[-1]) != len(ys[-1]):
                raise DataError(f"dataset 'digits5': {path} has {len(xs[-1])} images and {len(ys[-1])} labels")
        return np.concatenate(xs), np.concatenate(ys), np.concatenate(gs)

    info.update(group_names=list(DIGITS5_DOMAINS), train_file=train_file)
    return read_train_test(replace(meta, input_shape=(3, image_size, image_size)), read, train_paths, test_paths, info)


# ---- Office-Caltech10 and DomainNet: (paths, text labels) pickles + image files -----------------------


def _path_based(
    name: str,
    meta: DatasetMeta,
    root: Path,
    folder: str,
    domains: tuple[str, ...],
    classes: tuple[str, ...],
    source: Source,
    verify: bool,
    image_size: int,
    normalization: str,
    max_per_client: int | None,
) -> DatasetArrays:
    meta = with_normalization(meta, {"imagenet": IMAGENET, "none": NONE3}, normalization)
    split_files = [f"{folder}/{d}_{s}.pkl" for d in domains for s in ("train", "test")]
    info = verify_files(name, root, [FileSpec(f) for f in split_files], source.how_to_get, verify, pickled=True)
    label_of = {c: i for i, c in enumerate(classes)}

    def resolve(rel: str) -> Path:
        rel = str(rel).replace("\\", "/")
        direct = root / rel
        if direct.is_file():
            return direct
        # FedBN issue #10: split-file paths may not match the unpacked image folders; retry with the
        # last three components (<domain>/<class>/<file>) under the dataset folder.
        tail = "/".join(rel.split("/")[-3:])
        for candidate in (root / folder / tail, root / tail):
            if candidate.is_file():
                return candidate
        return direct

    def read(split: str):
        xs, ys, gs = [], [], []
        for domain_id, domain in enumerate(domains):
            path = root / folder / f"{domain}_{split}.pkl"
            paths, text_labels = _pair(read_pickle(path, name), path, name)
            try:
                labels = np.array([label_of[str(t)] for t in text_labels], dtype=np.int64)
            except KeyError as error:
                raise DataError(
                    f"dataset {name!r}: {path} has unknown class {error}; expected one of {', '.join(classes)}"
                ) from None
            keep = np.arange(len(labels))
            if max_per_client is not None and split == "train":
                keep = keep[:max_per_client]
            files = [resolve(paths[i]) for i in keep]
            missing = [f for f in files if not f.is_file()]
            if missing:
                raise missing_error(name, root, [str(m.relative_to(root)) for m in missing], source.how_to_get)
            xs.append(read_images(files, image_size, "RGB", name))
            ys.append(labels[keep])
            gs.append(np.full(len(keep), domain_id, dtype=np.int64))
        return np.concatenate(xs), np.concatenate(ys), np.concatenate(gs)

    info.update(
        group_names=list(domains), image_size=image_size, normalization=normalization, max_per_client=max_per_client
    )
    return read_train_test(replace(meta, input_shape=(3, image_size, image_size)), read, "train", "test", info)


OFFICE_DOMAINS = ("amazon", "caltech", "dslr", "webcam")  # FedBN's client order
OFFICE_CLASSES = (
    "back_pack",
    "bike",
    "calculator",
    "headphones",
    "keyboard",
    "laptop_computer",
    "monitor",
    "mouse",
    "mug",
    "projector",
)
OFFICE_SOURCE = Source(
    layout="office_caltech10/office_caltech_10/{amazon,caltech,dslr,webcam}_{train,test}.pkl and the image folders "
    "office_caltech_10/<domain>/<class>/*.jpg (pickled paths are relative to office_caltech10/)",
    how_to_get="download FedBN's office_caltech_10_dataset.zip (github.com/med-air/FedBN README; re-hosted as the "
    "Hugging Face dataset Jemary/FedBN_Dataset) and unpack it into office_caltech10/",
    license="research/academic use (unverified)",
)
OFFICE_META = DatasetMeta("office_caltech10", 10, (3, 256, 256), *IMAGENET, used_by=("lgmix",), group_kind="domain")


@register_dataset(
    OFFICE_META,
    source=OFFICE_SOURCE,
    files=tuple(f"office_caltech_10/{d}_{s}.pkl" for d in OFFICE_DOMAINS for s in ("train", "test")),
    group_names=OFFICE_DOMAINS,
    num_groups=4,
    classes=OFFICE_CLASSES,
)
def load_office_caltech10(
    root: Path,
    verify: bool = True,
    image_size: int = 256,
    normalization: str = "imagenet",
    max_per_client: int | None = None,
) -> DatasetArrays:
    """LG-Mix: resize 256×256 and ImageNet normalisation; one domain per client."""
    return _path_based(
        "office_caltech10",
        OFFICE_META,
        root,
        "office_caltech_10",
        OFFICE_DOMAINS,
        OFFICE_CLASSES,
        OFFICE_SOURCE,
        verify,
        image_size,
        normalization,
        max_per_client,
    )


DOMAINNET_DOMAINS = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")
DOMAINNET_CLASSES = (
    "bird",
    "feather",
    "headphones",
    "ice_cream",
    "teapot",
    "tiger",
    "whale",
    "windmill",
    "wine_glass",
    "zebra",
)
DOMAINNET_SOURCE = Source(
    layout="domainnet/DomainNet/<domain>_{train,test}.pkl (FedBN split) and the images domainnet/DomainNet/<domain>/<class>/*.jpg",
    how_to_get="download FedBN's domainnet_dataset.zip (github.com/med-air/FedBN README) for the split pickles and the six "
    "domain zips from http://csr.bu.edu/ftp/visda/2019/multi-source/ unpacked into domainnet/DomainNet/",
    license="fair use for research/education (unverified)",
)
DOMAINNET_META = DatasetMeta("domainnet", 10, (3, 256, 256), *IMAGENET, used_by=("lgmix",), group_kind="domain")


@register_dataset(
    DOMAINNET_META,
    source=DOMAINNET_SOURCE,
    files=tuple(f"DomainNet/{d}_{s}.pkl" for d in DOMAINNET_DOMAINS for s in ("train", "test")),
    group_names=DOMAINNET_DOMAINS,
    num_groups=6,
    classes=DOMAINNET_CLASSES,
)
def load_domainnet(
    root: Path,
    verify: bool = True,
    image_size: int = 256,
    normalization: str = "imagenet",
    max_per_client: int | None = None,
) -> DatasetArrays:
    """FedBN's 10-class DomainNet subset, six domains = six clients (LG-Mix: resize 256, ImageNet normalisation).
    Prepare it once (``fedbench datasets prepare domainnet``): decoding the JPEGs dominates loading."""
    return _path_based(
        "domainnet",
        DOMAINNET_META,
        root,
        "DomainNet",
        DOMAINNET_DOMAINS,
        DOMAINNET_CLASSES,
        DOMAINNET_SOURCE,
        verify,
        image_size,
        normalization,
        max_per_client,
    )
