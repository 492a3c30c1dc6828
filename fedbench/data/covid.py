"""Chest X-ray COVID-19 data sets used by FedTR (which one is ambiguous, fedtr.md A11):

* ``covid19`` — the 4-class curated posterior-anterior CXR set (Sait et al., Mendeley 9xkhgts2s6 v4: 1,281
  COVID-19, 3,270 Normal, 1,656 viral and 3,001 bacterial pneumonia = 9,208 images) that PersonalizedFL/FedAP
  use [code: KarhouTam/FL-bench README.md links its 4-class "COVID-19" to that paper and fetches the same
  ``cycfed/covid19.tar.gz`` as PersonalizedFL (data/download/covid19.sh)]. Two inputs are accepted:
  - FedAP's pre-processed ``covid19/xdata.npy`` (N, H, W, 3) + ``ydata.npy`` (N,) or (N, 1) [code:
    microsoft/PersonalizedFL datautil/prepare_data.py ``CovidDataset``: ``einsum('bxyz->bzxy')`` to NCHW,
    ``squeeze`` of the labels, ``num_classes = 4``; KarhouTam/FL-bench data/utils/datasets.py ``COVID19``:
    ``permute([0, -1, 1, 2])``, classes 0..3, shape 3×244×224 in its README]. Neither codebase names the four
    label ids, so for this format ``info['classes']`` holds the ids only. Integer or float arrays are
    accepted (floats in [0, 1] are scaled by 255: third-party loaders disagree on the value range).
  - The Mendeley folders, one per class: ``COVID-19``, ``Normal``, ``Pneumonia-Bacterial``,
    ``Pneumonia-Viral`` inside ``Curated X-Ray Dataset/`` [code: public loaders of the Mendeley/Kaggle
    ``unaissait/curated-chest-xray-image-dataset-for-covid19`` download use exactly these folder names], found
    anywhere up to three levels below ``covid19/`` (unpacking the Mendeley archive in place gives
    ``<title>/Curated X-Ray Dataset/Curated X-Ray Dataset/<class>/``). Labels follow that (alphabetical,
    ``ImageFolder``) order.
* ``covidx`` — COVIDx CXR (COVID-Net): ``covidx/{train,test}.txt`` with lines
  ``patient_id filename class data_source`` and images in ``covidx/{train,test}/``. Classes are read from the
  label files: positive/negative (CXR-2/3B) or normal/pneumonia/COVID-19 (older releases).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import NONE3, from_pool, with_normalization
from fedbench.data.files import FileSpec, Source, missing_error, verify_files
from fedbench.data.images import read_images, resize_uint8, to_nchw
from fedbench.errors import ConfigError, DataError

COVID19_CLASSES = ("COVID-19", "Normal", "Pneumonia-Bacterial", "Pneumonia-Viral")
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff"}
COVID19_SOURCE = Source(
    layout="covid19/xdata.npy + ydata.npy (FedAP pre-processed) or covid19/**/{COVID-19,Normal,Pneumonia-Bacterial,"
    "Pneumonia-Viral}/* (the Mendeley download unpacked)",
    how_to_get="download 'Curated Dataset for COVID-19 Posterior-Anterior Chest Radiography Images' from "
    "https://data.mendeley.com/datasets/9xkhgts2s6 and unpack it into covid19/",
    license="CC BY 4.0 (unverified)",
)
# FL-bench statistics on the 0..255 scale: mean (125.09, 125.10, 125.11), std (56.69, 56.69, 56.70).
COVID19_NORMALIZATION = {"none": NONE3, "dataset": ((0.4906, 0.4906, 0.4906), (0.2223, 0.2223, 0.2223))}
COVID19_META = DatasetMeta("covid19", 4, (3, 224, 224), *NONE3, used_by=("fedtr",))


def _class_folders(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    wanted = {c.lower(): c for c in COVID19_CLASSES}
    for depth in ("*", "*/*", "*/*/*", "*/*/*/*"):
        for folder in sorted(root.glob(depth)):
            if folder.is_dir() and folder.name.lower() in wanted and wanted[folder.name.lower()] not in found:
                found[wanted[folder.name.lower()]] = folder
    return found


def _as_uint8(x: np.ndarray, chunk: int = 512) -> np.ndarray:
    """xdata → uint8, converted in chunks (the array may be a memory map of several GB). Floats in [0, 1] are
    scaled by 255, other floats rounded and clipped to 0..255."""
    if x.dtype == np.uint8:
        return np.asarray(x)
    floating = np.issubdtype(x.dtype, np.floating)
    scale = 255.0 if floating and len(x) and float(np.nanmax(x)) <= 1.0 else 1.0
    out = np.empty(x.shape, dtype=np.uint8)
    for start in range(0, len(x), chunk):
        block = np.asarray(x[start : start + chunk], dtype=np.float32) * scale
        out[start : start + chunk] = np.clip(np.rint(np.nan_to_num(block)), 0, 255)
    return out


@register_dataset(COVID19_META, source=COVID19_SOURCE, files=("xdata.npy", "ydata.npy"), classes=COVID19_CLASSES)
def load_covid19(
    root: Path,
    verify: bool = True,
    image_size: int = 224,
    test_fraction: float = 0.2,
    split_seed: int = 0,
    normalization: str = "none",
) -> DatasetArrays:
    """Stratified ``test_fraction`` hold-out with a fixed ``split_seed`` (FedTR proposal 80/20)."""
    meta = with_normalization(
        replace(COVID19_META, input_shape=(3, image_size, image_size)), COVID19_NORMALIZATION, normalization
    )
    if (root / "xdata.npy").is_file() or (root / "ydata.npy").is_file():
        info = verify_files(
            "covid19", root, [FileSpec("xdata.npy"), FileSpec("ydata.npy")], COVID19_SOURCE.how_to_get, verify
        )
        try:
            x = np.load(root / "xdata.npy", mmap_mode="r")
            y = np.load(root / "ydata.npy").reshape(-1).astype(np.int64)
        except (OSError, ValueError) as error:
            raise DataError(f"dataset 'covid19': cannot read {root / 'xdata.npy'} ({error})") from None
        if len(x) != len(y):
            raise DataError(f"dataset 'covid19': xdata has {len(x)} images, ydata {len(y)} labels")
        if x.ndim not in (3, 4):
            raise DataError(f"dataset 'covid19': xdata has shape {x.shape}, expected (N, H, W, 3) as FedAP stores it")
        if len(y) and (y.min() < 0 or y.max() >= len(COVID19_CLASSES)):
            raise DataError(
                f"dataset 'covid19': ydata labels span {y.min()}..{y.max()}, expected 0..{len(COVID19_CLASSES) - 1}"
            )
        x = resize_uint8(to_nchw(_as_uint8(x), channels=3), image_size)
        info.update(format="fedap-npy", classes=[str(c) for c in range(len(COVID19_CLASSES))])
    else:
        folders = _class_folders(root)
        if len(folders) != len(COVID19_CLASSES):
            missing = [c for c in COVID19_CLASSES if c not in folders]
            raise missing_error(
                "covid19", root, [f"**/{c}/" for c in missing] + ["xdata.npy"], COVID19_SOURCE.how_to_get
            )
        paths, labels = [], []
        for label, name in enumerate(COVID19_CLASSES):
            files = sorted(p for p in folders[name].iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
            paths += files
            labels += [label] * len(files)
        info = verify_files(
            "covid19", root, [FileSpec(str(p.relative_to(root))) for p in paths], COVID19_SOURCE.how_to_get, verify
        )
        x = read_images(paths, image_size, "RGB", "covid19")
        y = np.asarray(labels, dtype=np.int64)
        info.update(format="mendeley-folders", files=[str(folders[c].relative_to(root)) for c in COVID19_CLASSES])
        info["classes"] = list(COVID19_CLASSES)
    info.update(image_size=image_size, normalization=normalization)
    return from_pool(meta, x, y, None, test_fraction, split_seed, info)


# ---- COVIDx -----------------------------------------------------------------------------------------------
COVIDX_SOURCE = Source(
    layout="covidx/{train,test}.txt (+ val.txt) and covidx/{train,test,val}/<image files>",
    how_to_get="download COVIDx CXR from Kaggle (`kaggle datasets download andyczhao/covidx-cxr2`) and unpack it into covidx/",
    license="mixture of source licences: do not redistribute",
)
COVIDX_META = DatasetMeta("covidx", 2, (3, 64, 64), *NONE3, used_by=("fedtr",))
_COVIDX_ORDERS = (("negative", "positive"), ("normal", "pneumonia", "covid-19"))


def read_covidx_list(path: Path) -> tuple[list[str], list[str]]:
    files, classes = [], []
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise DataError(f"dataset 'covidx': cannot read {path} ({error})") from None
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 3:
            raise DataError(
                f"dataset 'covidx': {path}:{number} should read 'patient_id filename class data_source'; "
                "download it again from the COVIDx release"
            )
        files.append(fields[1])
        classes.append(fields[2].lower())
    return files, classes


@register_dataset(COVIDX_META, source=COVIDX_SOURCE, files=("train.txt", "test.txt"))
def load_covidx(
    root: Path, verify: bool = True, image_size: int = 64, include_val: bool = False, max_per_split: int | None = None
) -> DatasetArrays:
    """PFLlib: Resize((64, 64)). Gray CXRs are read as RGB. ``include_val`` adds val.txt to the training pool;
    ``max_per_split`` keeps the first N lines of each list (smoke runs)."""
    lists = ["train.txt", "test.txt"] + (["val.txt"] if include_val else [])
    info = verify_files("covidx", root, [FileSpec(f) for f in lists], COVIDX_SOURCE.how_to_get, verify)
    parsed = {name[:-4]: read_covidx_list(root / name) for name in lists}
    seen = {c for _, classes in parsed.values() for c in classes}
    order = next((o for o in _COVIDX_ORDERS if seen <= set(o)), None)
    if order is None:
        raise ConfigError(f"dataset 'covidx': unknown classes {sorted(seen)} in the label files")

    def read(splits: list[str]):
        paths, labels = [], []
        for split in splits:
            files, classes = parsed[split]
            if max_per_split is not None:
                files, classes = files[:max_per_split], classes[:max_per_split]
            paths += [root / split / f for f in files]
            labels += [order.index(c) for c in classes]
        missing = [str(p.relative_to(root)) for p in paths if not p.is_file()]
        if missing:
            raise missing_error("covidx", root, missing, COVIDX_SOURCE.how_to_get)
        return read_images(paths, image_size, "RGB", "covidx"), np.asarray(labels, dtype=np.int64)

    train_x, train_y = read(["train"] + (["val"] if include_val else []))
    test_x, test_y = read(["test"])
    meta = replace(COVIDX_META, num_classes=len(order), input_shape=(3, image_size, image_size))
    info.update(classes=list(order), image_size=image_size, include_val=include_val)
    return DatasetArrays(meta, train_x, train_y, test_x, test_y, info=info)
