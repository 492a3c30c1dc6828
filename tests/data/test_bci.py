"""`bci` (LG-Mix App. D.2): the numpy trial/feature pipeline on in-memory recordings, and the MOABB-facing part
through a fake ``moabb`` module shaped like MOABB's ``dataset.get_data()`` output (no moabb/mne needed); and
`fedbench datasets list` reports bci (data in MOABB's cache, not the fedbench data root) as present only when MOABB is
installed and every source is in its cache: a cheap look at folders, no MOABB import, no network."""

from __future__ import annotations

import json
import socket
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.data import bci, dataset_meta, load_dataset
from fedbench.data.bci import (
    CLASSES,
    SOURCES,
    Recording,
    SourceRecordings,
    assemble,
    covariances,
    riemannian_mean,
    source_trials,
    stim_events,
    tangent_vectors,
)
from fedbench.data.provision import dataset_info, is_present, list_datasets
from fedbench.errors import ConfigError, DataError

# Channel lists, rates, events and task intervals as MOABB declares them for the four datasets.
FAKE = {
    "AlexMI": dict(
        rate=512,
        interval=(0, 3),
        event_id={"right_hand": 2, "feet": 3, "rest": 4},
        channels="Fpz F7 F3 Fz F4 F8 T7 C3 Cz C4 T8 P7 P3 Pz P4 P8",
    ),
    "BNCI2014_001": dict(
        rate=250,
        interval=(2, 6),
        event_id={"left_hand": 1, "right_hand": 2, "feet": 3, "tongue": 4},
        channels="Fz FC3 FC1 FCz FC2 FC4 C5 C3 C1 Cz C2 C4 C6 CP3 CP1 CPz CP2 CP4 P1 Pz P2 POz",
    ),
    "BNCI2015_004": dict(
        rate=256,
        interval=(3, 10),
        event_id={"right_hand": 4, "feet": 5, "navigation": 3, "subtraction": 2, "word_ass": 1},
        channels="AFz F7 F3 Fz F4 F8 FC3 FCz FC4 T3 C3 Cz C4 T4 CP3 CPz CP4 P7 P5 P3 P1 Pz P2 P4 P6 P8 PO3 PO4 O1 O2",
    ),
    "Zhou2016": dict(
        rate=250,
        interval=(0, 5),
        event_id={"left_hand": 1, "right_hand": 2, "feet": 3},
        channels="Fp1 Fp2 FC3 FCz FC4 C3 Cz C4 CP3 CPz CP4 O1 Oz O2",
    ),
}
TRIALS_PER_CODE = 6  # per event code and run
SPACING = 12.0  # seconds between cues


class FakeRaw:
    """The parts of ``mne.io.Raw`` the loader reads: EEG (+ an EOG and a stim channel) in volts."""

    def __init__(self, name, subject, rng):
        spec = FAKE[name]
        self.ch_names = spec["channels"].split() + ["EOG1", "STI"]
        self.info = {"sfreq": float(spec["rate"])}
        self.first_samp = 0
        codes = np.repeat(list(spec["event_id"].values()), TRIALS_PER_CODE)
        codes = rng.permutation(codes)
        rate = spec["rate"]
        samples = int((len(codes) + 1) * SPACING * rate)
        eeg = rng.normal(0, 5e-6, (len(self.ch_names) - 2, samples))
        stim = np.zeros(samples)
        time = np.arange(int(spec["interval"][1] * rate)) / rate
        c3 = [c.lower() for c in self.ch_names].index("c3")
        cz = [c.lower() for c in self.ch_names].index("cz")
        for k, code in enumerate(codes):
            onset = int((k + 0.5) * SPACING * rate)
            stim[onset : onset + 10] = code
            # class signature: 12 Hz on C3 for right_hand, on Cz for feet (within the task interval)
            channel = c3 if code == spec["event_id"]["right_hand"] else cz if code == spec["event_id"]["feet"] else None
            if channel is not None:
                eeg[channel, onset : onset + len(time)] += 20e-6 * np.sin(2 * np.pi * 12 * time + subject)
        self._data = np.vstack([eeg, rng.normal(0, 1e-5, samples), stim])

    def get_channel_types(self):
        return ["eeg"] * (len(self.ch_names) - 2) + ["eog", "stim"]

    def get_data(self):
        return self._data


def fake_moabb(missing=()):
    """A ``moabb`` package whose ``datasets`` module has the four classes; sources in ``missing`` try to download."""
    module = types.ModuleType("moabb")
    datasets = types.ModuleType("moabb.datasets")
    module.datasets = datasets
    module.calls = []

    def make(name):
        class Dataset:
            subject_list = [1, 2]
            event_id = FAKE[name]["event_id"]
            interval = list(FAKE[name]["interval"])

            def get_data(self, subjects=None):
                module.calls.append((name, subjects))
                if name in missing:  # what MOABB does for a file not in its cache: fetch it
                    socket.create_connection(("data.example.org", 443), timeout=1)
                return {s: {"0": {"0": FakeRaw(name, s, np.random.default_rng(s))}} for s in subjects}

        Dataset.__name__ = name
        return Dataset

    for name in FAKE:
        setattr(datasets, name, make(name))
    return module


@pytest.fixture
def moabb(monkeypatch):
    module = fake_moabb()
    monkeypatch.setitem(sys.modules, "moabb", module)
    monkeypatch.setitem(sys.modules, "moabb.datasets", module.datasets)
    return module


@pytest.fixture(scope="module")
def tangent_arrays():
    pytest.importorskip("pyriemann")
    module = fake_moabb()
    saved = {k: sys.modules.get(k) for k in ("moabb", "moabb.datasets")}
    sys.modules["moabb"], sys.modules["moabb.datasets"] = module, module.datasets
    try:
        return load_dataset("bci", "/nonexistent", use_prepared=False)
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value


# ---- the numpy half ---------------------------------------------------------------------------------------------


def test_stim_events_are_rising_edges():
    stim = np.array([0, 0, 2, 2, 0, 3, 3, 0, 0, 4])
    onsets, codes = stim_events(stim)
    assert onsets.tolist() == [2, 5, 9] and codes.tolist() == [2, 3, 4]


def ramp_source(rate=100.0, interval=(1.0, 4.0)):
    samples = 2000
    signals = np.tile(np.arange(samples, dtype=np.float64), (3, 1))
    onsets = np.array([100, 400, 700, 1900])  # the last trial runs past the end and is dropped
    codes = np.array([7, 8, 9, 7])  # right_hand, feet, other, right_hand
    recording = Recording(signals, ("C3", "Cz", "C4"), rate, onsets, codes, subject=1)
    return SourceRecordings("X", {"right_hand": 7, "feet": 8, "rest": 9}, interval, [recording])


def test_trials_start_at_the_task_interval_and_map_labels():
    x, y, subjects, names, rate = source_trials(ramp_source(), None, None, None, None, tmin=0.5, window=2.0)
    assert x.shape == (2, 3, 200) and y.tolist() == [0, 1] and subjects.tolist() == [1, 1]
    assert x[0, 0, 0] == 100 + (1.0 + 0.5) * 100 and x[1, 2, -1] == 400 + 150 + 199
    picked, *_ = source_trials(ramp_source(), ["cz"], 50.0, None, None, tmin=0.0, window=2.0)
    assert picked.shape == (2, 1, 100)
    with pytest.raises(ConfigError, match="no channel"):
        source_trials(ramp_source(), ["Oz"], None, None, None, 0.0, 1.0)


# fedbench's own numpy implementation before it used pyriemann (fixed-point iteration with unit step): the library
# must give the same mean and tangent vectors.
def _spd_function(matrices, fn):
    values, vectors = np.linalg.eigh(matrices)
    return (vectors * fn(values)[..., None, :]) @ np.swapaxes(vectors, -1, -2)


def reference_mean(covs, tol=1e-13, max_iter=200):
    mean = covs.mean(0)
    for _ in range(max_iter):
        root = _spd_function(mean, np.sqrt)
        inv_root = _spd_function(mean, lambda v: 1 / np.sqrt(v))
        step = _spd_function(inv_root @ covs @ inv_root, np.log).mean(0)
        mean = root @ _spd_function(step, np.exp) @ root
        if np.linalg.norm(step) < tol:
            break
    return mean


def reference_tangent(covs, reference):
    inv_root = _spd_function(reference, lambda v: 1 / np.sqrt(v))
    logs = _spd_function(inv_root @ covs @ inv_root, np.log)
    rows, cols = np.triu_indices(covs.shape[-1])
    return logs[:, rows, cols] * np.where(rows == cols, 1.0, np.sqrt(2.0))


@pytest.mark.parametrize("channels, scale_spread, shrinkage", [(4, 1.0, 0.0), (8, 1.0, 0.0), (22, 100.0, 0.1)])
def test_pyriemann_equals_the_former_numpy_implementation(channels, scale_spread, shrinkage):
    """Fixed SPD matrices (seeded), float64. Both means stop when the Riemannian gradient's norm is below 1e-10
    (library) / 1e-13 (reference), so they differ by about the library's tolerance times the condition number of
    the mean (the gradient is in whitened coordinates): rtol = 1e-10 · cond(mean) · 10. The tangent vectors at one
    reference are the same formula (eigendecompositions in float64): within 1e-12 of their magnitude."""
    pytest.importorskip("pyriemann")  # the bci extra (the dev extra installs it)
    rng = np.random.default_rng(channels)
    gains = np.linspace(1, scale_spread, channels)[None, :, None]
    covs = covariances(rng.normal(size=(30, channels, 5 * channels)) * gains, shrinkage)
    ours, theirs = riemannian_mean(covs), reference_mean(covs)
    rtol = 1e-10 * np.linalg.cond(theirs) * 10
    assert np.abs(ours - theirs).max() <= rtol * np.abs(theirs).max()
    vectors, expected = tangent_vectors(covs, theirs), reference_tangent(covs, theirs)
    assert vectors.shape == (30, channels * (channels + 1) // 2)
    assert np.abs(vectors - expected).max() <= 1e-12 * max(1.0, np.abs(expected).max())


def test_tangent_space_matches_the_riemannian_definitions():
    pytest.importorskip("pyriemann")
    rng = np.random.default_rng(0)
    diagonal = np.stack([np.diag(d) for d in rng.uniform(0.5, 4, (5, 3))])
    mean = riemannian_mean(diagonal)
    assert np.allclose(np.diag(mean), np.exp(np.log(np.diagonal(diagonal, axis1=1, axis2=2)).mean(0)))
    trials = rng.normal(size=(20, 4, 200))
    covs = covariances(trials)
    reference = riemannian_mean(covs)
    vectors = tangent_vectors(covs, reference)
    assert vectors.shape == (20, 10)
    assert np.allclose(vectors.mean(0), 0, atol=1e-6)  # the mean maps to the origin of its tangent space
    assert np.allclose(tangent_vectors(reference[None], reference), 0, atol=1e-10)
    # √2-weighted upper triangle: the vector norm is the Frobenius norm of the log-map (the Riemannian distance)
    inv_root = np.linalg.inv(np.linalg.cholesky(reference))
    eig = np.linalg.eigvalsh(inv_root @ covs[0] @ inv_root.T)
    assert np.isclose(np.linalg.norm(vectors[0]), np.sqrt((np.log(eig) ** 2).sum()))


# ---- through the fake MOABB ---------------------------------------------------------------------------------------


def test_tangent_features_shapes_labels_groups(tangent_arrays):
    arrays = tangent_arrays
    meta = dataset_meta("bci")
    assert meta.num_classes == 2 and meta.input_shape == (1, 1, 465) and meta.group_kind == "dataset"
    assert arrays.train_x.shape[1:] == (1, 1, 465) and arrays.train_x.dtype == np.float32
    assert set(np.unique(arrays.train_y)) == {0, 1} and arrays.train_y.dtype == np.int64
    assert np.unique(arrays.train_groups).tolist() == [0, 1, 2, 3] == np.unique(arrays.test_groups).tolist()
    assert arrays.info["group_names"] == list(SOURCES) and arrays.info["classes"] == list(CLASSES)
    per_source = TRIALS_PER_CODE * 2 * 2  # two classes × two subjects × one run
    assert len(arrays.train_y) + len(arrays.test_y) == 4 * per_source
    assert np.bincount(arrays.test_groups).tolist() == [2 * round(0.2 * per_source / 2)] * 4  # stratified per class
    # each source's tangent vector has its own length C(C+1)/2, zero-padded to 465
    for group, channels in enumerate((16, 22, 30, 14)):
        width = channels * (channels + 1) // 2
        rows = arrays.train_x[arrays.train_groups == group, 0, 0]
        assert np.all(rows[:, width:] == 0) and np.any(rows[:, width - 1] != 0)
    assert arrays.info["sources"]["BNCI2015_004"]["per_class"] == [12, 12]


def test_tangent_features_separate_the_two_classes(tangent_arrays):
    arrays = tangent_arrays
    for group in range(4):
        train = arrays.train_groups == group
        test = arrays.test_groups == group
        x, y = arrays.train_x[train, 0, 0], arrays.train_y[train]
        centroids = np.stack([x[y == k].mean(0) for k in (0, 1)])
        predicted = np.argmin(((arrays.test_x[test, 0, 0, None] - centroids) ** 2).sum(-1), 1)
        assert (predicted == arrays.test_y[test]).mean() >= 0.8


def test_epochs_on_the_common_channels(moabb):
    arrays = load_dataset(
        "bci",
        "/nonexistent",
        use_prepared=False,
        features="epochs",
        resample=64.0,
        window=2.0,
        subjects={"AlexMI": [2]},
        sources=["AlexMI", "Zhou2016"],
    )
    assert arrays.train_x.shape[1:] == (3, 1, 128)
    assert arrays.info["sources"]["AlexMI"]["channels"] == ["C3", "Cz", "C4"]
    assert ("AlexMI", [2]) in moabb.calls and ("Zhou2016", [1, 2]) in moabb.calls
    assert np.unique(arrays.train_groups).tolist() == [0, 1]
    # right_hand trials carry 12 Hz on C3, feet on Cz
    power = (arrays.train_x[:, :2, 0] ** 2).mean(-1)
    assert np.all(power[arrays.train_y == 0, 0] > power[arrays.train_y == 0, 1])
    assert np.all(power[arrays.train_y == 1, 1] > power[arrays.train_y == 1, 0])


def test_bad_parameters(moabb):
    with pytest.raises(ConfigError, match="sources"):
        load_dataset("bci", "/x", use_prepared=False, sources=["PhysionetMI"])
    with pytest.raises(ConfigError, match="no subject"):
        load_dataset("bci", "/x", use_prepared=False, sources=["AlexMI"], subjects={"AlexMI": [9]})
    with pytest.raises(ConfigError, match="features"):
        assemble([ramp_source()], features="raw")


def test_missing_moabb_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "moabb", None)
    monkeypatch.setitem(sys.modules, "moabb.datasets", None)
    with pytest.raises(DataError) as error:
        load_dataset("bci", "/x", use_prepared=False)
    message = str(error.value)
    assert "fedbench-repro[bci]" in message and "MNE_DATA" in message and "~/mne_data" in message
    assert ".download()" in message and "\n" not in message


def test_missing_cache_never_downloads(monkeypatch):
    module = fake_moabb(missing=("BNCI2015_004",))
    monkeypatch.setitem(sys.modules, "moabb", module)
    monkeypatch.setitem(sys.modules, "moabb.datasets", module.datasets)
    connect = socket.socket.connect
    with pytest.raises(DataError) as error:
        load_dataset("bci", "/x", use_prepared=False, sources=["AlexMI", "BNCI2015_004"])
    message = str(error.value)
    assert "BNCI2015_004" in message and "never downloads" in message
    assert "d.BNCI2015_004().download()" in message and "\n" not in message
    assert socket.socket.connect is connect and socket.create_connection.__name__ == "create_connection"


runner = CliRunner()


# one file per source, laid out as MOABB's downloaders leave them (two BNCI URL layouts, old and new)
CACHED = {
    "AlexMI": "MNE-alexeeg-data/zenodo/806023/subject1.raw.fif",
    "BNCI2014_001": "MNE-bnci-data/database/data-sets/001-2014/A01T.mat",
    "BNCI2015_004": "MNE-bnci-data/~bci/database/004-2015/A.mat",
    "Zhou2016": "MNE-zhou-2016/subject_1/1A.cnt",
}


@pytest.fixture
def mne_data(tmp_path, monkeypatch):
    """An empty MOABB cache in tmp_path (every MNE config key that could point elsewhere redirected there)."""
    cache = tmp_path / "mne_data"
    cache.mkdir()
    monkeypatch.setenv("MNE_DATA", str(cache))
    for sign in {sign for sign, _ in bci.CACHE_FILES.values()}:
        monkeypatch.setenv(f"MNE_DATASETS_{sign}_PATH", str(cache))
    return cache


@pytest.fixture
def installed(monkeypatch):
    """An importable (fake) moabb; the presence test must not import its datasets module."""
    module = types.ModuleType("moabb")
    monkeypatch.setitem(sys.modules, "moabb", module)
    monkeypatch.delitem(sys.modules, "moabb.datasets", raising=False)
    return module


def fill(cache: Path, sources=tuple(CACHED)) -> None:
    for name in sources:
        path = cache / CACHED[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def bci_row(data_dir) -> dict:
    return {row["name"]: row for row in list_datasets(data_dir)}["bci"]


def test_bci_absent_without_moabb_even_with_a_full_cache(mne_data, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "moabb", None)
    fill(mne_data)
    assert not bci_row(tmp_path)["present"]


def test_bci_present_only_when_every_source_is_cached(mne_data, installed, tmp_path):
    assert not bci_row(tmp_path)["present"]  # moabb installed, nothing fetched
    fill(mne_data, ("AlexMI", "BNCI2014_001", "BNCI2015_004"))
    assert not bci_row(tmp_path)["present"]  # Zhou2016 missing
    (mne_data / "MNE-zhou-2016").mkdir()  # MOABB creates the folder before downloading
    assert not bci_row(tmp_path)["present"]
    fill(mne_data)
    assert bci_row(tmp_path)["present"]
    assert is_present("bci", tmp_path) and dataset_info("bci", tmp_path)["present"]
    assert "moabb.datasets" not in sys.modules  # cheap: the MOABB package itself was never imported


def test_a_per_dataset_mne_path_is_honoured(mne_data, installed, tmp_path, monkeypatch):
    fill(mne_data, ("AlexMI", "BNCI2014_001", "BNCI2015_004"))
    elsewhere = tmp_path / "zhou_cache"
    monkeypatch.setenv("MNE_DATASETS_ZHOU_PATH", str(elsewhere))
    fill(mne_data, ("Zhou2016",))
    assert not bci_row(tmp_path)["present"]  # Zhou2016 is looked for where MNE says it lives
    fill(elsewhere, ("Zhou2016",))
    assert bci_row(tmp_path)["present"]


def test_listing_never_touches_the_network(mne_data, installed, tmp_path):
    fill(mne_data)
    with bci.no_network() as refused:
        rows = list_datasets(tmp_path)
    assert refused == [] and {r["name"]: r for r in rows}["bci"]["present"]


def test_cli_list_reports_bci_status(mne_data, installed, tmp_path):
    def listed() -> bool:
        result = runner.invoke(app, ["datasets", "list", "--data-dir", str(tmp_path), "--json"])
        assert result.exit_code == 0, result.output
        return {row["name"]: row for row in json.loads(result.stdout)}["bci"]["present"]

    assert listed() is False
    fill(mne_data)
    assert listed() is True
    table = runner.invoke(app, ["datasets", "list", "--data-dir", str(tmp_path)])
    assert table.exit_code == 0 and "bci" in table.stdout


def test_other_datasets_still_use_their_file_lists(tmp_path):
    rows = {row["name"]: row for row in list_datasets(tmp_path)}
    assert rows["digits"]["present"] and not rows["cifar100"]["present"]
