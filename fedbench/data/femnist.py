"""FEMNIST: handwritten characters grouped by writer (62 classes), the natural-partition benchmark of
FedImpro App. F.3.

Two formats are read:
* LEAF json (``femnist/data/{train,test}/*.json``, from LEAF's ``preprocess.sh``): ``{"users", "num_samples",
  "user_data": {uid: {"x": [[784 floats in 0..1]], "y": [int]}}}``; pixels are stored ×255 as uint8.
* TFF/FedML h5 (``femnist/fed_emnist_{train,test}.h5``, FedImpro's source): ``examples/<client>/{pixels,label}``
  (needs ``h5py``).
Pixel polarity is the same in both and is kept: background 1.0 (→ 255), ink 0.0 (→ 0), the inverse of MNIST.
TFF: "the value of 1.0 corresponds to the background, and 0.0 corresponds to the color of the digits themselves"
[code: google-parfait/tensorflow-federated tensorflow_federated/python/simulation/datasets/emnist.py, and
emnist/load_data.py of the h5 era]; LEAF stores gray/255 of the black-on-white NIST PNGs with no inversion
[code: TalwalkarLab/leaf data/femnist/preprocess/data_to_json.py], hence FL-bench's LEAF-FEMNIST mean 0.9637
[code: KarhouTam/FL-bench src/utils/constants.py]. FedImpro feeds the h5 ``pixels`` unchanged (no inversion, no
normalisation) [code: wizard1203/FedImpro data_preprocessing/FederatedEMNIST/data_loader.py], so no flip here.
Writers are mapped to group ids in sorted order over train ∪ test, so a writer's test samples carry the
same group id as its training samples.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.files import FileSpec, Source, missing_error, verify_files
from fedbench.errors import ConfigError, DataError

FEMNIST_SOURCE = Source(
    layout="femnist/data/{train,test}/*.json (LEAF) or femnist/fed_emnist_{train,test}.h5 (TensorFlow Federated / FedML)",
    how_to_get="run LEAF's data/femnist/preprocess.sh (github.com/TalwalkarLab/leaf) and copy its data/train and data/test "
    "folders to femnist/data/, or place fed_emnist_train.h5 and fed_emnist_test.h5 (TFF's fed_emnist.tar.bz2) in femnist/",
    license="NIST SD19: public with citation; LEAF code BSD-2",
)
# FedImpro: no normalisation; ResNet-18 with one input channel, 62 classes.
FEMNIST_META = DatasetMeta("femnist", 62, (1, 28, 28), (0.0,), (1.0,), used_by=("fedimpro",), group_kind="writer")


def _leaf_files(root: Path, split: str) -> list[Path]:
    return sorted((root / "data" / split).glob("*.json"))


def _read_leaf(paths: list[Path]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    users: dict[str, tuple[list, list]] = {}
    for path in paths:
        try:
            blob = json.loads(path.read_text())
            counts = blob.get("num_samples", [None] * len(blob["users"]))
            if len(counts) != len(blob["users"]):
                raise ValueError(f"{len(blob['users'])} users but {len(counts)} num_samples")
            for user, count in zip(blob["users"], counts):
                record = blob["user_data"][user]
                x = np.asarray(record["x"], dtype=np.float32)
                y = np.asarray(record["y"], dtype=np.int64)
                # LEAF writes each user's sample count beside the samples: a difference means a damaged file
                if len(x) != len(y) or (count is not None and count != len(y)):
                    raise ValueError(f"user {user!r}: num_samples {count}, {len(x)} x and {len(y)} y")
                xs, ys = users.setdefault(user, ([], []))
                xs.append(x)
                ys.append(y)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DataError(
                f"dataset 'femnist': cannot read LEAF file {path} ({error!r}); regenerate it with LEAF's preprocess.sh "
                "or delete it and download the data again"
            ) from None
    return {u: (np.concatenate(x), np.concatenate(y)) for u, (x, y) in users.items()}


def _read_h5(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    try:
        # local: optional dependency (pip install fedbench-repro[femnist])
        import h5py
    except ImportError:
        raise DataError(
            "dataset 'femnist': reading the TFF .h5 files needs h5py (pip install h5py), or use LEAF json"
        ) from None
    try:
        with h5py.File(path, "r") as handle:
            examples = handle["examples"]
            return {
                u: (
                    np.asarray(examples[u]["pixels"], dtype=np.float32),
                    np.asarray(examples[u]["label"], dtype=np.int64),
                )
                for u in examples
            }
    except (OSError, KeyError) as error:
        raise DataError(f"dataset 'femnist': cannot read {path} ({error!r}); delete it and download it again") from None


def _to_arrays(users: dict[str, tuple[np.ndarray, np.ndarray]], group_of: dict[str, int]):
    if not users:
        return np.empty((0, 1, 28, 28), np.uint8), np.empty(0, np.int64), np.empty(0, np.int64)
    xs, ys, gs = [], [], []
    for user in sorted(users):
        x, y = users[user]
        # No inversion: LEAF and TFF both store background 1.0 / ink 0.0, as FedImpro trains on (see module doc).
        xs.append(np.clip(np.round(x.reshape(-1, 28, 28) * 255.0), 0, 255).astype(np.uint8))
        ys.append(y.reshape(-1))
        gs.append(np.full(len(y), group_of[user], dtype=np.int64))
    return np.concatenate(xs)[:, None], np.concatenate(ys), np.concatenate(gs)


@register_dataset(FEMNIST_META, source=FEMNIST_SOURCE, files=("data/train", "data/test"), num_groups=3400)
def load_femnist(root: Path, verify: bool = True, format: str = "auto") -> DatasetArrays:
    """``format``: 'leaf', 'tff' or 'auto' (LEAF json if ``data/train`` exists, else the h5 files)."""
    if format not in ("auto", "leaf", "tff"):
        raise ConfigError(f"dataset_params.format={format!r} for femnist; choose 'auto', 'leaf' or 'tff'")
    if format == "auto":
        format = "leaf" if (root / "data" / "train").is_dir() else "tff"
    if format == "leaf":
        train_files, test_files = _leaf_files(root, "train"), _leaf_files(root, "test")
        if not train_files or not test_files:
            raise missing_error("femnist", root, ["data/train/*.json", "data/test/*.json"], FEMNIST_SOURCE.how_to_get)
        rel = [str(p.relative_to(root)) for p in train_files + test_files]
        info = verify_files("femnist", root, [FileSpec(r) for r in rel], FEMNIST_SOURCE.how_to_get, verify)
        train_users, test_users = _read_leaf(train_files), _read_leaf(test_files)
    else:
        rel = ["fed_emnist_train.h5", "fed_emnist_test.h5"]
        info = verify_files("femnist", root, [FileSpec(r) for r in rel], FEMNIST_SOURCE.how_to_get, verify)
        train_users, test_users = _read_h5(root / rel[0]), _read_h5(root / rel[1])
    writers = sorted(set(train_users) | set(test_users))
    group_of = {w: i for i, w in enumerate(writers)}
    train_x, train_y, train_g = _to_arrays(train_users, group_of)
    test_x, test_y, test_g = _to_arrays(test_users, group_of)
    info.update(format=format, writers=len(writers), group_names=writers)
    return DatasetArrays(
        FEMNIST_META, train_x, train_y, test_x, test_y, train_groups=train_g, test_groups=test_g, info=info
    )
