"""The dataset registry: loaders register with their static metadata (``@register_dataset(meta)``); ``load_dataset``
checks a data set's ``dataset_params``, fills the loader's defaults in and loads it (from the prepared cache when
there is one)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.cache import load_prepared
from fedbench.plugins import PluginRegistry, with_defaults

DATASETS: PluginRegistry[Callable[..., DatasetArrays]] = PluginRegistry("dataset")
# the loader arguments fedbench supplies itself, never dataset_params
LOADER_ARGUMENTS = frozenset({"root", "verify"})


def register_dataset(meta: DatasetMeta, **info: Any):
    return DATASETS.register(meta.name, meta=meta, **info)


def dataset_meta(name: str) -> DatasetMeta:
    return DATASETS.info(name)["meta"]


def static_input_shape(name: str, params: dict[str, Any] | None = None) -> tuple[int, ...]:
    """The input shape a run of ``name`` will see, without loading anything: the registered shape, with the
    loader's image-size parameter (``image_size``, MedMNIST's ``size``) and channel count (``channels``, of a user's
    image folder) applied to (C, H, W) images."""
    shape = tuple(dataset_meta(name).input_shape)
    params = params or {}
    size = params.get("image_size") or params.get("size")
    if len(shape) == 3 and isinstance(size, int) and not isinstance(size, bool):
        shape = (shape[0], size, size)
    channels = params.get("channels")
    if len(shape) == 3 and isinstance(channels, int) and not isinstance(channels, bool):
        shape = (channels, *shape[1:])
    return shape


def data_root(explicit: str | os.PathLike | None = None) -> Path:
    """``--data-dir`` > ``FEDBENCH_DATA`` > the user cache directory."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("FEDBENCH_DATA"):
        return Path(os.environ["FEDBENCH_DATA"]).expanduser()
    return Path(platformdirs.user_cache_dir("fedbench")) / "data"


def dataset_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` of data set ``name`` checked, with the loader's defaults filled in (``fedbench.plugins.with_defaults``,
    as a recipe's spec holds them): the key of the prepared cache however the defaults were spelled."""
    return with_defaults(name, DATASETS.get(name), params, LOADER_ARGUMENTS, "dataset", "dataset_params")


def load_dataset(
    name: str, root: str | os.PathLike | None = None, *, verify: bool = True, use_prepared: bool = True, **params: Any
) -> DatasetArrays:
    """Load ``name`` from ``<data root>/<name>/``.

    ``verify=False`` (``--no-verify``) skips checksum verification; ``info['verified']`` is then False.
    A cache written by ``fedbench datasets prepare`` for the same parameters is memory-mapped instead of
    parsing the source files again (``use_prepared=False`` ignores it).
    """
    loader = DATASETS.get(name)
    params = dataset_params(name, params)
    dataset_root = data_root(root) / name
    if use_prepared:
        prepared = load_prepared(dataset_root, name, params, verify=verify)
        if prepared is not None:
            return prepared
    if "verify" in inspect.signature(loader).parameters:
        params = {**params, "verify": verify}
    return loader(root=dataset_root, **params)
