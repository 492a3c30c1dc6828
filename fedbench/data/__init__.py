"""Datasets (one loader per family), partitioners, synthetic stand-ins and the tensor data store.

A loader is registered with its static metadata and has the signature
``loader(root: pathlib.Path, **dataset_params) -> DatasetArrays`` where ``root`` is
``<data root>/<dataset name>/``. Loaders raise ``DataError`` naming the missing files and how to get them.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.errors import ConfigError, field_error
from fedbench.plugins import PluginRegistry

DATASETS: PluginRegistry[Callable[..., DatasetArrays]] = PluginRegistry("dataset")


def register_dataset(meta: DatasetMeta, **info: Any):
    return DATASETS.register(meta.name, meta=meta, **info)


def dataset_meta(name: str) -> DatasetMeta:
    return DATASETS.info(name)["meta"]


def static_input_shape(name: str, params: dict[str, Any] | None = None) -> tuple[int, ...]:
    """The input shape a run of ``name`` will see, without loading anything: the registered shape, with the
    loader's image-size parameter (``image_size``, MedMNIST's ``size``) applied to (C, H, W) images."""
    shape = tuple(dataset_meta(name).input_shape)
    params = params or {}
    size = params.get("image_size") or params.get("size")
    if len(shape) == 3 and isinstance(size, int) and not isinstance(size, bool):
        shape = (shape[0], size, size)
    return shape


def data_root(explicit: str | os.PathLike | None = None) -> Path:
    """``--data-dir`` > ``FEDBENCH_DATA`` > the user cache directory."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("FEDBENCH_DATA"):
        return Path(os.environ["FEDBENCH_DATA"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("fedbench")) / "data"


@functools.cache
def _parameter_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The parameters of a registered plug-in function (fixed: computed once; expanding a recipe checks thousands)."""
    return tuple(inspect.signature(fn).parameters)


def check_params(name: str, fn: Callable[..., Any], params: dict[str, Any], skip: set[str], what: str) -> None:
    """Every key of ``params`` is a parameter of ``fn`` (a loader, partitioner or model) and every value fits the
    parameter's annotation (checked, not converted: the values stay as given); else ``ConfigError``."""
    allowed = set(_parameter_names(fn)) - skip
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(
            f"{what} {name!r} has no parameter(s) {', '.join(map(repr, sorted(unknown)))}; "
            f"accepted: {', '.join(sorted(allowed)) or 'none'}"
        )
    for key, value in params.items():
        adapter = _parameter_adapter(fn, key)
        if adapter is None:
            continue
        try:
            as_json = json.dumps(value)
        except (TypeError, ValueError):
            continue  # a Python caller's own object (a path, an array): the callee checks it
        try:
            # strict JSON mode: the value must already be of the annotated type as TOML or JSON write it
            # ("0.5" is not a float, 2.0 is not an int), since the callee receives it unconverted
            adapter.validate_json(as_json, strict=True)
        except ValidationError as exc:
            raise ConfigError(f"{what} {name!r}: parameter {key} = {value!r}: {field_error(exc).message}") from None


@functools.cache
def _parameter_adapter(fn: Callable[..., Any], key: str) -> TypeAdapter[Any] | None:
    """A pydantic validator for ``fn``'s parameter ``key``, or None where the annotation is missing or not one
    pydantic can check (tensors, modules)."""
    try:
        hints = typing.get_type_hints(fn.__init__ if inspect.isclass(fn) else fn)
        return TypeAdapter(hints[key]) if key in hints else None
    except Exception:  # an unresolvable or arbitrary annotation: the callee checks its own value
        return None


def load_dataset(
    name: str, root: str | os.PathLike | None = None, *, verify: bool = True, use_prepared: bool = True, **params: Any
) -> DatasetArrays:
    """Load ``name`` from ``<data root>/<name>/``.

    ``verify=False`` (``--no-verify``) skips checksum verification; ``info['verified']`` is then False.
    A cache written by ``fedbench datasets prepare`` for the same parameters is memory-mapped instead of
    parsing the source files again (``use_prepared=False`` ignores it).
    """
    from fedbench.recipes.resolve import resolve_params

    loader = DATASETS.get(name)
    params = resolve_params("dataset", name, params)  # defaults filled in: one cache key however they were spelled
    dataset_root = data_root(root) / name
    if use_prepared:
        from fedbench.data.cache import load_prepared

        prepared = load_prepared(dataset_root, name, params, verify=verify)
        if prepared is not None:
            return prepared
    if "verify" in inspect.signature(loader).parameters:
        params = {**params, "verify": verify}
    return loader(root=dataset_root, **params)


# Register the built-in loaders and partitioners.
from fedbench.data import (  # noqa: E402,F401
    bci,
    camelyon17,
    cifar,
    covid,
    digits,
    fedbn,
    femnist,
    medmnist,
    mnist,
    pamap2,
    partition,
    retinal,
    svhn,
)
