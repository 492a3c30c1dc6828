"""The ``feature_snapshot`` diagnostic (``fedbench/vocab/diagnostics.py``): the features ``FedModel.features(x)`` of a
fixed sample of test points, of the round's global model and of one client's local model, stored compactly for a
projection (FedTrip Fig. 2's t-SNE, ``fedbench/report/diagnostics/projection_plots.py``).

- **The sample**: the first ``n`` test points of one permutation of the test set drawn from the stream
  ``(seed, "feature_snapshot")`` (``fedbench.seeding``), which no training or evaluation step draws from. It depends on
  the seed and the test set only, so it is the same every round and for every method of a table; ``n`` is
  ``SAMPLE_SIZE`` or fewer (a smaller test set, or features too wide for ``MAX_VALUES``: a prefix of the same
  permutation, so a narrower model's sample contains a wider one's).
- **The models**: the global model after the round's aggregation (θ̄, with the global buffers) and the weights
  ``SNAPSHOT_CLIENT`` uploaded in the round (its locally trained model, with its own buffers where it sends them),
  when it trained in that round; when it did not, ``local`` is null and ``note`` says so. Both are loaded into one
  spare frozen model of the run (``SpareModels``, slot ``SLOT``): no copy per client, and the working model, the server
  and every client state are only read, so recording it never changes training.
- **The layout**: each model's features as float16 little-endian bytes (``n × d``, row-major), base64-encoded, with
  the shape, the dtype, the test indices of the points and their labels. Bounded: at most ``MAX_VALUES`` float16
  values per model, i.e. ≤ 512 KiB of raw bytes (≈ 683 KiB of base64) per model and ≤ 1.4 MB per diagnosed round; the
  84-d features of FedTrip's CNN take 84,000 bytes (112,000 base64 characters) per model.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import cast

import numpy as np
import torch

from fedbench.algorithms.context import ClientUpdate, ServerState
from fedbench.engine.diagnostics.base import Aggregated
from fedbench.engine.state import RunState
from fedbench.errors import ConfigError
from fedbench.models.base import FedModel
from fedbench.seeding import numpy_rng
from fedbench.vocab.diagnostics import FEATURE_SNAPSHOT, FeatureSnapshotValue

NAME = FEATURE_SNAPSHOT
# Test points per snapshot: enough to see the clusters of FedTrip Fig. 2's 10 classes (≈ 50 points each) without
# storing the whole test set; t-SNE of 500 points takes ~5 s on one core of a busy 2-core machine.
SAMPLE_SIZE = 500
# float16 values stored per model at most (500 points of 512-d features, ResNet-18's width): wider features keep
# fewer points, so one snapshot stays under 512 KiB of raw bytes whatever the model.
MAX_VALUES = 500 * 512
SNAPSHOT_CLIENT = 0  # the client whose local model is recorded: "client 1" of FedTrip Fig. 2 (the paper counts from 1)
# the sample's random stream (``fedbench.seeding``), keyed by the diagnostic's name: its own purpose, drawn once
STREAM = FEATURE_SNAPSHOT
SLOT = FEATURE_SNAPSHOT  # the spare model the snapshots are computed with (``SpareModels``)
DTYPE = "float16"  # stored little-endian ("<f2")


def sample_order(seed: int, num_test: int) -> np.ndarray:
    """The permutation of the test set whose first points a snapshot records: the same for every round and method."""
    return numpy_rng(seed, STREAM).permutation(num_test)


def encode(features: torch.Tensor) -> str:
    """float16 little-endian bytes of ``features`` (row-major), base64-encoded."""
    return base64.b64encode(features.detach().cpu().numpy().astype("<f2").tobytes()).decode("ascii")


@torch.no_grad()
def _features(state: RunState, params: torch.Tensor, buffers: dict[str, torch.Tensor], x: torch.Tensor):
    model = cast(
        FedModel, state.spare_models.load(SLOT, params, buffers)
    )  # frozen, eval mode: no dropout, no BN update
    return model.features(x).flatten(1).float()


def feature_snapshot(state: RunState, server: ServerState, updates: Sequence[ClientUpdate]) -> FeatureSnapshotValue:
    """The ``feature_snapshot`` value of an aggregated round (module docstring: sample, models, layout)."""
    tensors = state.data.tensors
    order = sample_order(state.spec.seed, len(tensors.test_y))[:SAMPLE_SIZE]
    index = torch.as_tensor(order, device=tensors.test_x.device)
    x = tensors.test_x[index]
    global_features = _features(state, server.params, server.buffers, x)
    n = min(len(order), MAX_VALUES // max(1, global_features.shape[1]))
    if n == 0:
        raise ConfigError(
            f"diagnostic {NAME!r}: {state.spec.model}'s features have {global_features.shape[1]} values per point, "
            f"more than the {MAX_VALUES} a snapshot stores"
        )
    value: FeatureSnapshotValue = {
        "points": order[:n].tolist(),
        "labels": tensors.test_y[index[:n]].tolist(),
        "shape": [n, int(global_features.shape[1])],
        "dtype": DTYPE,
        "global": encode(global_features[:n]),
        "client": SNAPSHOT_CLIENT,
        "local": None,
    }
    update = next((u for u in updates if u.client_id == SNAPSHOT_CLIENT), None)
    if update is None:
        value["note"] = f"client {SNAPSHOT_CLIENT} did not train in this round"
    else:  # its own buffers where it uploads them (BatchNorm statistics), the global ones otherwise
        value["local"] = encode(_features(state, update.params, {**server.buffers, **update.buffers}, x[:n]))
    return value


def snapshot_of(aggregated: Aggregated) -> FeatureSnapshotValue:
    """The ``feature_snapshot`` producer: the round's global model and client 0's upload on the fixed sample."""
    return feature_snapshot(aggregated.state, aggregated.server, aggregated.updates)


__all__ = [
    "DTYPE",
    "MAX_VALUES",
    "NAME",
    "SAMPLE_SIZE",
    "SNAPSHOT_CLIENT",
    "encode",
    "feature_snapshot",
    "sample_order",
    "snapshot_of",
]
