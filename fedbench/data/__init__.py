"""Datasets (one loader per family), partitioners, synthetic stand-ins and the tensor data store.

A loader is registered with its static metadata and has the signature
``loader(root: pathlib.Path, **dataset_params) -> DatasetArrays`` where ``root`` is
``<data root>/<dataset name>/``. Loaders raise ``DataError`` naming the missing files and how to get them.

The registry lives in ``_registry.py``; importing this package imports every loader and the partitioners, so each
registers itself. A plug-in from outside fedbench registers its loader with ``register_dataset`` and its
partitioner with ``register_partitioner``, both imported from here (``fedbench.plugins``).
"""

from fedbench.data import (  # noqa: F401  (imported to register)
    arrayfile,
    bci,
    camelyon17,
    cifar,
    covid,
    digits,
    fedbn,
    femnist,
    hfdisk,
    imagefolder,
    medmnist,
    mnist,
    pamap2,
    partition,
    retinal,
    svhn,
)
from fedbench.data._registry import (
    DATASETS,
    LOADER_ARGUMENTS,
    data_root,
    dataset_meta,
    dataset_params,
    load_dataset,
    register_dataset,
    static_input_shape,
)
from fedbench.data.partition import PARTITIONERS, register_partitioner
from fedbench.plugins import register_catalogue

# every built-in registered: a plug-in that fails to load leaves them (plugins/registry.py)
register_catalogue(DATASETS, PARTITIONERS)

__all__ = [
    "DATASETS",
    "LOADER_ARGUMENTS",
    "PARTITIONERS",
    "data_root",
    "dataset_meta",
    "dataset_params",
    "load_dataset",
    "register_dataset",
    "register_partitioner",
    "static_input_shape",
]
