"""FedExP (Jhunjhunwala et al., ICLR 2023): server step size by extrapolation.

With client updates Δ_i = w_i − w^t and their average Δ̄ = Σ p_i Δ_i (FedExP Alg. 1, Eq. 9):

    η_g = max{ 1, Σ_i p_i ‖Δ_i‖² / (2 (‖Δ̄‖² + ε)) },      w^{t+1} = w^t + η_g · Δ̄.

The paper's weights are p_i = 1/M over the M participating clients; here p_i are the engine's sample
weights (FedDr+: weighted averaging for every method), equal to 1/M when the n_i are equal. The step is
kept in ``server.state["server_lr"]``. ε = 0.001 (FedDr+ spec).

``variant = "feddrplus_code"`` reproduces FedDr+'s [code], which never extrapolates:
η_g = min{1, 0.5 · mean_i ‖Δ_i‖ / (‖Δ̄‖ + N·ε)} (norms not squared, min not max, N all clients) —
probably why FedExP ≈ FedAvg in FedDr+ Table 2. The default is the original rule [paper].
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.params import FedExPParams


class FedExP(Algorithm):
    Params = FedExPParams
    params: FedExPParams

    def init_server(self, server):
        server.state["server_lr"] = torch.ones((), dtype=torch.float64)

    def aggregate(self, server, updates, round_index):
        p = self.aggregation_weights(updates)
        deltas = [u.params - server.params for u in updates]
        mean_delta = weighted_average(deltas, p)
        norms = torch.stack([d.double().norm() for d in deltas]).cpu()
        mean_norm = mean_delta.double().norm().cpu()
        eps = self.params.epsilon
        if self.params.variant == "original":
            # Eq. 9: η_g = max(1, Σ p_i‖Δ_i‖² / (2(‖Δ̄‖² + ε)))
            eta_g = torch.clamp((p * norms**2).sum() / (2 * (mean_norm**2 + eps)), min=1.0)
        else:
            assert self.spec is not None  # bound by bind_model before any server hook
            eta_g = torch.clamp(0.5 * norms.mean() / (mean_norm + self.spec.num_clients * eps), max=1.0)
        server.state["server_lr"] = eta_g
        server.params = server.params + float(eta_g) * mean_delta
        server.buffers = average_buffers(updates, p)
