"""What a loader returns (``fedbench/data/base.py``): the static metadata every registered data set declares is
consistent with itself, since the engine normalises each channel by it and sizes the model's output from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fedbench.data import DATASETS, dataset_meta
from fedbench.data.base import DatasetMeta
from fedbench.recipes.extends import read_recipe_table

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
PAPERS = {read_recipe_table(path)["paper"] for path in RECIPES.glob("*.toml")}  # quickstart among them


@pytest.mark.parametrize("name", DATASETS.names())
def test_every_registered_data_set_declares_consistent_metadata(name):
    meta = dataset_meta(name)
    assert meta.name == name
    assert meta.num_classes >= 2  # a segmentation mask's classes count the background too
    assert meta.task in ("classification", "segmentation")
    channels, height, _ = meta.input_shape
    # images are normalised per channel, signals (C, 1, T) are standardised by their loader instead
    expected = () if height == 1 else (channels,)
    assert (len(meta.mean),) * bool(meta.mean) == expected == (len(meta.std),) * bool(meta.std)
    assert all(0.0 <= m <= 1.0 for m in meta.mean) and all(s > 0 for s in meta.std)  # of images scaled to [0, 1]
    assert meta.used_by and set(meta.used_by) <= PAPERS | {"your data"}  # the loaders of a team's own data


def test_the_metadata_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        dataset_meta("digits").num_classes = 3  # type: ignore[misc]
    assert dataclasses.is_dataclass(DatasetMeta)
