"""``imagefolder``: real PNG / JPEG files in each layout read back exactly (pixels, labels, sites), the class and split
rules, the manifest in ``info``, one-line errors for each bad input, and a CLI run with sites as clients."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.data import load_dataset
from fedbench.errors import ConfigError, DataError

runner = CliRunner()


def colour(site: int, label: int, index: int) -> tuple[int, int, int]:
    """A pixel value naming the image, so that every decoded image can be traced to its file."""
    return (10 + 40 * site, 10 + 40 * label, 10 + 20 * index)


def write_folder(root: Path, sites: dict[str, dict[str, int]], suffix: str = ".png", size=(6, 5)) -> None:
    """root/<site>/<class>/<i><suffix>, each image one flat colour; ``sites`` = {site: {class: count}}."""
    for s, (site, classes) in enumerate(sites.items()):
        for name, count in classes.items():
            folder = root / site / name
            folder.mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", size, colour(s, sorted({c for v in sites.values() for c in v}).index(name), i)).save(
                    folder / f"{i}{suffix}"
                )


def load(root: Path, **params):
    return load_dataset("imagefolder", root.parent, path=root.name, **params)


def triples(x: np.ndarray, y: np.ndarray, g: np.ndarray | None) -> set[tuple]:
    return {
        (tuple(int(v) for v in image[:, 0, 0]), int(label), None if g is None else int(site))
        for image, label, site in zip(x, y, g if g is not None else [None] * len(y))
    }


def test_sites_classes_and_pixels_read_back_exactly(tmp_path):
    root = tmp_path / "xrays"
    layout = {"siteB": {"normal": 4, "covid": 2}, "siteA": {"normal": 4, "effusion": 4}}
    write_folder(root, layout)
    arrays = load(root, image_size=5, test_fraction=0.5)
    # classes: the union of the class folder names, sorted; sites: the folders, sorted, as groups 0, 1
    classes = ["covid", "effusion", "normal"]
    assert arrays.info["classes"] == classes and arrays.meta.num_classes == 3
    assert arrays.info["group_names"] == ["siteA", "siteB"] and arrays.meta.group_kind == "site"
    assert arrays.train_x.dtype == np.uint8 and arrays.train_x.shape[1:] == (3, 5, 5)
    expected = {
        (colour(written, classes.index(name), i), classes.index(name), ["siteA", "siteB"].index(site))
        for written, (site, counts) in enumerate(layout.items())
        for name, count in counts.items()
        for i in range(count)
    }
    found = triples(arrays.train_x, arrays.train_y, arrays.train_groups) | triples(
        arrays.test_x, arrays.test_y, arrays.test_groups
    )
    assert found == expected and len(arrays.train_y) + len(arrays.test_y) == 14
    assert all(np.ptp(image) == 0 for image in arrays.train_x[:, 0])  # flat images stay flat: no resampling blur
    # the split: half of every (site, class), held out per site
    for site in (0, 1):
        for label in range(3):
            total = np.sum((arrays.train_groups == site) & (arrays.train_y == label)) + np.sum(
                (arrays.test_groups == site) & (arrays.test_y == label)
            )
            assert np.sum((arrays.test_groups == site) & (arrays.test_y == label)) == round(total * 0.5)


def test_the_split_is_seeded(tmp_path):
    root = tmp_path / "cells"
    write_folder(root, {"a": {"x": 10, "y": 10}})
    first, again = load(root, image_size=4), load(root, image_size=4)
    other = load(root, image_size=4, split_seed=1)
    assert np.array_equal(first.test_x, again.test_x)
    assert not np.array_equal(first.test_x, other.test_x)
    assert len(first.test_y) == 4  # round(10 · 0.2) of each class


def test_a_site_with_train_and_test_folders_keeps_its_split(tmp_path):
    root = tmp_path / "sites"
    write_folder(root / "kept", {"train": {"a": 3, "b": 3}, "test": {"a": 1, "b": 2}})
    write_folder(root, {"drawn": {"a": 5, "b": 5}})
    arrays = load(root, image_size=4)
    kept = arrays.info["group_names"].index("kept")
    assert np.sum(arrays.test_groups == kept) == 3 and np.sum(arrays.train_groups == kept) == 6
    assert arrays.info["presplit_sites"] == ["kept"] and arrays.info["classes"] == ["a", "b"]


def test_class_folders_without_sites_are_one_pool(tmp_path):
    root = tmp_path / "pool"
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(3):
            Image.new("L", (7, 7), 50 * i).save(root / name / f"{i}.JPEG")
        Image.new("L", (7, 7), 200).save(root / name / "x.bmp")
        (root / name / "notes.txt").write_text("not an image")
        (root / name / ".hidden.png").write_bytes(b"skipped")
    arrays = load(root, image_size=3, channels=1, test_fraction=0.25)
    assert arrays.train_groups is None and arrays.meta.group_kind is None
    assert arrays.train_x.shape[1:] == (1, 3, 3) and len(arrays.train_y) + len(arrays.test_y) == 8
    assert arrays.info["files"] == [f"{c}/{f}" for c in ("cat", "dog") for f in ("0.JPEG", "1.JPEG", "2.JPEG", "x.bmp")]
    with pytest.raises(ConfigError, match="no site folders"):
        load(root, sites=["cat"])


def test_sites_chooses_and_orders_the_clients(tmp_path):
    root = tmp_path / "s"
    write_folder(root, {"a": {"x": 2, "y": 2}, "b": {"x": 2, "y": 2}, "c": {"x": 2, "y": 2}})
    arrays = load(root, image_size=4, sites=["c", "a"], test_fraction=0.0)
    assert arrays.info["group_names"] == ["c", "a"] and set(arrays.train_groups.tolist()) == {0, 1}
    assert len(arrays.train_y) == 8


def test_one_changed_byte_changes_the_recorded_manifest(tmp_path):
    root = tmp_path / "m"
    write_folder(root, {"a": {"x": 2, "y": 2}})
    before = load(root, image_size=4).info["manifest"]["sha256"]
    target = root / "a" / "x" / "0.png"
    data = bytearray(target.read_bytes())
    data[-1] ^= 1  # the last byte of the IEND chunk's CRC: the file is still read by Pillow
    target.write_bytes(bytes(data))
    after = load(root, image_size=4, verify=False)
    assert after.info["manifest"] is None and after.info["verified"] is False
    assert load(root, image_size=4).info["manifest"]["sha256"] != before


def test_a_pinned_digest_is_checked(tmp_path):
    root = tmp_path / "p"
    write_folder(root, {"a": {"x": 2, "y": 2}})
    digest = load(root, image_size=4).info["manifest"]["sha256"]
    assert load(root, image_size=4, digest=digest).info["verified"] is True
    Image.new("RGB", (6, 5)).save(root / "a" / "x" / "new.png")
    with pytest.raises(DataError, match="dataset_params.digest"):
        load(root, image_size=4, digest=digest)
    with pytest.raises(DataError, match="64 hex"):
        load(root, image_size=4, digest="abc")


def damage_corrupt(root: Path) -> None:
    (root / "a" / "x" / "0.png").write_bytes(b"<html>not a png</html>")


def damage_truncated(root: Path) -> None:
    path = root / "a" / "x" / "1.png"
    path.write_bytes(path.read_bytes()[:40])


def damage_empty_class(root: Path) -> None:
    (root / "a" / "z").mkdir()


def damage_loose_image(root: Path) -> None:
    Image.new("RGB", (2, 2)).save(root / "a" / "stray.png")


def damage_nested(root: Path) -> None:
    (root / "a" / "x" / "deeper").mkdir()


def damage_one_class(root: Path) -> None:
    for path in (root / "a" / "y").iterdir():
        path.unlink()
    (root / "a" / "y").rmdir()


def damage_class_link_loop(root: Path) -> None:
    (root / "a" / "c9").symlink_to("c9")  # `ln -s c9 a/c9`: a link to itself, neither a folder nor a file


def damage_site_link_gone(root: Path) -> None:
    (root / "b").symlink_to(root.parent / "moved-away")  # a site folder whose target was moved


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (damage_class_link_loop, r"a/c9 is a symbolic link that leads nowhere \(to c9: a loop"),
        (damage_site_link_gone, r"bad/b is a symbolic link that leads nowhere .*moved-away"),
        (damage_corrupt, r"cannot decode image .*0\.png.*replace the file"),
        (damage_truncated, r"cannot decode image .*1\.png"),
        (damage_empty_class, r"class folder .*z has no image files.*add images or remove"),
        (damage_loose_image, r"holds both image files \(stray\.png\) and sub-folders"),
        (damage_nested, r"class folder .*x has a sub-folder deeper"),
        (damage_one_class, r"has 1 class\(es\) \(x\)"),
    ],
)
def test_each_bad_input_is_one_data_error_line(tmp_path, damage, expected):
    root = tmp_path / "bad"
    write_folder(root, {"a": {"x": 3, "y": 3}})
    damage(root)
    result = runner.invoke(
        app, ["datasets", "check", "imagefolder", "--data-dir", str(tmp_path), "-p", "path=bad", "-p", "image_size=4"]
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    import re

    assert re.search(expected, " ".join(result.output.split())), result.output


def test_a_class_of_one_image_is_one_warning_line(tmp_path):
    write_folder(tmp_path / "x", {"a": {"p": 3, "q": 1}, "b": {"p": 3, "r": 3}})
    arrays = load(tmp_path / "x", image_size=4)
    assert arrays.info["warnings"] == [
        f"dataset 'imagefolder': {tmp_path / 'x'} has 1 class(es) with one sample ('q'); such a class is never "
        "both learnt and scored: check the labels, or drop those samples"
    ]
    assert "warnings" not in load(tmp_path / "x", image_size=4, sites=["b"]).info  # no class of one there
    result = runner.invoke(app, ["datasets", "check", "imagefolder", "--data-dir", str(tmp_path), "-p", "path=x"])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "one sample ('q')" in warned[0]


def test_missing_folder_unknown_site_and_no_path(tmp_path):
    with pytest.raises(DataError, match=r"no folder .*nowhere.*--data-dir"):
        load(tmp_path / "nowhere")
    write_folder(tmp_path / "s", {"a": {"x": 1, "y": 1}})
    with pytest.raises(DataError, match="'b', not a folder .* the sites there: a"):
        load(tmp_path / "s", sites=["b"])
    with pytest.raises(ConfigError, match="needs dataset_params.path"):
        load_dataset("imagefolder", tmp_path)


def test_check_prints_the_digest_to_pin(tmp_path):
    write_folder(tmp_path / "x", {"a": {"p": 2, "q": 2}, "b": {"p": 2, "q": 2}})
    result = runner.invoke(
        app, ["datasets", "check", "imagefolder", "--data-dir", str(tmp_path), "-p", "path=x", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["content"]["files"] == 8 and len(report["content"]["sha256"]) == 64
    assert report["class_names"] == ["p", "q"] and report["groups"] == {"a": 4, "b": 4}
    prepare = runner.invoke(app, ["datasets", "prepare", "imagefolder", "--data-dir", str(tmp_path), "-p", "path=x"])
    assert prepare.exit_code == 2 and "nothing to prepare" in prepare.output


RECIPE = """
paper = "mine"
name = "xrays"
seeds = [0]

[setup]
dataset = "imagefolder"
dataset_params = {{ path = "xrays", image_size = 8{digest} }}
model = "digits_mlp"
model_params = {{ hidden = 8 }}
algorithm = "fedavg"
partition = "natural"
num_clients = 3
clients_per_round = 3
rounds = 5
batch_size = 4
local_steps = 2
client_test = "natural"

[matrix]
algorithm = ["fedavg"]

[scale.smoke]
rounds = 2

[[tables]]
name = "accuracy"
rows = ["algorithm"]
columns = []
figure = "best"
"""


@pytest.mark.slow
def test_a_run_trains_on_an_image_folder_with_sites_as_clients(tmp_path):
    data = tmp_path / "data"
    write_folder(data / "xrays", {f"hospital{h}": {"normal": 5, "pneumonia": 5} for h in range(3)}, size=(9, 9))
    recipe = tmp_path / "xrays.toml"
    recipe.write_text(RECIPE.format(digest=""))
    registry = f"sqlite:///{tmp_path / 'registry.db'}"
    command = ["run", str(recipe), "--scale", "smoke", "--data-dir", str(data), "--registry", registry]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    runs = json.loads(runner.invoke(app, ["runs", "--registry", registry, "--json"]).stdout)
    assert [r["status"] for r in runs] == ["done"] and runs[0]["synthetic"] is False
    shown = json.loads(runner.invoke(app, ["show", str(runs[0]["id"]), "--registry", registry, "--json"]).stdout)
    recorded = shown["provenance"]["data"]
    assert recorded["group_names"] == ["hospital0", "hospital1", "hospital2"]
    assert recorded["client_sizes"] == [8, 8, 8] and recorded["manifest"]["files"] == 30
    digest = recorded["manifest"]["sha256"]
    # the same spec on changed data: skipped, with one warning naming the data set and --force
    Image.new("RGB", (9, 9), (1, 2, 3)).save(data / "xrays" / "hospital0" / "normal" / "0.png")
    again = runner.invoke(app, command)
    assert again.exit_code == 0 and "already done" in again.output
    assert "trained on other content" in " ".join(again.output.split()) and "--force" in again.output
    # pinned: the old digest no longer matches the content, a one-line error before anything is registered
    recipe.write_text(RECIPE.format(digest=f', digest = "{digest}"'))
    pinned = runner.invoke(app, command)
    assert pinned.exit_code == 2 and "dataset_params.digest" in pinned.output
    assert len(json.loads(runner.invoke(app, ["runs", "--registry", registry, "--json"]).stdout)) == 1
