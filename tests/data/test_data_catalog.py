"""Checksum stamps, prepared caches, the datasets catalog/CLI, downloads and synthetic stand-ins."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import threading

import numpy as np
import pytest

import data_fixtures as fx
from fedbench.data import DATASETS, dataset_meta, files, load_dataset, mnist
from fedbench.data.catalog import check_dataset, dataset_info, download_dataset, fetch, list_datasets, prepare_dataset
from fedbench.data.files import FileSpec, verify_files
from fedbench.data.synthetic import synthetic_dataset
from fedbench.errors import DataError, UnknownNameError


@pytest.fixture
def mnist_root(tmp_path, monkeypatch):
    fx.write_mnist_like(tmp_path)
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    monkeypatch.setattr(mnist, "MNIST_MD5", tuple(files.file_digest(raw / n) for n in mnist._MNIST_NAMES))
    return tmp_path


# ---- checksum stamps -----------------------------------------------------------------------------------


def test_stamp_makes_the_second_check_free_and_notices_changes(tmp_path, monkeypatch):
    (tmp_path / "a.bin").write_bytes(b"hello")
    spec = FileSpec("a.bin", md5=hashlib.md5(b"hello").hexdigest())
    assert verify_files("demo", tmp_path, [spec], "get it")["verified"]
    calls = []
    real_digest = files.file_digest
    monkeypatch.setattr(files, "file_digest", lambda *a: calls.append(a) or real_digest(*a))
    assert verify_files("demo", tmp_path, [spec], "get it")["verified"]
    assert calls == [], "a matching stamp skips hashing"
    (tmp_path / "a.bin").write_bytes(b"HELLO")
    os.utime(tmp_path / "a.bin", ns=(1, 1))
    with pytest.raises(DataError, match="corrupt"):
        verify_files("demo", tmp_path, [spec], "get it")
    assert calls, "a changed file is hashed again"


def test_sha256_and_unpublished_checksums(tmp_path):
    (tmp_path / "b.bin").write_bytes(b"data")
    specs = [FileSpec("b.bin", sha256=hashlib.sha256(b"data").hexdigest()), FileSpec("b.bin")]
    result = verify_files("demo", tmp_path, specs, "get it")
    assert result["verified"] is False and "partially" in result["verification"]


# ---- prepared cache ------------------------------------------------------------------------------------


def test_prepare_then_memory_mapped_load(mnist_root):
    raw = load_dataset("mnist", mnist_root, use_prepared=False)
    summary = prepare_dataset("mnist", mnist_root)
    assert summary["train"] == 30 and summary["verified"]
    prepared = load_dataset("mnist", mnist_root)
    assert "prepared" in prepared.info and prepared.info["verified"]
    assert isinstance(prepared.train_x, np.memmap)
    np.testing.assert_array_equal(prepared.train_x, raw.train_x)
    np.testing.assert_array_equal(prepared.test_y, raw.test_y)
    assert prepared.meta == raw.meta
    # a different parameter set has no cache; a changed source file invalidates the cache
    source = mnist_root / "mnist" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz"
    os.utime(source, ns=(5, 5))
    assert "prepared" not in load_dataset("mnist", mnist_root, verify=False).info


def test_cache_prepared_without_verification_is_not_trusted(tmp_path):
    fx.write_mnist_like(tmp_path)
    prepare_dataset("mnist", tmp_path, verify=False)
    assert "prepared" in load_dataset("mnist", tmp_path, verify=False).info
    with pytest.raises(DataError, match="corrupt"):
        load_dataset("mnist", tmp_path)  # verification requested: goes to the files, which do not match


def test_prepared_cache_keeps_groups(tmp_path):
    fx.write_digits5(tmp_path)
    prepare_dataset("digits5", tmp_path, image_size=16)
    arrays = load_dataset("digits5", tmp_path, image_size=16)
    assert "prepared" in arrays.info and arrays.train_groups is not None
    assert arrays.meta.input_shape == (3, 16, 16) and arrays.meta.group_kind == "domain"


# ---- catalog --------------------------------------------------------------------------------------------


def test_list_info_check(mnist_root):
    rows = {row["name"]: row for row in list_datasets(mnist_root)}
    assert rows["mnist"]["present"] and not rows["cifar10"]["present"] and rows["digits"]["present"]
    assert rows["cifar10"]["used_by"] == ["fedtr", "feddrplus", "fedtrip", "fedimpro"]
    info = dataset_info("cifar10", mnist_root)
    assert info["files"][0]["checksum"] == "md5:c99cafc152244af753f735de768cd75f"
    assert info["downloads"][0]["md5"] == "c58f30108f718f92721af3b95e74349a"
    report = check_dataset("mnist", mnist_root)
    assert report["verified"] and report["train"] == 30 and sum(report["train_class_counts"]) == 30
    assert report["counts_match"] is False  # tiny fixture vs official 60,000 / 10,000
    with pytest.raises(UnknownNameError, match="mnist"):
        dataset_info("mnsit")


def test_check_reports_groups(tmp_path):
    fx.write_digits5(tmp_path)
    report = check_dataset("digits5", tmp_path)
    assert report["groups"] == {"MNIST": 8, "SVHN": 8, "USPS": 8, "SynthDigits": 8, "MNIST_M": 8}
    assert report["verified"] is False


@pytest.mark.parametrize("name", DATASETS.names())
def test_every_dataset_is_described(name):
    info = dataset_info(name)
    meta = dataset_meta(name)
    assert meta.num_classes >= 2 and len(meta.input_shape) == 3 and meta.used_by
    assert info["how_to_get"] and info["layout"]
    assert len(meta.mean) == len(meta.std)


# ---- CLI -------------------------------------------------------------------------------------------------


def cli():
    import typer

    from fedbench.cli.datasets import register_cli

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fedbench"""

    register_cli(app)
    return app


def test_cli_list_check_and_missing_data(mnist_root):
    from typer.testing import CliRunner

    runner = CliRunner()
    listed = runner.invoke(cli(), ["datasets", "list", "--data-dir", str(mnist_root), "--json"])
    assert listed.exit_code == 0
    assert {row["name"] for row in json.loads(listed.output)} == set(DATASETS.names())
    checked = runner.invoke(cli(), ["datasets", "check", "mnist", "--data-dir", str(mnist_root)])
    assert checked.exit_code == 0 and "30 train / 12 test" in checked.output
    missing = runner.invoke(cli(), ["datasets", "check", "cifar10", "--data-dir", str(mnist_root)])
    assert missing.exit_code == 2
    assert "data_batch_1" in missing.output and "Traceback" not in missing.output
    bad = runner.invoke(cli(), ["datasets", "check", "mnist", "--data-dir", str(mnist_root), "-p", "bogus=1"])
    assert bad.exit_code == 2 and "bogus" in bad.output
    info = runner.invoke(cli(), ["datasets", "info", "svhn", "--json"])
    assert info.exit_code == 0 and json.loads(info.output)["name"] == "svhn"
    prepared = runner.invoke(cli(), ["datasets", "prepare", "mnist", "--data-dir", str(mnist_root), "--no-verify"])
    assert prepared.exit_code == 0 and ".fedbench-cache" in prepared.output.replace("\n", "")


# ---- download ---------------------------------------------------------------------------------------------


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``files`` with Range support; ``cut_after`` truncates the first full response (a dropped link)."""

    files: dict[str, bytes] = {}
    cut_after: dict[str, int] = {}
    requests: list[tuple[str, str | None]] = []

    def do_GET(self):  # noqa: N802
        body = self.files.get(self.path)
        self.requests.append((self.path, self.headers.get("Range")))
        if body is None:
            self.send_error(404)
            return
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        cut = self.cut_after.pop(self.path, None)
        self.wfile.write(payload[:cut] if cut is not None else payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    RangeHandler.files, RangeHandler.cut_after, RangeHandler.requests = {}, {}, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_fetch_progress_checksum_and_resume(tmp_path, server):
    body = os.urandom(200_000)
    RangeHandler.files["/file.bin"] = body
    seen = []
    target = fetch(
        f"{server}/file.bin",
        tmp_path / "file.bin",
        md5=hashlib.md5(body).hexdigest(),
        progress=lambda done, total: seen.append((done, total)),
        chunk_size=50_000,
    )
    assert target.read_bytes() == body and seen[-1] == (200_000, 200_000) and len(seen) >= 4

    with pytest.raises(DataError, match="does not match"):
        fetch(f"{server}/file.bin", tmp_path / "bad.bin", md5="0" * 32)
    assert not (tmp_path / "bad.bin").exists() and not (tmp_path / "bad.bin.part").exists()

    RangeHandler.cut_after["/file.bin"] = 70_000
    with pytest.raises(DataError, match="interrupted"):
        fetch(f"{server}/file.bin", tmp_path / "again.bin")
    assert (tmp_path / "again.bin.part").stat().st_size == 70_000 and not (tmp_path / "again.bin").exists()
    fetch(f"{server}/file.bin", tmp_path / "again.bin", sha256=hashlib.sha256(body).hexdigest())
    assert (tmp_path / "again.bin").read_bytes() == body
    assert RangeHandler.requests[-1] == ("/file.bin", "bytes=70000-")

    with pytest.raises(DataError, match="HTTP 404"):
        fetch(f"{server}/nothing", tmp_path / "nothing.bin")


def test_download_dataset_unpacks_archives(tmp_path, server, monkeypatch):
    import io
    import tarfile

    from fedbench.data import cifar
    from fedbench.data.files import Download

    fixture = tmp_path / "fixture"
    fx.write_cifar100(fixture)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(fixture / "cifar100" / "cifar-100-python", arcname="cifar-100-python")
    RangeHandler.files["/cifar-100-python.tar.gz"] = buffer.getvalue()
    source = cifar.CIFAR100_SOURCE
    patched = type(source)(
        layout=source.layout,
        how_to_get=source.how_to_get,
        downloads=(
            Download(
                f"{server}/cifar-100-python.tar.gz",
                "cifar-100-python.tar.gz",
                md5=hashlib.md5(buffer.getvalue()).hexdigest(),
                extract=True,
            ),
        ),
    )
    monkeypatch.setitem(DATASETS._info["cifar100"], "source", patched)
    data_root = tmp_path / "data"
    result = download_dataset("cifar100", data_root)
    assert len(result["fetched"]) == 1
    arrays = load_dataset("cifar100", data_root, verify=False)
    assert arrays.train_x.shape == (20, 3, 32, 32)
    again = download_dataset("cifar100", data_root)
    assert again["fetched"] == [] and len(again["already_present"]) == 1
    with pytest.raises(DataError, match="no direct download"):
        download_dataset("digits5", data_root)


# ---- synthetic stand-ins -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DATASETS.names())
def test_synthetic_stand_in_matches_the_dataset(name):
    meta = dataset_meta(name)
    num_groups = DATASETS.info(name).get("num_groups")
    size = max(24, 2 * (num_groups or 0))
    arrays = synthetic_dataset(name, seed=1, train_size=size, test_size=size // 2)
    assert arrays.train_x.shape == (size, *meta.input_shape)
    assert arrays.info["synthetic"] is True and arrays.info["verified"] is False
    if meta.task == "segmentation":
        assert arrays.train_y.shape == (size, meta.num_classes, *meta.input_shape[1:])
    else:
        assert arrays.train_y.max() < meta.num_classes and arrays.train_y.dtype == np.int64
    if num_groups:
        assert len(np.unique(arrays.train_groups)) == num_groups == len(np.unique(arrays.test_groups))
    assert meta.group_kind is None or num_groups, "grouped datasets declare their group count"
