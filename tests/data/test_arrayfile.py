"""``arrays``: real ``.npz`` and ``.parquet`` files read back exactly (inputs, labels, groups), the class and split
rules, shapes, and one-line errors for each bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedbench.data import load_dataset
from fedbench.data.arrayfile import PARQUET_INSTALL
from fedbench.errors import DataError


def load(path: Path, **params):
    return load_dataset("arrays", path.parent, path=path.name, **params)


def pooled(arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Train and test rows back in one array each, ordered by the first input value (each row's id)."""
    x = np.concatenate([arrays.train_x, arrays.test_x])
    y = np.concatenate([arrays.train_y, arrays.test_y])
    g = None if arrays.train_groups is None else np.concatenate([arrays.train_groups, arrays.test_groups])
    order = np.argsort(x.reshape(len(x), -1)[:, 0])
    return x[order], y[order], None if g is None else g[order]


def test_npz_reads_back_exactly_with_sorted_classes_and_groups(tmp_path):
    x = np.arange(40 * 3, dtype=np.float64).reshape(40, 3)  # row i starts with 3 i: its id
    labels = np.array(["flat", "up", "down", "up"] * 10)
    sites = np.array([7, 3] * 20)
    np.savez(tmp_path / "ecg.npz", features=x, labels=labels, site=sites)
    arrays = load(tmp_path / "ecg.npz", test_fraction=0.25)
    assert arrays.info["classes"] == ["down", "flat", "up"] and arrays.info["group_names"] == ["3", "7"]
    got_x, got_y, got_g = pooled(arrays)
    assert got_x.dtype == np.float32 and got_x.shape == (40, 1, 1, 3)  # tabular: a one-channel signal
    assert np.array_equal(got_x[:, 0, 0], x.astype(np.float32))
    assert [arrays.info["classes"][c] for c in got_y] == labels.tolist()
    assert [arrays.info["group_names"][g] for g in got_g] == [str(s) for s in sites]
    # a quarter of every (group, class) held out
    for group in (0, 1):
        for label in range(3):
            total = np.sum((got_g == group) & (got_y == label))
            held = np.sum((arrays.test_groups == group) & (arrays.test_y == label))
            assert held == round(total * 0.25)


def test_signals_images_and_a_test_file(tmp_path):
    signals = np.random.default_rng(0).normal(size=(6, 2, 5)).astype(np.float32)
    np.savez(tmp_path / "train.npz", x=signals, y=np.array([0, 1, 2, 0, 1, 2]))
    np.savez(tmp_path / "test.npz", x=signals[:2] + 1, y=np.array([2, 2]))
    arrays = load(tmp_path / "train.npz", test_path="test.npz")
    assert arrays.train_x.shape == (6, 2, 1, 5) and np.array_equal(arrays.train_x[:, :, 0], signals)
    assert arrays.test_y.tolist() == [2, 2] and arrays.meta.num_classes == 3 and arrays.train_groups is None
    assert arrays.info["manifest"]["files"] == 2 and sorted(arrays.info["files"]) == ["test.npz", "train.npz"]
    images = np.random.default_rng(1).integers(0, 255, (8, 4, 4, 3), dtype=np.uint8)  # NHWC, as PIL gives them
    np.savez(tmp_path / "img.npz", x=images, y=np.arange(8) % 2)
    loaded = load(tmp_path / "img.npz", test_fraction=0.0)
    assert loaded.train_x.dtype == np.uint8 and np.array_equal(loaded.train_x, images.transpose(0, 3, 1, 2))


def test_one_changed_byte_changes_the_manifest(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.zeros((4, 2)), y=np.array([0, 1, 0, 1]))
    before = load(tmp_path / "a.npz").info["manifest"]["sha256"]
    np.savez(tmp_path / "a.npz", x=np.array([[0, 0], [0, 0], [0, 0], [0, 1e-30]]), y=np.array([0, 1, 0, 1]))
    assert load(tmp_path / "a.npz").info["manifest"]["sha256"] != before


@pytest.mark.parametrize(
    ("write", "params", "expected"),
    [
        (lambda p: p.write_bytes(b"PK\x03\x04 truncated"), {}, r"bad\.npz is not an \.npz file \(no complete zip"),
        (lambda p: np.savez(p, x=np.zeros((3, 2)), target=np.zeros(3)), {}, r"no label .*set dataset_params\.label"),
        (lambda p: np.savez(p, x=np.zeros((3, 2)), y=np.zeros(3)), {"label": "cls"}, r"no label 'cls' \(it has x, y\)"),
        (lambda p: np.savez(p, x=np.zeros((3, 2)), y=np.zeros(2)), {}, r"label 'y' has shape \(2,\), expected \(3,\)"),
        (lambda p: np.savez(p, x=np.zeros((4, 2)), y=np.zeros(4)), {}, r"has 1 class\(es\) \(0\)"),
        (
            lambda p: np.savez(p, x=np.array([[0.0], [np.nan]]), y=np.array([0, 1])),
            {},
            r"NaN or infinite value at row 1",
        ),
        (lambda p: np.savez(p, x=np.zeros((2, 1)), y=np.array([0.5, 1])), {}, r"holds fractions"),
        (lambda p: np.savez(p, x=np.zeros((2, 1)), y=np.array([0, 1])), {"group": "site"}, r"no group 'site'"),
        (lambda p: None, {}, r"no file .*bad\.npz; fix dataset_params\.path"),
        # not a zip archive at all: numpy would call it "pickled (object) data"
        (
            lambda p: p.write_bytes(b"\x00garbage, not arrays" * 10),
            {},
            r"bad\.npz is not an \.npz file \(no complete zip",
        ),
        (lambda p: p.write_bytes(b""), {}, r"bad\.npz is not an \.npz file"),
        # -1 (unlabelled) is no class, as hf_disk's ClassLabel refuses it; also stored as floats (pandas)
        (lambda p: np.savez(p, x=np.zeros((3, 1)), y=np.array([0, -1, 1])), {}, r"label 'y'.* has label -1 at row 1"),
        (lambda p: np.savez(p, x=np.zeros((3, 1)), y=np.array([0.0, 1, -1])), {}, r"has label -1 at row 2; a negative"),
    ],
)
def test_each_bad_input_is_one_data_error_line(tmp_path, write, params, expected):
    path = tmp_path / "bad.npz"
    write(path)
    with pytest.raises(DataError, match=expected) as caught:
        load(path, **params)
    assert "\n" not in str(caught.value)


def test_an_object_array_is_refused_without_unpickling(tmp_path):
    np.savez(tmp_path / "o.npz", x=np.array([{"a": 1}, None], dtype=object), y=np.array([0, 1]))
    with pytest.raises(DataError, match=r"o\.npz array 'x' holds Python objects, which fedbench never unpickles"):
        load(tmp_path / "o.npz")


def test_string_labels_may_look_negative_and_a_class_of_one_is_one_warning_line(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, x=np.arange(9.0).reshape(9, 1), y=np.array(["-1", "a", "a", "a", "b", "b", "b", "b", "a"]))
    arrays = load(path)
    assert arrays.info["classes"] == ["-1", "a", "b"]  # a name, not a number: "-1" is the user's own class
    assert arrays.info["warnings"] == [
        f"dataset 'arrays': {path} has 1 class(es) with one sample ('-1'); such a class is never both learnt and "
        "scored: check the labels, or drop those samples"
    ]
    np.savez(path, x=np.arange(9.0).reshape(9, 1), y=np.array([0, 1] * 4 + [0]))
    assert "warnings" not in load(path).info


def test_other_formats_are_refused(tmp_path):
    (tmp_path / "d.csv").write_text("x,y\n1,0\n")
    with pytest.raises(DataError, match="neither .npz nor .parquet"):
        load(tmp_path / "d.csv")


def test_parquet_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame(
        {
            "age": np.arange(20, dtype=np.float64),
            "dose": np.arange(20, dtype=np.int64) * 2,
            "outcome": ["ok", "bad"] * 10,
            "hospital": ["h2"] * 10 + ["h1"] * 10,
        }
    )
    frame.to_parquet(tmp_path / "t.parquet")
    arrays = load(tmp_path / "t.parquet", label="outcome", group="hospital", test_fraction=0.2)
    assert arrays.info["classes"] == ["bad", "ok"] and arrays.info["group_names"] == ["h1", "h2"]
    got_x, got_y, got_g = pooled(arrays)
    assert got_x.shape == (20, 1, 1, 2)
    assert np.array_equal(got_x[:, 0, 0], frame[["age", "dose"]].to_numpy(np.float32))
    assert [arrays.info["classes"][c] for c in got_y] == frame["outcome"].tolist()
    assert [arrays.info["group_names"][g] for g in got_g] == frame["hospital"].tolist()
    # a list column as the features; a missing value and a missing column are one line each
    pd.DataFrame({"x": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], "label": [0, 1, 1]}).to_parquet(tmp_path / "l.parquet")
    assert load(tmp_path / "l.parquet", test_fraction=0.0).train_x.shape == (3, 1, 1, 2)
    with pytest.raises(DataError, match=r"no label 'target' \(it has age, dose, hospital, outcome\)"):
        load(tmp_path / "t.parquet", label="target")
    pd.DataFrame({"x": [1.0, 2.0], "label": ["a", None]}).to_parquet(tmp_path / "n.parquet")
    with pytest.raises(DataError, match="missing value at row 1"):
        load(tmp_path / "n.parquet")
    (tmp_path / "c.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match=r"cannot read .*c\.parquet as \.parquet"):
        load(tmp_path / "c.parquet")


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    with pytest.raises(DataError, match=PARQUET_INSTALL.replace("[", r"\[").replace("]", r"\]")) as caught:
        load(tmp_path / "t.parquet")
    assert "\n" not in str(caught.value)
