"""MedMNIST v3 OrganAMNIST / OrganCMNIST / OrganSMNIST (11 abdominal organs, CT slices).

Read straight from the official npz files (``organamnist/organamnist.npz``, or ``organamnist_64.npz``
for ``size=64`` …) rather than through the ``medmnist`` package's dataset classes (they assert the official
sample counts). URLs, checksums, split counts, class names and licence come from the package's ``INFO`` table
(the ``medmnist`` extra), read as a literal without importing the package (importing it creates ``~/.medmnist``);
without the package, from a hand copy checked against it by the tests. v2 files (the FedAP-era release, slightly
different counts) are accepted and reported as ``version='v2'``.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.files import Download, FileSpec, Source, verify_files
from fedbench.errors import ConfigError, DataError

FLAGS = ("organamnist", "organcmnist", "organsmnist")
SIZES = (28, 64, 128, 224)

# Hand copy of the medmnist package's INFO (v3.0.2) for these three flags, used only where the package is not
# installed (the ``medmnist`` extra: it pulls pandas and scikit-image). tests/data/test_medmnist.py checks
# it equals the package's. flag → ({size: md5}, (train, val, test) counts)
_FALLBACK_INFO = {
    "organamnist": (
        {
            28: "68e3f8846a6bd62f0c9bf841c0d9eacc",
            64: "2dcccc29b88e6da5a01161ef20cda288",
            128: "eeae80d0a227a8d099027e1b3cfd3b60",
            224: "50747347e05c87dd3aaf92c49f9f3170",
        },
        (34561, 6491, 17778),
    ),
    "organcmnist": (
        {
            28: "b9ceb9546e10131b32923c5bbeaea2b1",
            64: "3ce34a8724ea6f548e6db4744d03b6a9",
            128: "773c1f009daa3fe5d9a2a201b2a7ed94",
            224: "050f5e875dc056f6768abf94ec9995d1",
        },
        (12975, 2392, 8216),
    ),
    "organsmnist": (
        {
            28: "9ab87b696fb54e2a387ebe992d6ed5f1",
            64: "53a6d115339d874c25e309a994ff46d3",
            128: "ded0c5fa01a95dc4978b956f613e9b8e",
            224: "b354719e553fbbb2513d5533f52a4cb1",
        },
        (13932, 2452, 8827),
    ),
}
_FALLBACK_CLASSES = (
    "bladder",
    "femur-left",
    "femur-right",
    "heart",
    "kidney-left",
    "kidney-right",
    "liver",
    "lung-left",
    "lung-right",
    "pancreas",
    "spleen",
)
# Not in the package: the v2 (FedAP-era) 28-px md5s, and FL-bench's mean/std on 0..255.
_V2_MD5_AND_STATS = {
    "organamnist": ("866b832ed4eeba67bfb9edee1d5544e6", (118.75, 62.35)),
    "organcmnist": ("0afa5834fb105f7705a7d93372119a21", (124.42, 58.81)),
    "organsmnist": ("e5c39f1af030238290b9557d9503af9d", (124.96, 57.59)),
}
_ZENODO = "https://zenodo.org/records/10519652/files/"


@functools.cache
def package_info() -> dict[str, Any] | None:
    """The medmnist package's ``INFO`` table, or None without the package. Read from ``medmnist/info.py`` as a
    literal (``ast.literal_eval``), not imported: importing medmnist creates ``~/.medmnist`` as a side effect."""
    try:
        spec = importlib.util.find_spec("medmnist")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "info.py"
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "INFO" for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def metadata(flag: str) -> dict[str, Any]:
    """URLs, md5s per size, split counts, class names and licence of ``flag``: the medmnist package's, else the
    hand copy above (``source`` says which)."""
    info = (package_info() or {}).get(flag)
    if info is not None:
        return {
            "md5": {size: info["MD5" if size == 28 else f"MD5_{size}"] for size in SIZES},
            "url": {size: info["url" if size == 28 else f"url_{size}"] for size in SIZES},
            "counts": tuple(info["n_samples"][split] for split in ("train", "val", "test")),
            "classes": tuple(info["label"][str(i)] for i in range(len(info["label"]))),
            "license": info.get("license", ""),
            "source": "medmnist package",
        }
    md5s, counts = _FALLBACK_INFO[flag]
    return {
        "md5": dict(md5s),
        "url": {size: f"{_ZENODO}{_file_name(flag, size)}?download=1" for size in SIZES},
        "counts": counts,
        "classes": _FALLBACK_CLASSES,
        "license": "CC BY 4.0",
        "source": "fedbench's copy (medmnist package not installed)",
    }


def _file_name(flag: str, size: int) -> str:
    return f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"


# flag → {size: v3 md5}, v2 md5 (28 px only), (train, val, test) v3 counts, FL-bench mean/std on 0..255; looked up
# by the loader on each call (tests patch it)
_MEDMNIST = {
    flag: (metadata(flag)["md5"], _V2_MD5_AND_STATS[flag][0], metadata(flag)["counts"], _V2_MD5_AND_STATS[flag][1])
    for flag in FLAGS
}
ORGAN_CLASSES = metadata("organamnist")["classes"]
POOLS = {"train": ("train",), "train+val": ("train", "val"), "all": ("train", "val", "test")}


def read_medmnist_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:  # an .npz is a zip archive
        raise DataError(f"cannot read MedMNIST file {path} ({error!r}); delete it and download it again") from None


def _register(flag: str) -> None:
    md5s, v2_md5, counts, _ = _MEDMNIST[flag]
    meta = DatasetMeta(flag, 11, (1, 28, 28), (0.0,), (1.0,), used_by=("fedtr",))
    source = Source(
        layout=f"{flag}/{flag}.npz (MedMNIST v3; {flag}_{{64,128,224}}.npz for dataset_params.size)",
        how_to_get=f"run `fedbench datasets download {flag}` or `python -m medmnist download --size=28` and copy {flag}.npz there",
        downloads=(Download(metadata(flag)["url"][28], f"{flag}.npz", md5=md5s[28]),),
        license=metadata(flag)["license"],
        notes=("v2 files (md5 " + v2_md5 + ") are accepted and recorded as version v2",),
    )

    @register_dataset(
        meta,
        source=source,
        files=(f"{flag}.npz",),
        checksums={_file_name(flag, s): f"md5:{m}" for s, m in md5s.items()},
        counts=(counts[0], counts[2]),
        classes=metadata(flag)["classes"],
    )
    def load(
        root: Path, verify: bool = True, size: int = 28, pool: str = "train", normalization: str = "none"
    ) -> DatasetArrays:
        """``pool``: which official splits form the training pool — 'train' (default), 'train+val', or
        'all' (FedAP: every split pooled, then split per client; the returned test set is then empty).
        ``normalization``: 'none' (pixels/255, as PersonalizedFL's raw floats) or 'dataset' (FL-bench's statistics)."""
        md5s, v2_md5, _, (mean255, std255) = _MEDMNIST[flag]  # looked up per call (tests patch digests)
        if size not in md5s:
            raise ConfigError(f"dataset_params.size={size} for {flag}; MedMNIST sizes are {', '.join(map(str, md5s))}")
        if pool not in POOLS:
            raise ConfigError(f"dataset_params.pool={pool!r} for {flag}; choose one of {', '.join(POOLS)}")
        if normalization not in ("none", "dataset"):
            raise ConfigError(f"dataset_params.normalization={normalization!r} for {flag}; choose 'none' or 'dataset'")
        name = _file_name(flag, size)
        spec = FileSpec(name, md5=md5s[size], alternatives=(v2_md5,) if size == 28 else ())
        info = verify_files(flag, root, [spec], source.how_to_get.replace(f"{flag}.npz", name), verify)
        arrays = read_medmnist_npz(root / name)
        try:
            parts = {
                split: (arrays[f"{split}_images"], arrays[f"{split}_labels"]) for split in ("train", "val", "test")
            }
        except KeyError as error:
            raise DataError(
                f"MedMNIST file {root / name} has no array {error}; expected train/val/test_images/labels; "
                "delete it and download it again"
            ) from None

        def stack(splits: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
            if not splits:
                return np.empty((0, 1, size, size), np.uint8), np.empty(0, np.int64)
            x = np.concatenate([parts[s][0] for s in splits])
            y = np.concatenate([parts[s][1] for s in splits]).reshape(-1).astype(np.int64)
            if x.ndim != 3 or len(x) != len(y):
                raise DataError(
                    f"MedMNIST file {root / name}: images {x.shape}, labels {y.shape}; expected (N, H, W) gray images"
                )
            return np.ascontiguousarray(x[:, None].astype(np.uint8)), y

        train_x, train_y = stack(POOLS[pool])
        test_x, test_y = stack(() if pool == "all" else ("test",))
        this_meta = replace(meta, input_shape=(1, size, size))
        if normalization == "dataset":
            this_meta = replace(this_meta, mean=(mean255 / 255,), std=(std255 / 255,))
        digest = info.get("digests", {}).get(name)
        version = "unknown" if digest is None else ("v2" if digest == v2_md5 else "v3")
        info.update(size=size, pool=pool, version=version, normalization=normalization)
        return DatasetArrays(this_meta, train_x, train_y, test_x, test_y, info=info)

    load.__name__ = f"load_{flag}"


for _flag in _MEDMNIST:
    _register(_flag)
