"""Plug-ins written into a test's folder, and a fixture that leaves the registries as it found them.

``load_plugins`` changes process-wide state (the registries, ``sys.modules``, the record of loaded plug-ins): the
``fresh_plugins`` fixture forgets every plug-in a test loaded, so no name of one leaks into another test."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import fedbench.algorithms
import fedbench.data
import fedbench.models  # noqa: F401 (the catalogues: their registries exist before a test loads a plug-in)
from fedbench.plugins import loading
from fedbench.plugins.registry import Snapshot

# A FedProx variant with its own Params, under a new name: what a researcher writes in a file of their own.
METHOD = '''
"""GrowingProx: FedProx's proximal term (FedProx Eq. 2) with its own weight; {comment}"""
from pydantic import Field

from fedbench.algorithms import register_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.params import NoParams
{header}

class GrowingProxParams(NoParams):
    mu: float = Field(0.05, ge=0)


@register_algorithm("{name}")
class GrowingProx(Algorithm):
    Params = GrowingProxParams
    params: GrowingProxParams

    def loss(self, ctx, x, y, logits):
        term = proximal(ctx.model.parameters(), ctx.global_tensors)
        return super().loss(ctx, x, y, logits) + 0.5 * self.params.mu * term
'''

# The smallest recipe that trains the plug-in beside FedAvg (two runs of two rounds on scikit-learn's digits).
RECIPE = """
paper = "testpaper"
name = "plugged"
title = "A plug-in beside FedAvg"
seeds = [0]
{plugins}

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = {{ hidden = 16 }}
partition = "iid"
num_clients = 4
clients_per_round = 2
rounds = 2
batch_size = 64
optimizer = {{ lr = 0.1 }}

[matrix]
algorithm = ["fedavg", "{name}"]

[[tables]]
name = "acc"
title = "Best accuracy"
rows = ["algorithm"]
columns = []
figure = "best"
"""


def method_source(name: str = "growingprox", comment: str = "first version", header: str = "") -> str:
    return textwrap.dedent(METHOD).format(name=name, comment=comment, header=header).lstrip()


def write_method(folder: Path, file: str = "my_methods.py", **kwargs: str) -> Path:
    path = folder / file
    path.write_text(method_source(**kwargs))
    return path


def write_plugged_recipe(
    folder: Path, name: str = "growingprox", plugins: str = "", file: str = "plugged.toml"
) -> Path:
    path = folder / file
    path.write_text(textwrap.dedent(RECIPE).format(name=name, plugins=plugins))
    return path


def remember_plugins():
    """What is loaded now; calling the returned function forgets every plug-in loaded since (each name it
    registered: every registry as it was, and its modules), and the installed entry points are looked up again by
    the next ``load_plugins``."""
    loaded = dict(loading.LOADED)
    registries = Snapshot()
    entry_points_loaded = loading._entry_points_loaded

    def forget() -> None:
        for source, plugin in list(loading.LOADED.items()):
            if source not in loaded:
                for name in list(sys.modules):
                    if name == plugin.module or name.startswith(f"{plugin.module}."):
                        sys.modules.pop(name, None)
                del loading.LOADED[source]
        registries.restore()
        loading._entry_points_loaded = entry_points_loaded

    return forget


@pytest.fixture
def fresh_plugins():
    """Every plug-in a test loads is forgotten after the test (``remember_plugins``)."""
    forget = remember_plugins()
    yield
    forget()
