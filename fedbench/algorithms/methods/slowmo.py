"""SlowMo (Wang et al., ICLR 2020): slow momentum on the server.

After the clients' base optimizer (plain SGD, lr γ_t) the server averages, then takes a slow-momentum
step (SlowMo Alg. 1 lines 6–7):

    u^{t+1} = β·u^t + (w^t − w̄^{t+1}) / γ_t,      w^{t+1} = w^t − α·γ_t·u^{t+1},

with w̄ the sample-weighted average of the client models, u^0 = 0 (``server.state``), γ_t the round's
client lr. FedTrip [code ``examples/server_momentum``]: β = 0.9, slow lr α = 1, the first round a plain
average — which this rule gives for α = 1 since u^0 = 0. β = 0 and α = 1 is FedAvg: there the new weights are the
average itself, bit for bit (the engine contract's FedAvg setting).
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.params import SlowMoParams


class SlowMo(Algorithm):
    Params = SlowMoParams
    params: SlowMoParams

    def init_server(self, server):
        server.state["momentum"] = torch.zeros_like(server.params)  # u^0 = 0

    def aggregate(self, server, updates, round_index):
        weights = self.aggregation_weights(updates)
        averaged = weighted_average([u.params for u in updates], weights)
        assert self.spec is not None  # bound by bind_model before any server hook
        client_lr = self.spec.optimizer.lr * self.spec.lr_schedule.factor(round_index)  # γ_t
        # Alg. 1 line 6: u ← β u + (w^t − w̄)/γ_t
        momentum = self.params.beta * server.state["momentum"] + (server.params - averaged) / client_lr
        server.state["momentum"] = momentum
        if self.params.beta == 0 and self.params.slow_lr == 1:
            # β = 0, α = 1: line 7 is w^t − γ_t (w^t − w̄)/γ_t = w̄, FedAvg's average, taken as it is: the algebraically
            # equal form rounds otherwise, and in float32 the rounding compounds into another curve than FedAvg's
            server.params = averaged
        else:
            # line 7: w^{t+1} = w^t − α γ_t u
            server.params = server.params - self.params.slow_lr * client_lr * momentum
        server.buffers = average_buffers(updates, weights)
