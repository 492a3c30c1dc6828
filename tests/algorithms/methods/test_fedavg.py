"""FedAvg (McMahan et al., 2017; the base class as it is): the server's sample-weighted average, by hand in float64."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm


# ------------------------------------------------------------------------------------------- FedAvg (the base class)
@pytest.mark.usefixtures("float64")
def test_fedavg_aggregation_by_hand():
    """FedAvg: w ← Σ_k (n_k/Σn)·w_k; floating buffers (BN statistics) with the same weights; integer buffers
    (num_batches_tracked) are the first client's."""
    from fedbench.algorithms.base import ClientUpdate
    from fedbench.algorithms.context import ServerState

    algorithm = build_algorithm("fedavg", {})
    server = ServerState(torch.zeros(3), {})
    sizes = (1, 3, 6)
    updates = [
        ClientUpdate(
            k,
            torch.tensor([1.0, -2.0, 0.5]) * (k + 1),
            {"bn.running_mean": torch.tensor([k, 2.0 * k]), "bn.num_batches_tracked": torch.tensor(4 + k)},
            n,
            1,
            0.0,
        )
        for k, n in enumerate(sizes)
    ]
    algorithm.aggregate(server, updates, 1)
    p = [0.1, 0.3, 0.6]
    assert torch.allclose(
        server.params, torch.tensor([1.0, -2.0, 0.5]) * (0.1 * 1 + 0.3 * 2 + 0.6 * 3), rtol=0, atol=F64_ATOL
    )
    assert torch.allclose(
        server.buffers["bn.running_mean"], torch.tensor([p[1] + 2 * p[2], 2 * p[1] + 4 * p[2]]), rtol=0, atol=F64_ATOL
    )
    assert (
        server.buffers["bn.num_batches_tracked"].dtype == torch.int64
        and int(server.buffers["bn.num_batches_tracked"]) == 4
    )
