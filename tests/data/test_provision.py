"""The datasets catalogue (fedbench/data/provision.py): list, info and check of every data set, fetching with progress,
checksum and resume, and downloads that unpack archives."""

from __future__ import annotations

import hashlib
import http.server
import os
import threading

import pytest

import data_fixtures as fx
from fedbench.data import DATASETS, dataset_meta, load_dataset
from fedbench.data.provision import check_dataset, dataset_info, download_dataset, fetch, list_datasets
from fedbench.errors import DataError, UnknownNameError

# ---- listing --------------------------------------------------------------------------------------------


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


def test_a_data_root_where_the_cache_cannot_be_written_is_a_data_error(tmp_path):
    """`datasets prepare` into a data root it cannot write (here a file where its folder should be; a read-only
    mount or a full disk alike) is one DataError naming the folder and the option to change, not an OSError."""
    from fedbench.data.provision import prepare_dataset

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    with pytest.raises(DataError) as raised:
        prepare_dataset("digits", blocked)  # digits loads from scikit-learn: only the cache needs the data root
    message = str(raised.value)
    assert message.startswith(f"dataset 'digits': cannot write the prepared cache under {blocked / 'digits'} (")
    assert message.endswith("); choose a writable data root (--data-dir or $FEDBENCH_DATA)")
