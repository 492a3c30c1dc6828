"""BCI (LG-Mix App. D.2, Table 10): four MOABB motor-imagery datasets, one per client.

Sources [paper]: AlexMI, BNCI2014_001, BNCI2015_004, Zhou2016 (datasets.md §1.13); only the classes they share,
right_hand (0) and feet (1), are kept; group = source dataset (0…3 in that order). The data are read as MOABB
caches them (``$MNE_DATA``, default ``~/mne_data``): MOABB is an optional extra (``pip install 'fedbench-repro[bci]'``)
imported lazily, and the loader never downloads — network access is blocked while MOABB reads its cache, and a
missing file is a ``DataError`` saying how to fetch it once.

The module has two halves:
* ``read_moabb_source`` (the only part that touches MOABB/MNE) returns a ``SourceRecordings``: per run of every
  subject/session, the continuous EEG in µV, channel names, sampling rate and the event onsets/codes, plus the
  dataset's ``event_id`` and task ``interval``.
* plain numpy/scipy: band-pass (zero-phase Butterworth) and resample the continuous signals, cut trials of a common
  length, keep the two classes, then the features.

Features (``dataset_params.features``):
* ``tangent`` (default, the paper's pipeline [paper]): per-trial covariance → tangent-space projection at the
  Riemannian mean of the client's *training* trials (pyriemann's ``mean_riemann`` + ``tangent_space(metric='riemann')``,
  the ``bci`` extra [proposal: the fit set is unstated; fitting on the train split keeps test trials out]) →
  vector of C(C+1)/2 (off-diagonal terms × √2) zero-padded to a common length. Each source keeps all its own EEG
  channels (16, 22, 30, 14 → 136, 253, 465, 105), so the input is (1, 1, 465).
* ``epochs``: the band-passed, resampled trials themselves on a channel set common to all sources (default: the
  intersection of the sources' channel names — C3, Cz, C4 for the four datasets) as (C, 1, T) signals in µV.

Trials: from ``interval[0] + tmin`` seconds after the cue, ``window`` seconds long (default 3 s, AlexMI's trial
length, the shortest of the four [proposal]); band 8–32 Hz (MOABB's ``MotorImagery`` default) and 128 Hz [proposal].
Each client keeps a stratified ``test_fraction`` (0.2, fixed ``split_seed``) as its test set; LG-Mix's 0.6/0.2/0.2
is then 75/25 train/val of the rest (lgmix.md §2.1).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import holdout_split
from fedbench.data.files import Source
from fedbench.errors import ConfigError, DataError

SOURCES = ("AlexMI", "BNCI2014_001", "BNCI2015_004", "Zhou2016")
CLASSES = ("right_hand", "feet")
SOURCE_CHANNELS = {"AlexMI": 16, "BNCI2014_001": 22, "BNCI2015_004": 30, "Zhou2016": 14}
TANGENT_LENGTH = max(c * (c + 1) // 2 for c in SOURCE_CHANNELS.values())  # 465 (BNCI2015_004's 30 channels)
FETCH = (
    'python -c "import moabb.datasets as d; [D().download() for D in '
    '(d.AlexMI, d.BNCI2014_001, d.BNCI2015_004, d.Zhou2016)]"'
)
INSTALL = "pip install moabb (the fedbench extra 'bci': pip install 'fedbench-repro[bci]')"
CACHE = "MOABB caches data under $MNE_DATA (default ~/mne_data)"

BCI_SOURCE = Source(
    layout="MOABB's own cache, not the fedbench data root: $MNE_DATA (default ~/mne_data)/MNE-<dataset>-data/… "
    "exactly as `moabb` downloads AlexMI, BNCI2014_001, BNCI2015_004 and Zhou2016",
    how_to_get=f"{INSTALL}, then fetch once (network): {FETCH}",
    license="BNCI: CC BY-ND 4.0 (unverified per dataset); AlexMI, Zhou2016: see the MOABB documentation",
    notes=(
        "fedbench never downloads BCI data during a run; network access is blocked while MOABB reads its cache.",
        "features='tangent' (paper) gives (1, 1, 465) vectors; features='epochs' gives (C, 1, T) trials.",
    ),
)
BCI_META = DatasetMeta("bci", 2, (1, 1, TANGENT_LENGTH), (), (), used_by=("lgmix",), group_kind="dataset")


# ---- the MOABB-facing half ------------------------------------------------------------------------------------


@dataclass
class Recording:
    """One continuous run: EEG (C, S) in µV, its channel names and rate, event onsets (samples) and codes."""

    signals: np.ndarray
    channels: tuple[str, ...]
    sfreq: float
    onsets: np.ndarray
    codes: np.ndarray
    subject: int
    session: str = ""


@dataclass
class SourceRecordings:
    name: str
    event_id: dict[str, int]
    interval: tuple[float, float]  # the task window after the cue, seconds (MOABB ``dataset.interval``)
    recordings: list[Recording] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


class _NetworkBlocked(OSError):
    pass


@contextlib.contextmanager
def no_network() -> Iterator[list[str]]:
    """Refuse every socket connection and name lookup inside the block; the list collects what was refused.

    MOABB fetches missing files (pooch, requests, figshare/zenodo APIs) inside ``get_data``; blocking the socket layer
    keeps that from ever downloading, whatever route a dataset class takes."""
    refused: list[str] = []
    original = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo, socket.create_connection

    def refuse(*args: Any, **kwargs: Any) -> Any:
        refused.append(repr(args[1] if len(args) > 1 else args[:1])[:80])
        raise _NetworkBlocked("fedbench: network access is disabled while reading the MOABB cache")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse
    socket.create_connection = refuse
    try:
        yield refused
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo, socket.create_connection = original  # type: ignore[method-assign]


def import_moabb() -> Any:
    try:
        # local: optional dependency (pip install fedbench-repro[bci])
        import moabb.datasets as moabb_datasets
    except ImportError:
        raise DataError(f"dataset 'bci' needs MOABB: {INSTALL}; {CACHE}; fetch once with {FETCH}") from None
    return moabb_datasets


def mne_config(key: str) -> str | None:
    """An MNE config value: the environment, else MNE's config file (read through ``mne`` when it is installed)."""
    if os.environ.get(key):
        return os.environ[key]
    try:
        # local: optional dependency (pip install fedbench-repro[bci])
        import mne
    except ImportError:
        return None
    return mne.get_config(key)


def mne_data_dir() -> str:
    return mne_config("MNE_DATA") or str(Path.home() / "mne_data")


# Where MOABB puts each source: ``<MNE_DATASETS_<SIGN>_PATH, else MNE_DATA, else ~/mne_data>/MNE-<sign>-data/…``
# (``moabb.datasets.download.data_dl``; Zhou2016 uses ``MNE-zhou-2016``), and globs for the files that show the source
# was fetched. Sub-layouts differ between MOABB versions (old URL paths, ``zenodo/<record>/``), hence ``**``.
CACHE_FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "AlexMI": ("ALEXEEG", ("MNE-alexeeg-data/**/subject*.raw.fif",)),
    "BNCI2014_001": ("BNCI", ("MNE-bnci-data/**/001-2014/*.mat",)),
    "BNCI2015_004": ("BNCI", ("MNE-bnci-data/**/004-2015/*.mat",)),
    "Zhou2016": ("ZHOU", ("MNE-zhou-2016/**/*.cnt", "MNE-zhou*/**/*.edf", "MNE-zhou*/**/*.fif")),
}


def moabb_installed() -> bool:
    """Whether ``import moabb`` would find a module, without importing it (a ``None`` entry in ``sys.modules``
    blocks the import, as in tests)."""
    if "moabb" in sys.modules:
        return sys.modules["moabb"] is not None
    try:
        return importlib.util.find_spec("moabb") is not None
    except (ImportError, ValueError):
        return False


def source_cached(name: str) -> bool:
    """A file of source ``name`` exists in MOABB's cache (a cheap look at the folders; nothing is read or fetched)."""
    sign, patterns = CACHE_FILES[name]
    base = Path(mne_config(f"MNE_DATASETS_{sign}_PATH") or mne_data_dir()).expanduser()
    if not base.is_dir():
        return False
    return any(path.is_file() for pattern in patterns for path in base.glob(pattern))


def moabb_cache_present(folder: Path | None = None) -> bool:
    """``fedbench datasets list``'s "present" for bci: MOABB installed and every default source in its cache.
    Cheap and offline (no MOABB import, no network, only ``mne`` for its config); ``fedbench datasets check bci``
    loads the data for real. ``folder`` (the fedbench data folder) is unused: the data live in MOABB's cache."""
    return moabb_installed() and all(source_cached(name) for name in SOURCES)


def stim_events(stim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Onsets where the trigger channel steps up to a non-zero value (``mne.find_events``, consecutive='increasing')."""
    values = np.rint(np.asarray(stim, dtype=np.float64)).astype(np.int64)
    previous = np.concatenate([[0], values[:-1]])
    onsets = np.flatnonzero((values != 0) & (values > previous))
    return onsets, values[onsets]


def recording_from_raw(raw: Any, event_id: dict[str, int], subject: int, session: str) -> Recording:
    """Continuous EEG and events of one MNE ``Raw`` (the object MOABB's ``get_data`` returns per run)."""
    types = list(raw.get_channel_types())
    names = list(raw.ch_names)
    data = np.asarray(raw.get_data())
    eeg = [i for i, kind in enumerate(types) if kind == "eeg"]
    stim = [i for i, kind in enumerate(types) if kind == "stim"]
    if stim:
        onsets, codes = stim_events(data[stim[0]])
    else:  # datasets that carry their events as annotations
        # local: optional dependency (pip install fedbench-repro[bci])
        import mne

        events, _ = mne.events_from_annotations(raw, event_id=event_id, verbose=False)
        onsets, codes = events[:, 0] - raw.first_samp, events[:, 2]
    return Recording(
        data[eeg] * 1e6,
        tuple(names[i] for i in eeg),
        float(raw.info["sfreq"]),
        np.asarray(onsets, np.int64),
        np.asarray(codes, np.int64),
        subject,
        session,
    )


def read_moabb_source(name: str, subjects: Sequence[int] | None = None) -> SourceRecordings:
    """All runs of ``name`` from MOABB's cache (never downloading): ``dataset.get_data(subjects)`` →
    {subject: {session: {run: Raw}}} → ``SourceRecordings``."""
    moabb_datasets = import_moabb()
    cls = getattr(moabb_datasets, name, None) or getattr(moabb_datasets, name.replace("_", ""), None)
    if cls is None:
        raise DataError(f"dataset 'bci': this MOABB version has no dataset {name}; {INSTALL} (a recent moabb)")
    dataset = cls()
    chosen = list(subjects) if subjects else list(dataset.subject_list)
    unknown = sorted(set(chosen) - set(dataset.subject_list))
    if unknown:
        raise ConfigError(
            f"dataset_params.subjects: {name} has no subject(s) {unknown}; it has {list(dataset.subject_list)}"
        )
    fetch = f'python -c "import moabb.datasets as d; d.{cls.__name__}().download()"'
    with no_network() as refused:
        try:
            data = dataset.get_data(subjects=chosen)
        except Exception as error:  # MOABB tried to fetch a missing file (or the cache is unreadable)
            if refused or isinstance(error, OSError):
                raise DataError(
                    f"dataset 'bci': {name} (subjects {chosen}) is not in MOABB's cache at {mne_data_dir()} "
                    f"({CACHE}); fedbench never downloads during a run; fetch it once with {fetch}"
                ) from None
            raise
    interval = tuple(float(t) for t in getattr(dataset, "interval", (0.0, 3.0)))
    source = SourceRecordings(name, dict(dataset.event_id), (interval[0], interval[1]))
    for subject, sessions in data.items():
        for session, runs in sessions.items():
            for raw in runs.values():
                source.recordings.append(recording_from_raw(raw, source.event_id, int(subject), str(session)))
    source.info = {"subjects": [int(s) for s in data], "moabb_class": cls.__name__}
    return source


# ---- plain numpy/scipy: trials --------------------------------------------------------------------------------


def pick_channels(
    recording: Recording, wanted: Sequence[str] | None, source: str
) -> tuple[np.ndarray, tuple[str, ...]]:
    if wanted is None:
        return recording.signals, recording.channels
    lookup = {c.lower(): i for i, c in enumerate(recording.channels)}
    missing = [c for c in wanted if c.lower() not in lookup]
    if missing:
        raise ConfigError(
            f"dataset_params.channels: {source} has no channel(s) {missing}; it has {list(recording.channels)}"
        )
    rows = [lookup[c.lower()] for c in wanted]
    return recording.signals[rows], tuple(recording.channels[r] for r in rows)


def bandpass_resample(
    signals: np.ndarray, sfreq: float, rate: float | None, fmin: float | None, fmax: float | None, order: int = 4
) -> tuple[np.ndarray, float]:
    """Zero-phase Butterworth band-pass (or high/low-pass when one edge is None), then polyphase resampling."""
    # local: keeps scipy out of datasets' and run's start-up
    from scipy import signal as scipy_signal

    x = np.asarray(signals, dtype=np.float64)
    if fmax is not None and fmax >= sfreq / 2:
        fmax = None
    if fmin is not None or fmax is not None:
        if fmin is not None and fmax is not None:
            sos = scipy_signal.butter(order, [fmin, fmax], btype="bandpass", fs=sfreq, output="sos")
        elif fmin is not None:
            sos = scipy_signal.butter(order, fmin, btype="highpass", fs=sfreq, output="sos")
        else:
            sos = scipy_signal.butter(order, fmax, btype="lowpass", fs=sfreq, output="sos")
        x = scipy_signal.sosfiltfilt(sos, x, axis=-1)
    if rate is None or rate == sfreq:
        return x, sfreq
    ratio = Fraction(rate / sfreq).limit_denominator(1000)
    return scipy_signal.resample_poly(
        x, ratio.numerator, ratio.denominator, axis=-1
    ), sfreq * ratio.numerator / ratio.denominator


def source_trials(
    source: SourceRecordings,
    channels: Sequence[str] | None,
    rate: float | None,
    fmin: float | None,
    fmax: float | None,
    tmin: float,
    window: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...], float]:
    """(trials (n, C, T) µV, labels (n,) in CLASSES order, subject per trial, channel names, rate)."""
    missing = [c for c in CLASSES if c not in source.event_id]
    if missing:
        raise DataError(
            f"dataset 'bci': {source.name} has no event(s) {missing}; its events are {sorted(source.event_id)}"
        )
    label_of = {source.event_id[c]: k for k, c in enumerate(CLASSES)}
    xs, ys, subjects = [], [], []
    names: tuple[str, ...] = ()
    out_rate = rate
    for recording in source.recordings:
        signals, names_here = pick_channels(recording, channels, source.name)
        if names and tuple(n.lower() for n in names_here) != tuple(n.lower() for n in names):
            raise DataError(
                f"dataset 'bci': {source.name} runs have different channels ({names} vs {names_here}); "
                "set dataset_params.channels"
            )
        names = names_here
        x, out_rate = bandpass_resample(signals, recording.sfreq, rate, fmin, fmax)
        length = int(round(window * out_rate))
        keep = np.isin(recording.codes, list(label_of))
        starts = np.rint(
            recording.onsets[keep] * out_rate / recording.sfreq + (source.interval[0] + tmin) * out_rate
        ).astype(np.int64)
        labels = np.array([label_of[int(c)] for c in recording.codes[keep]], dtype=np.int64)
        inside = (starts >= 0) & (starts + length <= x.shape[-1])
        starts, labels = starts[inside], labels[inside]
        xs.append(x[:, starts[:, None] + np.arange(length)].transpose(1, 0, 2).astype(np.float32))
        ys.append(labels)
        subjects.append(np.full(len(labels), recording.subject, np.int64))
    if not xs or sum(len(y) for y in ys) == 0:
        raise DataError(f"dataset 'bci': {source.name} gave no {'/'.join(CLASSES)} trials")
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(subjects), names, float(out_rate or 0)


# ---- Riemannian tangent space: covariances here, mean and tangent space from pyriemann (the bci extra) ------------


def covariances(trials: np.ndarray, shrinkage: float = 0.0) -> np.ndarray:
    """Sample covariance X Xᵀ / T per trial (pyriemann estimator 'scm'), optionally shrunk towards tr(C)/C · I."""
    x = trials.astype(np.float64)
    cov = np.einsum("nct,ndt->ncd", x, x) / x.shape[-1]
    if shrinkage:
        eye = np.eye(cov.shape[-1])
        mu = np.trace(cov, axis1=1, axis2=2)[:, None, None] / cov.shape[-1]
        cov = (1 - shrinkage) * cov + shrinkage * mu * eye
    return cov


def _pyriemann() -> tuple[Any, Any]:
    """pyriemann's ``mean_riemann`` and ``tangent_space`` (the ``bci`` extra); ``pyriemann.geometry`` since 0.10,
    ``pyriemann.utils`` before."""
    try:
        # local: optional dependency (pip install fedbench-repro[bci])
        from pyriemann.geometry.mean import mean_riemann
        from pyriemann.geometry.tangentspace import tangent_space
    except ImportError:
        try:
            # local: optional dependency (pip install fedbench-repro[bci])
            from pyriemann.utils.mean import mean_riemann
            from pyriemann.utils.tangentspace import tangent_space
        except ImportError:
            raise DataError(
                "dataset 'bci': features='tangent' needs pyriemann: pip install 'fedbench-repro[bci]' (or use "
                "features='epochs')"
            ) from None
    return mean_riemann, tangent_space


def riemannian_mean(covs: np.ndarray, tol: float = 1e-10, max_iter: int = 200) -> np.ndarray:
    """Fréchet mean under the affine-invariant metric (pyriemann ``mean_riemann``: gradient descent with an adaptive
    step, stopped when the gradient's Frobenius norm is below ``tol``)."""
    mean_riemann, _ = _pyriemann()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Convergence not reached" is an error here, not a warning on stderr
        try:
            return np.asarray(mean_riemann(np.asarray(covs, np.float64), tol=tol, maxiter=max_iter))
        except UserWarning as warning:
            raise DataError(f"dataset 'bci': the Riemannian mean of {len(covs)} covariances: {warning}") from None


def tangent_vectors(covs: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """upper(logm(R^{-1/2} C R^{-1/2})), off-diagonal entries × √2, row-major triu order (pyriemann
    ``tangent_space`` with the Riemannian metric)."""
    _, tangent_space = _pyriemann()
    return np.asarray(tangent_space(np.asarray(covs, np.float64), np.asarray(reference, np.float64), metric="riemann"))


# ---- the loader -----------------------------------------------------------------------------------------------


def assemble(
    sources: list[SourceRecordings],
    features: str = "tangent",
    channels: Sequence[str] | str | None = None,
    resample: float | None = 128.0,
    fmin: float | None = 8.0,
    fmax: float | None = 32.0,
    tmin: float = 0.0,
    window: float = 3.0,
    shrinkage: float = 0.0,
    length: int | None = None,
    test_fraction: float = 0.2,
    split_seed: int = 0,
) -> DatasetArrays:
    """Trials, features and the per-client split from in-memory ``SourceRecordings`` (no MOABB involved)."""
    if features not in ("tangent", "epochs"):
        raise ConfigError(f"dataset_params.features={features!r} for bci; choose 'tangent' or 'epochs'")
    if window <= 0:
        raise ConfigError(f"dataset_params.window={window} must be > 0 seconds")
    if features == "epochs" and resample is None and len({r.sfreq for s in sources for r in s.recordings}) > 1:
        raise ConfigError(
            "dataset_params.resample=None: the sources' sampling rates differ, so trials would differ in "
            "length; give a common rate for features='epochs'"
        )
    if isinstance(channels, str):
        channels = None if channels in ("own", "common") else [c.strip() for c in channels.split(",") if c.strip()]
    if features == "epochs" and channels is None:
        # the channels every source records (case-insensitive), in the first source's order
        shared = set.intersection(*({c.lower() for r in s.recordings for c in r.channels} for s in sources))
        channels = [c for c in sources[0].recordings[0].channels if c.lower() in shared]
        if not channels:
            raise DataError("dataset 'bci': the sources share no EEG channel; set dataset_params.channels")
    per_source = [source_trials(s, channels, resample, fmin, fmax, tmin, window) for s in sources]
    y = np.concatenate([t[1] for t in per_source])
    groups = np.concatenate([np.full(len(t[1]), g, np.int64) for g, t in enumerate(per_source)])
    train, test = holdout_split(y, test_fraction, split_seed, groups)
    if features == "epochs":
        x = np.concatenate([t[0] for t in per_source])[:, :, None, :]
    else:
        vectors = []
        offset = 0
        for trials, labels, *_ in per_source:
            covs = covariances(trials, shrinkage)
            own = np.arange(offset, offset + len(labels))
            fit = own[np.isin(own, train)] - offset
            vectors.append(tangent_vectors(covs, riemannian_mean(covs[fit if len(fit) else slice(None)])))
            offset += len(labels)
        width = max(v.shape[1] for v in vectors)
        length = length or max(width, TANGENT_LENGTH)
        if width > length:
            raise ConfigError(f"dataset_params.length={length} is shorter than the longest tangent vector ({width})")
        x = np.concatenate([np.pad(v, ((0, 0), (0, length - v.shape[1]))) for v in vectors])[:, None, None, :]
    x = np.ascontiguousarray(x, dtype=np.float32)
    meta = replace(BCI_META, input_shape=tuple(int(d) for d in x.shape[1:]))
    info = {
        "files": [],
        "verified": False,
        "verification": "MOABB cache (no published checksums)",
        "features": features,
        "resample": resample,
        "band": [fmin, fmax],
        "tmin": tmin,
        "window": window,
        "shrinkage": shrinkage,
        "test_fraction": test_fraction,
        "split_seed": split_seed,
        "classes": list(CLASSES),
        "group_names": [s.name for s in sources],
        "sources": {
            s.name: {
                **s.info,
                "channels": list(t[3]),
                "rate": t[4],
                "interval": list(s.interval),
                "trials": int(len(t[1])),
                "per_class": np.bincount(t[1], minlength=2).tolist(),
            }
            for s, t in zip(sources, per_source)
        },
    }
    return DatasetArrays(
        meta, x[train], y[train], x[test], y[test], train_groups=groups[train], test_groups=groups[test], info=info
    )


@register_dataset(
    BCI_META,
    source=BCI_SOURCE,
    num_groups=len(SOURCES),
    groups_param="sources",
    classes=CLASSES,
    present=moabb_cache_present,
)
def load_bci(
    root: Path,
    sources: Sequence[str] = SOURCES,
    subjects: dict[str, list[int]] | None = None,
    features: str = "tangent",
    channels: Sequence[str] | str | None = None,
    resample: float | None = 128.0,
    fmin: float | None = 8.0,
    fmax: float | None = 32.0,
    tmin: float = 0.0,
    window: float = 3.0,
    shrinkage: float = 0.0,
    length: int | None = None,
    test_fraction: float = 0.2,
    split_seed: int = 0,
) -> DatasetArrays:
    """Four MOABB motor-imagery datasets as four clients (group = source dataset), classes right_hand/feet.

    Parameters: ``sources`` (MOABB dataset names, default the paper's four, in client order); ``subjects``
    ({source: [subject ids]}, default all); ``features`` ('tangent' | 'epochs'); ``channels`` (names used for every
    source; default: each source's own EEG channels for 'tangent', their intersection for 'epochs'); ``resample`` (Hz),
    ``fmin``/``fmax`` (band-pass, None skips an edge), ``tmin`` (s after the task interval's start), ``window`` (s);
    ``shrinkage`` (covariance shrinkage), ``length`` (tangent-vector padding, default 465); ``test_fraction`` and
    ``split_seed`` (per-client stratified hold-out). ``root`` is unused: MOABB reads its own cache ($MNE_DATA).
    """
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown or not sources:
        raise ConfigError(f"dataset_params.sources: {unknown or 'empty'}; choose from {', '.join(SOURCES)}")
    subjects = dict(subjects or {})
    extra = sorted(set(subjects) - set(sources))
    if extra:
        raise ConfigError(f"dataset_params.subjects names source(s) {extra} not in sources {list(sources)}")
    import_moabb()
    loaded = [read_moabb_source(name, subjects.get(name)) for name in sources]
    arrays = assemble(
        loaded, features, channels, resample, fmin, fmax, tmin, window, shrinkage, length, test_fraction, split_seed
    )
    try:
        arrays.info["moabb_version"] = version("moabb")
    except Exception:  # a vendored or fake module without distribution metadata
        arrays.info["moabb_version"] = None
    arrays.info["mne_data"] = mne_data_dir()
    return arrays
