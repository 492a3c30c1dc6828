"""``hf_disk``: folders written by ``datasets``' ``save_to_disk`` (a Dataset, a DatasetDict) read back exactly, and
one-line errors for a missing column, a damaged shard and a missing folder. Skipped without the ``datasets`` package
(the optional extra ``hf``)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fedbench.data import load_dataset
from fedbench.errors import DataError

datasets = pytest.importorskip("datasets")


def png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (5, 4), (value, value, 255 - value)).save(buffer, format="PNG")
    return buffer.getvalue()


def features(label_names=("cat", "dog")):
    return datasets.Features(
        {
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=list(label_names)),
            "hospital": datasets.Value("string"),
        }
    )


def table(n: int, offset: int = 0):
    return datasets.Dataset.from_dict(
        {
            "image": [{"bytes": png(offset + 10 * i), "path": f"{i}.png"} for i in range(n)],
            "label": [i % 2 for i in range(n)],
            "hospital": ["b" if i < n // 2 else "a" for i in range(n)],
        },
        features=features(),
    )


def load(folder: Path, **params):
    return load_dataset("hf_disk", folder.parent, path=folder.name, **params)


def test_a_saved_dataset_reads_back_exactly(tmp_path):
    table(20).save_to_disk(str(tmp_path / "pets"))
    arrays = load(tmp_path / "pets", image_size=4, group_column="hospital", test_fraction=0.2)
    assert arrays.info["classes"] == ["cat", "dog"] and arrays.info["group_names"] == ["a", "b"]
    x = np.concatenate([arrays.train_x, arrays.test_x])
    y = np.concatenate([arrays.train_y, arrays.test_y])
    g = np.concatenate([arrays.train_groups, arrays.test_groups])
    assert x.dtype == np.uint8 and x.shape[1:] == (3, 4, 4)
    rows = sorted((int(image[0, 0, 0]) // 10, int(label), int(group)) for image, label, group in zip(x, y, g))
    assert rows == [(i, i % 2, 1 if i < 10 else 0) for i in range(20)]
    assert len(arrays.test_y) == 4  # round(0.2 · 5) of each (hospital, class)
    assert arrays.info["manifest"]["files"] == 3  # the shard, dataset_info.json, state.json


def test_a_dataset_dict_keeps_its_splits_and_the_manifest_follows_the_bytes(tmp_path):
    folder = tmp_path / "dd"
    datasets.DatasetDict({"train": table(6), "test": table(2, offset=100)}).save_to_disk(str(folder))
    arrays = load(folder, image_size=5, channels=1)
    assert len(arrays.train_y) == 6 and len(arrays.test_y) == 2 and arrays.train_x.shape[1:] == (1, 5, 4 + 1)
    before = arrays.info["manifest"]["sha256"]
    (folder / "dataset_dict.json").write_text((folder / "dataset_dict.json").read_text() + " ")
    assert load(folder, image_size=5).info["manifest"]["sha256"] != before
    with pytest.raises(DataError, match="no split 'training'"):
        load(folder, train_split="training")


def test_numeric_inputs_and_plain_labels(tmp_path):
    datasets.Dataset.from_dict({"x": [[float(i), 1.0] for i in range(10)], "y": ["b", "a"] * 5}).save_to_disk(
        str(tmp_path / "tab")
    )
    arrays = load(tmp_path / "tab", image_column="x", label_column="y", test_fraction=0.0)
    assert arrays.train_x.shape == (10, 1, 1, 2) and arrays.info["classes"] == ["a", "b"]
    assert arrays.train_y.tolist() == [1, 0] * 5


def test_each_bad_input_is_one_data_error_line(tmp_path):
    table(4).save_to_disk(str(tmp_path / "p"))
    cases = [
        (dict(label_column="species"), r"no column 'species' \(columns: image, label, hospital\).*label_column"),
        (dict(group_column="site"), r"no column 'site'"),
    ]
    for params, expected in cases:
        with pytest.raises(DataError, match=expected) as caught:
            load(tmp_path / "p", **params)
        assert "\n" not in str(caught.value)
    with pytest.raises(DataError, match=r"no folder .*gone"):
        load(tmp_path / "gone")
    shard = next((tmp_path / "p").glob("*.arrow"))
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(DataError, match=r"cannot read .*save it again") as caught:
        load(tmp_path / "p")
    assert "\n" not in str(caught.value)


def test_an_undecodable_image_cell_names_its_row(tmp_path):
    broken = datasets.Dataset.from_dict(
        {"image": [{"bytes": png(1), "path": "a.png"}, {"bytes": b"junk", "path": "b.png"}], "label": [0, 1]},
        features=datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["x", "y"])}),
    )
    broken.save_to_disk(str(tmp_path / "b"))
    with pytest.raises(DataError, match=r"cannot decode image .*row 1 \(b\.png\)") as caught:
        load(tmp_path / "b")
    assert "\n" not in str(caught.value)


def test_numeric_columns_errors_name_hf_disk_and_plain_labels_follow_the_arrays_rules(tmp_path):
    """The numeric-input rules are shared with ``arrays`` (``arrayfile.as_inputs``), and so are the label rules: a
    message names the loader that read the data, -1 is no class whether it is a ``ClassLabel`` or a plain integer,
    and a class of one sample is one warning line."""
    datasets.Dataset.from_dict({"x": [[0.0], [float("nan")], [1.0]], "y": [0, 1, 0]}).save_to_disk(str(tmp_path / "n"))
    with pytest.raises(DataError) as caught:
        load(tmp_path / "n", image_column="x", label_column="y")
    assert str(caught.value).startswith("dataset 'hf_disk': ") and "NaN or infinite value at row 1" in str(caught.value)
    datasets.Dataset.from_dict({"x": [[0.0], [1.0], [2.0]], "y": [0, -1, 1]}).save_to_disk(str(tmp_path / "u"))
    with pytest.raises(DataError, match=r"^dataset 'hf_disk': .*column 'y' has label -1 at row 1; a negative label"):
        load(tmp_path / "u", image_column="x", label_column="y")
    rows = {"x": [[float(i)] for i in range(7)], "y": [0, 0, 0, 1, 1, 1, 2]}
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "s"))
    arrays = load(tmp_path / "s", image_column="x", label_column="y")
    assert arrays.info["warnings"] == [
        f"dataset 'hf_disk': {tmp_path / 's'} has 1 class(es) with one sample ('2'); such a class is never both "
        "learnt and scored: check the labels, or drop those samples"
    ]
