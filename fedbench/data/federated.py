"""A run's federated data: the data set loaded (or synthesised), its training pool partitioned over the clients,
each client's train / validation / test indices, all as tensors on the run's device.

``prepare_data(spec, device)`` is what the engine calls before round 1; ``load_arrays``, ``partition_clients`` and
``client_test_sets`` are its steps, which the batch's preflight also runs (to turn missing data or impossible
partition parameters into user errors before anything is registered). Loading is not cached here: whoever
loads several runs' data in a row owns an ``ArraysCache`` and passes it (a worker process keeps one for the
runs it trains, which usually share a data set).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbench.data._registry import load_dataset
from fedbench.data.base import DatasetArrays
from fedbench.data.partition import (
    PARTITIONERS,
    class_matched_test_sets,
    class_ordered_split,
    make_partition,
    natural_test_sets,
    partition_fingerprint,
)
from fedbench.data.store import TensorData
from fedbench.data.synthetic import synthetic_dataset
from fedbench.errors import ConfigError
from fedbench.seeding import numpy_rng
from fedbench.spec import RunSpec


@dataclass
class FederatedData:
    tensors: TensorData
    client_train: list[torch.Tensor]
    client_test: list[torch.Tensor]
    num_classes: int
    input_shape: tuple[int, ...]
    info: dict[str, Any]
    client_val: list[torch.Tensor] = field(default_factory=list)  # per-client validation splits (may be empty)
    client_test_from_test: bool = False  # client_test indexes the global test set (spec.client_test != "split")

    def client_test_data(self, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A client's test inputs and labels: from the training pool (``client_test = split``) or the global test set."""
        index = self.client_test[client]
        if self.client_test_from_test:
            return self.tensors.test_x[index], self.tensors.test_y[index]
        return self.tensors.train_x[index], self.tensors.train_y[index]


def arrays_key(spec: RunSpec, data_root: str | Path | None, verify: bool) -> str:
    """What determines the arrays ``load_arrays`` returns."""
    return repr((spec.dataset, sorted(spec.dataset_params.items()), spec.synthetic, str(data_root), verify))


def load_arrays(spec: RunSpec, data_root: str | Path | None = None, verify: bool = True) -> DatasetArrays:
    """The run's data set as arrays. Synthetic stand-ins depend on the dataset (and the parameters that shape it:
    ``image_size``, the groups loaded, pooled splits) only, not on the run seed, so every run of a table sees the same
    stand-in data, as it would a real data set."""
    if spec.synthetic:
        return synthetic_dataset(spec.dataset, params=spec.dataset_params)
    return load_dataset(spec.dataset, data_root, verify=verify, **spec.dataset_params)


class ArraysCache:
    """The last data set loaded, kept by its owner for the next run that needs the same one (a recipe's runs
    usually share it). Holds one data set at most: a different one replaces it."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._arrays: DatasetArrays | None = None

    def load(self, spec: RunSpec, data_root: str | Path | None = None, verify: bool = True) -> DatasetArrays:
        key = arrays_key(spec, data_root, verify)
        if key != self._key:
            self._key, self._arrays = None, None  # free the old arrays before loading new ones
            self._arrays = load_arrays(spec, data_root, verify)
            self._key = key
        assert self._arrays is not None  # set whenever self._key is
        return self._arrays


def check_test_set(spec: RunSpec, arrays: DatasetArrays) -> None:
    """A run that reads the global test set (global evaluation, client test sets drawn from it) needs one: a data
    set loaded with its splits pooled (``pool_splits``) has none, and would score an empty set as 0."""
    if len(arrays.test_y) == 0 and (spec.eval_mode != "personal" or spec.client_test != "split"):
        raise ConfigError(
            f"dataset {spec.dataset!r} has no global test set here (its splits are pooled into the training pool), "
            f"but eval_mode = {spec.eval_mode!r} / client_test = {spec.client_test!r} read it; use "
            "eval_mode = 'personal' with client_test = 'split' and client_test_fraction > 0"
        )


def partition_clients(spec: RunSpec, arrays: DatasetArrays) -> list[np.ndarray]:
    if arrays.meta.task != "classification" and not PARTITIONERS.info(spec.partition).get("label_free"):
        raise ConfigError(
            f"partition {spec.partition!r} splits by class labels, but dataset {spec.dataset!r} is a {arrays.meta.task} "
            "task whose labels are masks; use partition 'natural' (one site per client) or 'iid'"
        )
    return make_partition(
        spec.partition,
        arrays.train_y,
        arrays.train_groups,
        spec.num_clients,
        numpy_rng(spec.seed, "partition"),
        dict(spec.partition_params),
    )


def client_test_sets(spec: RunSpec, arrays: DatasetArrays, train_parts: list[np.ndarray]) -> list[np.ndarray]:
    """Per-client test sets drawn from the global test set (``spec.client_test``), as indices into test_x/test_y:
    ``class_matched`` follows each client's training class counts (FedDr+ §2.3: sharding's ``rand_set_all`` with
    ``disjoint = true``, LDA's ``lda_test`` with ``disjoint = false``); ``natural`` gives each client the test
    samples of its natural group (site, hospital, domain)."""
    if spec.client_test == "natural":
        if arrays.train_groups is None or arrays.test_groups is None:
            raise ConfigError(
                f"client_test = 'natural' needs a dataset with natural groups in train and test; "
                f"{spec.dataset!r} has none"
            )
        return natural_test_sets(train_parts, arrays.train_groups, arrays.test_groups)
    if arrays.meta.task != "classification":
        raise ConfigError(
            f"client_test = 'class_matched' matches class labels, but dataset {spec.dataset!r} is a "
            f"{arrays.meta.task} task; use client_test 'natural' or 'split'"
        )
    return class_matched_test_sets(
        train_parts, arrays.train_y, arrays.test_y, numpy_rng(spec.seed, "client-test"), **spec.client_test_params
    )


def prepare_data(
    spec: RunSpec,
    device: torch.device,
    data_root: str | Path | None = None,
    verify: bool = True,
    arrays: ArraysCache | None = None,
) -> FederatedData:
    """Load (or synthesise) the data set (through ``arrays`` when given), partition the training pool, cut each
    client's test and validation splits, move everything to ``device``."""
    loaded = arrays.load(spec, data_root, verify) if arrays is not None else load_arrays(spec, data_root, verify)
    check_test_set(spec, loaded)
    parts = partition_clients(spec, loaded)
    client_train, client_test, client_val, train_parts = [], [], [], []
    for client, part in enumerate(parts):
        if spec.client_split == "class_ordered":
            train_part, test_part, val_part = class_ordered_split(
                part, loaded.train_y, spec.client_test_fraction, spec.client_val_fraction
            )
        elif spec.client_test_fraction > 0 or spec.client_val_fraction > 0:
            # test first, then validation, from one shuffle: adding a validation split keeps the test split
            shuffled = numpy_rng(spec.seed, "client-split", client).permutation(part)
            n_test = int(round(len(part) * spec.client_test_fraction))
            n_val = int(round(len(part) * spec.client_val_fraction))
            train_part, test_part = np.sort(shuffled[n_test + n_val :]), np.sort(shuffled[:n_test])
            val_part = np.sort(shuffled[n_test : n_test + n_val])
        else:
            train_part, test_part, val_part = part, part[:0], part[:0]
        train_parts.append(train_part)
        client_train.append(torch.from_numpy(train_part).to(device))
        client_test.append(torch.from_numpy(test_part).to(device))
        client_val.append(torch.from_numpy(val_part).to(device))
    if spec.client_test != "split":
        client_test = [torch.from_numpy(t).to(device) for t in client_test_sets(spec, loaded, train_parts)]
    info = dict(loaded.info)
    info["partition_fingerprint"] = partition_fingerprint(parts)
    info["client_sizes"] = [len(p) for p in parts]
    return FederatedData(
        TensorData.from_arrays(loaded, device),
        client_train,
        client_test,
        loaded.meta.num_classes,
        tuple(loaded.meta.input_shape),
        info,
        client_val,
        client_test_from_test=spec.client_test != "split",
    )
