"""FedAvgM (Hsu, Qi and Brown, 2019, "Measuring the effects of non-identical data distribution"): server momentum.

The server treats the round's averaged client change as a pseudo-gradient and takes a momentum step on it
(Hsu et al. Sec. 3; Reddi et al. ICLR 2021 Alg. 1 with SGD-with-momentum as the server optimizer):

    Δ^t = w̄^{t+1} − w^t   (w̄ the sample-weighted average of the client models),
    v^{t+1} = β·v^t − Δ^t,        w^{t+1} = w^t − η·v^{t+1},

with v^0 = 0 (``server.state``). Defaults: β = 0.9, the momentum the paper's sweeps favour, and η = 1, the
paper's (it writes w ← w − v) [paper]; floating-point buffers are averaged as FedAvg does [proposal].
β = 0 and η = 1 is FedAvg: there the new weights are the average itself, bit for bit (its FedAvg setting).
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.params import FedAvgMParams


class FedAvgM(Algorithm):
    """FedAvgM (Hsu et al., 2019): server momentum on the averaged client change."""

    Params = FedAvgMParams
    params: FedAvgMParams

    packed_step = True  # the local step is FedAvg's; only the server differs

    def init_server(self, server):
        server.state["momentum"] = torch.zeros_like(server.params)  # v^0 = 0

    def aggregate(self, server, updates, round_index):
        weights = self.aggregation_weights(updates)
        averaged = weighted_average([u.params for u in updates], weights)
        # v ← β v + (w^t − w̄): the pseudo-gradient is minus the average client change
        momentum = self.params.beta * server.state["momentum"] + (server.params - averaged)
        server.state["momentum"] = momentum
        if self.params.beta == 0 and self.params.server_lr == 1:
            # w^t − (w^t − w̄) = w̄: FedAvg's average taken as it is (the written-out form rounds in float32)
            server.params = averaged
        else:
            server.params = server.params - self.params.server_lr * momentum
        server.buffers = average_buffers(updates, weights)
