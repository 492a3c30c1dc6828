"""Writers of tiny dataset files in each dataset's real on-disk format (for loader tests; no network).

Every writer puts its files under ``<data_root>/<name>/`` in the layout the loader expects and returns
what it wrote (the arrays, so tests can compare), drawing content from a seeded generator.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np


def idx_bytes(array: np.ndarray) -> bytes:
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09}
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def write_idx_gz(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as handle:
        handle.write(idx_bytes(array))


def images_labels(
    rng: np.random.Generator, n: int, shape: tuple[int, ...], classes: int
) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, 256, (n, *shape), dtype=np.uint8), rng.integers(0, classes, n).astype(np.uint8)


def write_mnist_like(
    data_root: Path, name: str = "mnist", folder: str = "MNIST/raw", n_train: int = 30, n_test: int = 12, seed: int = 0
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    raw = data_root / name / folder
    out = {}
    for part, n in (("train", n_train), ("t10k", n_test)):
        x, y = images_labels(rng, n, (28, 28), 10)
        write_idx_gz(raw / f"{part}-images-idx3-ubyte.gz", x)
        write_idx_gz(raw / f"{part}-labels-idx1-ubyte.gz", y)
        out[f"{part}_x"], out[f"{part}_y"] = x, y
    return out


def write_emnist(
    data_root: Path, n_train: int = 47, n_test: int = 20, as_zip: bool = True, seed: int = 0
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out, members = {}, {}
    for part, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = (np.arange(n) % 47).astype(np.uint8)
        members[f"gzip/emnist-balanced-{part}-images-idx3-ubyte.gz"] = gzip.compress(idx_bytes(x))
        members[f"gzip/emnist-balanced-{part}-labels-idx1-ubyte.gz"] = gzip.compress(idx_bytes(y))
        out[f"{part}_x"], out[f"{part}_y"] = x, y
    root = data_root / "emnist"
    root.mkdir(parents=True, exist_ok=True)
    if as_zip:
        with zipfile.ZipFile(root / "gzip.zip", "w") as archive:
            for member, data in members.items():
                archive.writestr(member, data)
    else:
        for member, data in members.items():
            (root / member).parent.mkdir(parents=True, exist_ok=True)
            (root / member).write_bytes(data)
    return out


def write_cifar10(data_root: Path, per_batch: int = 6, n_test: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    folder = data_root / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, list] = {"train_x": [], "train_y": []}
    for name, n in [(f"data_batch_{i}", per_batch) for i in range(1, 6)] + [("test_batch", n_test)]:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, n).tolist()
        with open(folder / name, "wb") as handle:  # python-2 era pickles: protocol 2, plain dict
            pickle.dump(
                {"batch_label": name, "labels": labels, "data": data, "filenames": [f"{i}.png" for i in range(n)]},
                handle,
                protocol=2,
            )
        if name == "test_batch":
            out["test_x"], out["test_y"] = data.reshape(-1, 3, 32, 32), np.array(labels)
        else:
            out["train_x"].append(data.reshape(-1, 3, 32, 32))
            out["train_y"].append(np.array(labels))
    out["train_x"] = np.concatenate(out["train_x"])
    out["train_y"] = np.concatenate(out["train_y"])
    return out


def write_cifar100(data_root: Path, n_train: int = 20, n_test: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    folder = data_root / "cifar100" / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, n in (("train", n_train), ("test", n_test)):
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        fine = rng.integers(0, 100, n)
        with open(folder / name, "wb") as handle:
            pickle.dump(
                {
                    "filenames": [],
                    "batch_label": name,
                    "fine_labels": fine.tolist(),
                    "coarse_labels": (fine // 5).tolist(),
                    "data": data,
                },
                handle,
                protocol=2,
            )
        out[f"{name}_x"], out[f"{name}_y"], out[f"{name}_coarse"] = data.reshape(-1, 3, 32, 32), fine, fine // 5
    return out


def write_svhn(data_root: Path, n_train: int = 15, n_test: int = 7, seed: int = 0) -> dict[str, np.ndarray]:
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    folder = data_root / "svhn"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        y = rng.integers(1, 11, (n, 1)).astype(np.uint8)  # 10 means digit 0
        savemat(folder / f"{name}_32x32.mat", {"X": x, "y": y})
        out[f"{name}_x"], out[f"{name}_y"] = x.transpose(3, 2, 0, 1), y.reshape(-1) % 10
    return out


def write_medmnist(
    data_root: Path, flag: str = "organamnist", counts: tuple[int, int, int] = (22, 5, 9), size: int = 28, seed: int = 0
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    folder = data_root / flag
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for split, n in zip(("train", "val", "test"), counts):
        arrays[f"{split}_images"] = rng.integers(0, 256, (n, size, size), dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, 11, (n, 1)).astype(np.uint8)
    name = f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"
    np.savez_compressed(folder / name, **arrays)
    return arrays


def png_bytes(array: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(array))


def write_jpeg(path: Path, array: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, format="JPEG")


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


# ---- priority-2 datasets -------------------------------------------------------------------------------


def write_femnist_leaf(data_root: Path, writers: int = 3, per_writer: int = 4, seed: int = 0) -> dict:
    """Two json shards per split, LEAF-style: same writers in train and test (sample-level split)."""
    rng = np.random.default_rng(seed)
    base = data_root / "femnist" / "data"
    users = [f"f{1000 + w:04d}_{w:02d}" for w in range(writers)]
    out = {"users": users}
    for split, n in (("train", per_writer), ("test", max(1, per_writer // 2))):
        for shard, chunk in enumerate((users[:1], users[1:])):
            blob = {"users": chunk, "num_samples": [n] * len(chunk), "user_data": {}}
            for user in chunk:
                pixels = rng.random((n, 784)).round(3)
                blob["user_data"][user] = {"x": pixels.tolist(), "y": rng.integers(0, 62, n).tolist()}
            write_json(base / split / f"all_data_{shard}_niid_05_keep_0_{split}_9.json", blob)
    return out


def write_femnist_h5(data_root: Path, writers: int = 3, per_writer: int = 4, seed: int = 0) -> None:
    import h5py

    rng = np.random.default_rng(seed)
    folder = data_root / "femnist"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        with h5py.File(folder / f"fed_emnist_{split}.h5", "w") as handle:
            for w in range(writers):
                group = handle.create_group(f"examples/f{w:04d}_00")
                group["pixels"] = rng.random((per_writer, 28, 28)).astype(np.float32)
                group["label"] = rng.integers(0, 62, per_writer).astype(np.int32)


def pamap2_table(rng: np.random.Generator, rows: int, activity_runs: list[tuple[int, int]]) -> np.ndarray:
    """A 54-column PAMAP2 recording: timestamps at 100 Hz, activity runs, heart rate mostly NaN, IMU NaN gaps."""
    table = rng.normal(size=(rows, 54)).astype(np.float64)
    table[:, 0] = np.arange(rows) / 100.0
    activity = np.concatenate([np.full(length, a) for a, length in activity_runs])[:rows]
    table[:, 1] = activity
    table[np.arange(rows) % 9 != 0, 2] = np.nan  # heart rate ~9 Hz
    table[5:8, 4:7] = np.nan  # dropped hand-IMU packets
    table[:, 16:20] = np.nan  # orientation (invalid) columns
    return table


def write_pamap2(data_root: Path, subjects: tuple[int, ...] = (101, 102, 103), seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    folder = data_root / "pamap2" / "PAMAP2_Dataset" / "Protocol"
    folder.mkdir(parents=True, exist_ok=True)
    for subject in subjects:
        runs = [(0, 100), (1, 600), (0, 50), (4, 600), (5, 400), (24, 300), (17, 400)]
        table = pamap2_table(rng, sum(n for _, n in runs), runs)
        lines = [" ".join("NaN" if np.isnan(v) else f"{v:.5f}" for v in row) for row in table]
        (folder / f"subject{subject}.dat").write_text("\n".join(lines) + "\n")


def write_camelyon17(data_root: Path, per_center: int = 6, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    base = data_root / "camelyon17" / "camelyon17_v1.0"
    rows = []
    for center in range(5):
        for k in range(per_center):
            patient, node, x, y = f"{center * 10 + 4:03d}", k % 2, 100 * k, 200 * k
            tumor = k % 2
            image = rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)
            write_png(
                base / f"patches/patient_{patient}_node_{node}/patch_patient_{patient}_node_{node}_x_{x}_y_{y}.png",
                image,
            )
            rows.append(
                {
                    "patient": patient,
                    "node": node,
                    "x_coord": x,
                    "y_coord": y,
                    "tumor": tumor,
                    "slide": center * 10 + node,
                    "center": center,
                    "split": int(k == 0),
                }
            )
    header = ",patient,node,x_coord,y_coord,tumor,slide,center,split"
    lines = [header] + [
        f"{i},{r['patient']},{r['node']},{r['x_coord']},{r['y_coord']},{r['tumor']},{r['slide']},{r['center']},{r['split']}"
        for i, r in enumerate(rows)
    ]
    (base / "metadata.csv").write_text("\n".join(lines) + "\n")
    return rows


DIGITS5_SHAPES = {
    "MNIST": (28, 28),
    "SVHN": (32, 32, 3),
    "USPS": (16, 16),
    "SynthDigits": (32, 32, 3),
    "MNIST_M": (28, 28, 3),
}


def write_digits5(
    data_root: Path, n_train: int = 8, n_test: int = 4, seed: int = 0, stratified_names: bool = False
) -> None:
    rng = np.random.default_rng(seed)
    for domain, shape in DIGITS5_SHAPES.items():
        folder = data_root / "digits5" / domain
        (folder / "partitions").mkdir(parents=True, exist_ok=True)
        suffix = "_stratified" if stratified_names else ""
        for split, n in (("train", n_train), ("test", n_test)):
            images = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
            labels = rng.integers(0, 10, n)
            with open(folder / f"{split}{suffix}.pkl", "wb") as handle:
                pickle.dump((images, labels), handle, pickle.HIGHEST_PROTOCOL)
            if split == "train":
                with open(folder / "partitions" / "train_part0.pkl", "wb") as handle:
                    pickle.dump((images[:3], labels[:3]), handle, pickle.HIGHEST_PROTOCOL)


def write_path_based(
    data_root: Path,
    name: str,
    folder: str,
    domains: tuple[str, ...],
    classes: tuple[str, ...],
    per_split: int = 3,
    seed: int = 0,
    path_prefix: str | None = None,
) -> None:
    """FedBN Office-Caltech10 / DomainNet: (paths, text labels) pickles + JPEGs of varying sizes (some gray)."""
    rng = np.random.default_rng(seed)
    root = data_root / name
    prefix = folder if path_prefix is None else path_prefix
    for domain in domains:
        for split in ("train", "test"):
            paths, labels = [], []
            for k in range(per_split):
                cls = classes[(k + len(split)) % len(classes)]
                rel = f"{prefix}/{domain}/{cls}/{split}_{k:03d}.jpg"
                shape = (20 + k, 30) if k == 1 else (24, 18 + k, 3)
                write_jpeg(
                    root / f"{folder}/{domain}/{cls}/{split}_{k:03d}.jpg", rng.integers(0, 256, shape, dtype=np.uint8)
                )
                paths.append(rel)
                labels.append(cls)
            (root / folder).mkdir(parents=True, exist_ok=True)
            with open(root / folder / f"{domain}_{split}.pkl", "wb") as handle:
                pickle.dump((paths, labels), handle, pickle.HIGHEST_PROTOCOL)


def write_retinal(data_root: Path, sites: int = 2, per_split: int = 2, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for site in range(1, sites + 1):
        for split in ("train", "test"):
            for k in range(per_split):
                base = data_root / "retinal" / "Fundus" / f"Domain{site}" / split / "ROIs"
                write_png(base / "image" / f"g{k:04d}.png", rng.integers(0, 256, (40, 40, 3), dtype=np.uint8))
                mask = np.full((40, 40), 255, np.uint8)
                mask[10:30, 10:30] = 128
                mask[15:25, 15:25] = 0
                write_png(base / "mask" / f"g{k:04d}.png", mask)


def write_covid19_folders(data_root: Path, per_class: int = 5, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    base = data_root / "covid19" / "Curated X-Ray Dataset"
    for name in ("COVID-19", "Normal", "Pneumonia-Bacterial", "Pneumonia-Viral"):
        for k in range(per_class):
            write_jpeg(base / name / f"{name}-{k}.jpg", rng.integers(0, 256, (30 + k, 33), dtype=np.uint8))


def write_covidx(data_root: Path, n_train: int = 6, n_test: int = 4, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    root = data_root / "covidx"
    for split, n in (("train", n_train), ("test", n_test)):
        lines = []
        for k in range(n):
            name = f"{split}_{k}.png"
            write_png(root / split / name, rng.integers(0, 256, (50, 48), dtype=np.uint8))
            lines.append(f"P{k:03d} {name} {'positive' if k % 2 else 'negative'} rsna")
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")


# ---- checks shared by the loader tests ------------------------------------------------------------------


def check_arrays(arrays, n_train, n_test, shape):
    """A loader's arrays: uint8 images and int64 labels of the given counts and shape, labels in range."""
    assert arrays.train_x.dtype == np.uint8 and arrays.test_x.dtype == np.uint8
    assert arrays.train_y.dtype == np.int64 and arrays.test_y.dtype == np.int64
    assert arrays.train_x.shape == (n_train, *shape)
    assert arrays.test_x.shape == (n_test, *shape)
    assert arrays.train_y.shape == (n_train,) and arrays.test_y.shape == (n_test,)
    assert arrays.meta.input_shape == shape
    assert arrays.train_y.min() >= 0 and arrays.train_y.max() < arrays.meta.num_classes


def natural_clients(arrays):
    """The natural partition of ``arrays``: one group per client (checked)."""
    from fedbench.data.partition import make_partition

    groups = np.unique(arrays.train_groups)
    parts = make_partition("natural", arrays.train_y, arrays.train_groups, len(groups), np.random.default_rng(0), {})
    for group, part in zip(groups, parts):
        assert np.all(arrays.train_groups[part] == group)
    return parts
