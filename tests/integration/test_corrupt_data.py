"""Corrupt data, table-driven: for every dataset family, a damaged file gives exit 2 and one line naming the file
and what to do (``fedbench datasets check``), never a traceback.

Each case writes the family's tiny files in their real on-disk format (tests/data_fixtures.py), damages one file
(truncated, half-downloaded, overwritten with junk, an array or a user missing) and runs ``datasets check NAME
--no-verify`` (the loader's own reading, not the checksum, must catch it); the wrong-checksum cases run with
verification on against the published digests.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import data_fixtures as fx
from fedbench.cli import app
from fedbench.data.fedbn import DOMAINNET_CLASSES, DOMAINNET_DOMAINS, OFFICE_CLASSES, OFFICE_DOMAINS

runner = CliRunner()
# what a message must tell the user to do (one of these)
ADVICE = ("delete", "download", "again", "replace", "remove", "re-extract", "fedbench datasets info", "regenerate")


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def junk(path: Path) -> None:
    path.write_bytes(b"<html>503 Service Unavailable</html>")


def regzip_truncated(path: Path) -> None:
    """A valid .gz whose IDX payload is cut short (the archive was re-packed from a half-downloaded file)."""
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-7]))


def npz_without(array: str) -> Callable[[Path], None]:
    def drop(path: Path) -> None:
        with np.load(path) as npz:
            kept = {k: npz[k] for k in npz.files if k != array}
        np.savez_compressed(path, **kept)

    return drop


def leaf_count_mismatch(path: Path) -> None:
    blob = json.loads(path.read_text())
    blob["num_samples"] = [n + 3 for n in blob["num_samples"]]
    path.write_text(json.dumps(blob))


def leaf_user_missing(path: Path) -> None:
    blob = json.loads(path.read_text())
    blob["users"].append("ghost_writer")
    blob["num_samples"].append(2)
    path.write_text(json.dumps(blob))


def first(pattern: str) -> Callable[[Path], Path]:
    """The first file (sorted) under the data root matching ``pattern``."""

    def find(root: Path) -> Path:
        matches = sorted(root.glob(pattern))
        assert matches, pattern
        return matches[0]

    return find


MNIST = "mnist/MNIST/raw/train-images-idx3-ubyte.gz"
CIFAR10 = "cifar10/cifar-10-batches-py/data_batch_1"
# (case id, dataset, write fixture, file to damage, damage, --param values)
CASES: list[tuple[str, str, Callable[[Path], object], Callable[[Path], Path], Callable[[Path], None], list[str]]] = [
    ("mnist truncated gz", "mnist", fx.write_mnist_like, first(MNIST), truncate, []),
    ("mnist half-downloaded", "mnist", fx.write_mnist_like, first(MNIST), lambda p: truncate(p, 0.1), []),
    ("mnist junk gz", "mnist", fx.write_mnist_like, first(MNIST), junk, []),
    ("mnist short IDX payload", "mnist", fx.write_mnist_like, first(MNIST), regzip_truncated, []),
    (
        "fmnist truncated gz",
        "fmnist",
        lambda r: fx.write_mnist_like(r, "fmnist", "FashionMNIST/raw"),
        first("fmnist/FashionMNIST/raw/t10k-labels-idx1-ubyte.gz"),
        truncate,
        [],
    ),
    ("emnist truncated zip", "emnist", fx.write_emnist, first("emnist/gzip.zip"), truncate, []),
    ("emnist junk zip", "emnist", fx.write_emnist, first("emnist/gzip.zip"), junk, []),
    ("cifar10 truncated batch", "cifar10", fx.write_cifar10, first(CIFAR10), truncate, []),
    ("cifar10 junk batch", "cifar10", fx.write_cifar10, first(CIFAR10), junk, []),
    ("cifar100 truncated", "cifar100", fx.write_cifar100, first("cifar100/cifar-100-python/test"), truncate, []),
    ("svhn truncated mat", "svhn", fx.write_svhn, first("svhn/train_32x32.mat"), truncate, []),
    ("svhn junk mat", "svhn", fx.write_svhn, first("svhn/test_32x32.mat"), junk, []),
    ("medmnist truncated npz", "organamnist", fx.write_medmnist, first("organamnist/*.npz"), truncate, []),
    (
        "medmnist npz missing an array",
        "organamnist",
        fx.write_medmnist,
        first("organamnist/*.npz"),
        npz_without("val_labels"),
        [],
    ),
    (
        "femnist leaf truncated json",
        "femnist",
        fx.write_femnist_leaf,
        first("femnist/data/train/*.json"),
        truncate,
        ["format=leaf"],
    ),
    (
        "femnist leaf mismatched user counts",
        "femnist",
        fx.write_femnist_leaf,
        first("femnist/data/train/*.json"),
        leaf_count_mismatch,
        ["format=leaf"],
    ),
    (
        "femnist leaf user without data",
        "femnist",
        fx.write_femnist_leaf,
        first("femnist/data/test/*.json"),
        leaf_user_missing,
        ["format=leaf"],
    ),
    ("femnist tff h5 truncated", "femnist", fx.write_femnist_h5, first("femnist/fed_emnist_train.h5"), truncate, []),
    (
        "pamap2 truncated recording",
        "pamap2",
        fx.write_pamap2,
        first("pamap2/PAMAP2_Dataset/Protocol/subject102.dat"),
        lambda p: p.write_text(p.read_text()[:5000] + "1.0 2.0 x"),
        ["subjects=[101,102,103]"],
    ),
    (
        "camelyon17 unreadable patch",
        "camelyon17",
        fx.write_camelyon17,
        first("camelyon17/camelyon17_v1.0/patches/*/*.png"),
        truncate,
        [],
    ),
    (
        "camelyon17 truncated metadata",
        "camelyon17",
        fx.write_camelyon17,
        first("camelyon17/camelyon17_v1.0/metadata.csv"),
        lambda p: truncate(p, 0.03),
        [],
    ),
    ("digits5 truncated pickle", "digits5", fx.write_digits5, first("digits5/MNIST/train.pkl"), truncate, []),
    (
        "office-caltech unreadable image",
        "office_caltech10",
        lambda r: fx.write_path_based(r, "office_caltech10", "office_caltech_10", OFFICE_DOMAINS, OFFICE_CLASSES),
        first("office_caltech10/office_caltech_10/*/*/train_000.jpg"),
        truncate,
        ["image_size=16"],
    ),
    (
        "domainnet unreadable image",
        "domainnet",
        lambda r: fx.write_path_based(r, "domainnet", "DomainNet", DOMAINNET_DOMAINS, DOMAINNET_CLASSES, per_split=2),
        first("domainnet/DomainNet/*/*/test_001.jpg"),
        junk,
        ["image_size=16"],
    ),
    (
        "domainnet truncated split pickle",
        "domainnet",
        lambda r: fx.write_path_based(r, "domainnet", "DomainNet", DOMAINNET_DOMAINS, DOMAINNET_CLASSES, per_split=2),
        first("domainnet/DomainNet/clipart_train.pkl"),
        truncate,
        ["image_size=16"],
    ),
    (
        "retinal unreadable image",
        "retinal",
        fx.write_retinal,
        first("retinal/Fundus/Domain1/train/ROIs/image/g0001.png"),
        truncate,
        ["image_size=20"],
    ),
    (
        "retinal unreadable mask",
        "retinal",
        fx.write_retinal,
        first("retinal/Fundus/Domain2/test/ROIs/mask/g0000.png"),
        junk,
        ["image_size=20"],
    ),
    (
        "covid19 unreadable x-ray",
        "covid19",
        fx.write_covid19_folders,
        first("covid19/Curated X-Ray Dataset/Normal/Normal-2.jpg"),
        truncate,
        ["image_size=16"],
    ),
    ("covidx unreadable image", "covidx", fx.write_covidx, first("covidx/train/train_3.png"), junk, ["image_size=16"]),
    (
        "covidx truncated split list",
        "covidx",
        fx.write_covidx,
        first("covidx/test.txt"),
        lambda p: p.write_text("P000 test_0.png"),
        ["image_size=16"],
    ),
]


def check(name: str, root: Path, *args: str):
    return runner.invoke(app, ["datasets", "check", name, "--data-dir", str(root), *args])


@pytest.mark.parametrize("case, name, write, target, damage, params", CASES, ids=[c[0] for c in CASES])
def test_corrupt_file_gives_one_line_naming_the_file_and_what_to_do(
    tmp_path, case, name, write, target, damage, params
):
    write(tmp_path)
    args = [arg for p in params for arg in ("-p", p)]
    assert check(name, tmp_path, "--no-verify", *args).exit_code == 0, case  # the intact files load
    path = target(tmp_path)
    damage(path)
    result = check(name, tmp_path, "--no-verify", *args)
    assert result.exit_code == 2, (case, result.output, repr(result.exception))
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert path.name in lines[0], lines[0]  # names the damaged file
    assert any(advice in lines[0] for advice in ADVICE), lines[0]  # and says what to do


# Families whose loaders verify published checksums: a file of the right name but other bytes is caught by the
# checksum (before any reading), with the file, the digests, and what to do.
CHECKSUMMED = [
    ("mnist", fx.write_mnist_like, MNIST),
    ("emnist", fx.write_emnist, "emnist/gzip.zip"),
    ("cifar10", fx.write_cifar10, CIFAR10),
    ("svhn", fx.write_svhn, "svhn/train_32x32.mat"),
    ("organamnist", fx.write_medmnist, "organamnist/organamnist.npz"),
]


@pytest.mark.parametrize("name, write, relative", CHECKSUMMED, ids=[c[0] for c in CHECKSUMMED])
def test_wrong_checksum_names_the_file_and_says_delete_and_download_again(tmp_path, name, write, relative):
    write(tmp_path)
    result = check(name, tmp_path)  # the fixture's bytes are not the published file's
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "corrupt or a different version" in line
    assert "delete it and download it again" in line and "--no-verify" in line


def test_camelyon17_metadata_cut_mid_row(tmp_path):
    fx.write_camelyon17(tmp_path)
    path = tmp_path / "camelyon17" / "camelyon17_v1.0" / "metadata.csv"
    path.write_text(path.read_text().rstrip("\n").rsplit(",", 3)[0] + "\n")  # the last row loses its last fields
    result = check("camelyon17", tmp_path, "--no-verify")
    assert result.exit_code == 2 and "metadata.csv has a malformed row" in result.stderr
    assert "download it again" in result.stderr


# ---- downloads: interrupted or failing the checksum, nothing partial is left where a loader reads -------------


class FakeResponse:
    """What urlopen returns: ``body`` in chunks, then ``fail`` (an exception) after ``cut`` bytes if given."""

    def __init__(self, body: bytes, cut: int | None = None, fail: BaseException | None = None):
        self.body, self.cut, self.fail, self.offset = body, cut, fail, 0
        self.status = 200
        self.headers = {"Content-Length": str(len(body))}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def read(self, size: int) -> bytes:
        if self.cut is not None and self.offset >= self.cut:
            raise self.fail or OSError("connection reset by peer")
        end = self.offset + size if self.cut is None else min(self.offset + size, self.cut)
        chunk = self.body[self.offset : end]
        self.offset = end
        return chunk


def serve(monkeypatch, response: FakeResponse) -> None:
    monkeypatch.setattr("urllib.request.urlopen", lambda request, timeout=None: response)


MNIST_FILE = "MNIST/raw/train-images-idx3-ubyte.gz"  # the first of mnist's downloads


def test_download_interrupted_leaves_only_the_resumable_part_file(tmp_path, monkeypatch):
    serve(monkeypatch, FakeResponse(b"x" * 300_000, cut=100_000))
    result = runner.invoke(app, ["datasets", "download", "mnist", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "interrupted after" in result.stderr and "again to resume" in result.stderr
    target = tmp_path / "mnist" / MNIST_FILE
    assert not target.exists() and target.with_name(target.name + ".part").stat().st_size == 100_000


def test_download_stopped_by_ctrl_c_leaves_no_file_in_place(tmp_path, monkeypatch):
    serve(monkeypatch, FakeResponse(b"x" * 300_000, cut=65_536, fail=KeyboardInterrupt()))
    result = runner.invoke(app, ["datasets", "download", "mnist", "--data-dir", str(tmp_path)])
    assert result.exit_code == 130
    assert not (tmp_path / "mnist" / MNIST_FILE).exists()


def test_download_failing_its_checksum_leaves_nothing(tmp_path, monkeypatch):
    serve(monkeypatch, FakeResponse(b"<html>a captive portal page</html>"))
    result = runner.invoke(app, ["datasets", "download", "mnist", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "does not match the published" in result.stderr
    folder = tmp_path / "mnist" / "MNIST" / "raw"
    assert not folder.exists() or list(folder.iterdir()) == []


def test_interrupted_extraction_leaves_no_half_extracted_file(tmp_path, monkeypatch):
    import tarfile

    from fedbench.data.provision import _safe_extract

    fixture = tmp_path / "fixture"
    fx.write_cifar100(fixture)
    archive = tmp_path / "cifar-100-python.tar.gz"
    with tarfile.open(archive, mode="w:gz") as handle:
        handle.add(fixture / "cifar100" / "cifar-100-python", arcname="cifar-100-python")
    destination = tmp_path / "data" / "cifar100"
    destination.mkdir(parents=True)
    real_extract = tarfile.TarFile.extract

    def extract_then_fail(self, member, path="", **kwargs):
        real_extract(self, member, path, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "extract", extract_then_fail)
    monkeypatch.setattr(
        tarfile.TarFile,
        "extractall",
        lambda self, path=".", members=None, **kw: [extract_then_fail(self, m, path) for m in self.getmembers()],
    )
    with pytest.raises(OSError):
        _safe_extract(archive, destination)
    assert list(destination.iterdir()) == []  # nothing half-extracted in place, no scratch folder left
    monkeypatch.undo()
    _safe_extract(archive, destination)
    assert (destination / "cifar-100-python" / "train").read_bytes() == (
        fixture / "cifar100" / "cifar-100-python" / "train"
    ).read_bytes()
