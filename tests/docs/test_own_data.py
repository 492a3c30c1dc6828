"""docs/own-data.md is tested against the loaders: each rule of its table is broken here, with real files, for one
of the loaders it names, and the loader must say what the page's last column says (an error: a one-line
``FedbenchError``; a warning: one line of the loaded data's ``info['warnings']`` or of the batch's preflight).
Every rule of the page has a case here and every case a row there."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import TINY_RECIPE
from fedbench.data import load_dataset
from fedbench.errors import FedbenchError
from fedbench.execution.batch import preflight
from fedbench.execution.selection import select_runs

PAGE = Path(__file__).resolve().parents[2] / "docs" / "own-data.md"
ROW = re.compile(r"^\| `([a-z-]+)` \| ([^|]+) \| (error|warning) \| `(.+)` \|$", re.MULTILINE)


def rules() -> dict[str, tuple[str, str, str]]:
    """{rule: (loaders, error | warning, the words the loader must say)} from the page's table."""
    return {rule: (loaders.strip(), kind, words) for rule, loaders, kind, words in ROW.findall(PAGE.read_text())}


def error_of(name: str, root: Path, **params) -> str:
    with pytest.raises(FedbenchError) as caught:
        load_dataset(name, root, **params)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def warnings_of(name: str, root: Path, **params) -> str:
    [line] = load_dataset(name, root, **params).info["warnings"]
    return line


def images(folder: Path, count: int = 3) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.new("RGB", (4, 4), (10 * i, 20, 30)).save(folder / f"{i}.png")


def sites(root: Path, classes: dict[str, int] | None = None) -> Path:
    """root/x/<site>/<class>/*.png, two sites of two classes."""
    for site in ("a", "b"):
        for name, count in (classes or {"p": 3, "q": 3}).items():
            images(root / "x" / site / name, count)
    return root / "x"


def npz(root: Path, **arrays) -> str:
    np.savez(root / "d.npz", **arrays)
    return "d.npz"


def hf(root: Path, rows: dict, features=None) -> str:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(root / "hf"))
    return "hf"


def class_label_minus_one(root: Path) -> str:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {"x": datasets.Sequence(datasets.Value("float32")), "y": datasets.ClassLabel(names=["a", "b"])}
    )
    path = hf(root, {"x": [[0.0], [1.0], [2.0]], "y": [0, -1, 1]}, features)
    return error_of("hf_disk", root, path=path, image_column="x", label_column="y")


def link_loop(root: Path) -> str:
    folder = sites(root)
    (folder / "a" / "c9").symlink_to("c9")
    return error_of("imagefolder", root, path="x")


def nested_class(root: Path) -> str:
    (sites(root) / "a" / "p" / "deeper").mkdir()
    return error_of("imagefolder", root, path="x")


def empty_class(root: Path) -> str:
    (sites(root) / "a" / "z").mkdir()
    return error_of("imagefolder", root, path="x")


def image_beside_classes(root: Path) -> str:
    images(root / "x" / "p")
    images(root / "x" / "q")
    Image.new("RGB", (2, 2)).save(root / "x" / "stray.png")  # beside the class folders, in none
    return error_of("imagefolder", root, path="x", layout="classes")


def unknown_site(root: Path) -> str:
    sites(root)
    return error_of("imagefolder", root, path="x", sites=["c"])


def written(path: Path, content: bytes) -> str:
    path.write_bytes(content)
    return path.name


def mixed_labels(root: Path) -> str:
    np.savez(root / "train.npz", x=X3, y=Y3)
    np.savez(root / "test.npz", x=X3, y=np.array(["a", "b", "a"]))
    return error_of("arrays", root, path="train.npz", test_path="test.npz")


def mixed_folder(root: Path) -> str:
    Image.new("RGB", (2, 2)).save(sites(root) / "a" / "stray.png")
    return error_of("imagefolder", root, path="x")


def undecodable(root: Path) -> str:
    (sites(root) / "a" / "p" / "0.png").write_bytes(b"not a png")
    return error_of("imagefolder", root, path="x", image_size=4)


def two_files_differ(root: Path) -> str:
    np.savez(root / "train.npz", x=np.zeros((4, 2)), y=np.array([0, 1, 0, 1]))
    np.savez(root / "test.npz", x=np.zeros((2, 3)), y=np.array([0, 1]))
    return error_of("arrays", root, path="train.npz", test_path="test.npz")


def digest_differs(root: Path) -> str:
    return error_of("arrays", root, path=npz(root, x=np.zeros((4, 1)), y=np.array([0, 1, 0, 1])), digest="0" * 64)


def client_test_under_global(root: Path) -> str:
    recipe = root / "r.toml"
    recipe.write_text(TINY_RECIPE.replace("targets = [50]\n", 'targets = [50]\nclient_test = "class_matched"\n'))
    [line] = preflight(select_runs([recipe]))
    return line


X3, Y3 = np.zeros((3, 1)), np.array([0, 1, 0])
CASES: dict[str, Callable[[Path], str]] = {
    "path-exists": lambda root: error_of("imagefolder", root, path="nowhere"),
    "file-exists": lambda root: error_of("arrays", root, path="gone.npz"),
    "two-classes": lambda root: error_of("arrays", root, path=npz(root, x=X3, y=np.zeros(3))),
    "digest-format": lambda root: error_of("arrays", root, path=npz(root, x=X3, y=Y3), digest="abc"),
    "digest-matches": digest_differs,
    "no-negative-label": lambda root: error_of("arrays", root, path=npz(root, x=X3, y=np.array([0, -1, 1]))),
    "classlabel-range": class_label_minus_one,
    "one-sample-class": lambda root: warnings_of(
        "arrays", root, path=npz(root, x=np.zeros((7, 1)), y=np.array([0, 0, 0, 1, 1, 1, 2]))
    ),
    "link-leads-somewhere": link_loop,
    "images-in-class-folders": image_beside_classes,
    "no-mixed-folder": mixed_folder,
    "class-folder-flat": nested_class,
    "class-folder-not-empty": empty_class,
    "sites-exist": unknown_site,
    "images-decode": undecodable,
    "npz-or-parquet": lambda root: error_of("arrays", root, path=written(root / "d.csv", b"x,y\n")),
    "npz-is-a-zip": lambda root: error_of("arrays", root, path=written(root / "d.npz", b"\x00 not arrays")),
    "no-objects": lambda root: error_of("arrays", root, path=npz(root, x=np.array([{}, None, 1], dtype=object), y=Y3)),
    "finite-inputs": lambda root: error_of("arrays", root, path=npz(root, x=np.array([[0.0], [np.inf], [1.0]]), y=Y3)),
    "numeric-inputs": lambda root: error_of("arrays", root, path=npz(root, x=np.array(["a", "b", "c"]), y=Y3)),
    "whole-labels": lambda root: error_of("arrays", root, path=npz(root, x=X3, y=np.array([0, 0.5, 1]))),
    "one-label-per-row": lambda root: error_of("arrays", root, path=npz(root, x=X3, y=np.array([0, 1]))),
    "one-kind-of-label": mixed_labels,
    "label-key-exists": lambda root: error_of("arrays", root, path=npz(root, x=X3, target=Y3)),
    "column-exists": lambda root: error_of(
        "hf_disk", root, path=hf(root, {"x": [[0.0], [1.0]], "y": [0, 1]}), image_column="x", label_column="cls"
    ),
    "label-present": lambda root: error_of(
        "hf_disk",
        root,
        path=hf(root, {"x": [[0.0], [1.0], [2.0]], "y": [0, None, 1]}),
        image_column="x",
        label_column="y",
    ),
    "same-features-in-both-files": two_files_differ,
    "client-test-is-personal": client_test_under_global,
}


def test_every_rule_of_the_page_is_checked_here_and_every_check_is_on_the_page():
    assert len(rules()) >= 25  # the table parsed
    assert sorted(rules()) == sorted(CASES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_the_loader_says_what_the_page_says(rule, tmp_path):
    _, _, words = rules()[rule]
    message = CASES[rule](tmp_path)
    assert words in message, f"docs/own-data.md, rule {rule}: expected {words!r} in {message!r}"
