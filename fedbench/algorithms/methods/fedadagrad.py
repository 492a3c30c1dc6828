"""FedAdagrad (Reddi et al., ICLR 2021, "Adaptive Federated Optimization", Alg. 2): an adaptive server step.

With Δ^t = w̄^{t+1} − w^t, the sample-weighted average client change (minus the pseudo-gradient), Alg. 2 keeps

    m^t = β1·m^{t−1} + (1 − β1)·Δ^t,
    v^t = v^{t−1} + (Δ^t)²                      (FedAdagrad; FedAdam and FedYogi override only this line),
    w^{t+1} = w^t + η·m^t / (√v^t + τ),

element-wise, with m^{−1} = 0 and v^{−1} = τ² (Alg. 2 asks v^{−1} ≥ τ²), no bias correction (Alg. 2 has none).
Defaults: β1 = 0.9 and τ = 1e-3 (Sec. 5) [paper]; η is tuned per task in the paper (App. D's grids), 0.01 here
[proposal]; floating-point buffers are averaged as FedAvg does [proposal].

This family never reduces to FedAvg: the step divides by √v + τ element-wise, so for no β1, τ or η is w^{t+1} the
average w̄ (as τ → ∞ with η/τ = 1 it tends to it), and no ``fedavg_setting`` is declared.
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.params import FedAdagradParams


class FedAdagrad(Algorithm):
    """FedAdagrad (Reddi et al., ICLR 2021): Adagrad on the server, the mean client change as pseudo-gradient."""

    Params = FedAdagradParams
    params: FedAdagradParams

    packed_step = True  # the local step is FedAvg's; only the server differs

    def init_server(self, server):
        server.state["first_moment"] = torch.zeros_like(server.params)  # m^{−1} = 0
        server.state["second_moment"] = torch.full_like(server.params, self.params.tau**2)  # v^{−1} = τ²

    def second_moment(self, v: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """Alg. 2, FedAdagrad: v^t = v^{t−1} + Δ²."""
        return v + delta**2

    def aggregate(self, server, updates, round_index):
        weights = self.aggregation_weights(updates)
        delta = weighted_average([u.params for u in updates], weights) - server.params  # Δ^t
        m = self.params.beta1 * server.state["first_moment"] + (1 - self.params.beta1) * delta
        v = self.second_moment(server.state["second_moment"], delta)
        server.state["first_moment"], server.state["second_moment"] = m, v
        server.params = server.params + self.params.server_lr * m / (v.sqrt() + self.params.tau)
        server.buffers = average_buffers(updates, weights)
