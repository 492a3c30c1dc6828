"""FedNova (Wang et al., NeurIPS 2020): normalised averaging.

Client i took τ_i local steps; its update is normalised by a_i, the ℓ1 norm of its step-weight vector
(FedNova Eq. 6–7, the momentum case of App. "FedNova with momentum"):

    a_i = (τ_i − ρ(1 − ρ^{τ_i})/(1 − ρ)) / (1 − ρ)      (a_i = τ_i for ρ = 0),
    d_i = (w^t − w_i) / a_i,
    w^{t+1} = w^t − τ_eff · Σ_i p_i d_i,    τ_eff = Σ_i p_i a_i,   p_i = n_i / Σ_{j∈S} n_j.

ρ is the client SGD momentum (0 for Adam). FedImpro [code] applies the same rule to every state_dict
entry, BatchNorm running statistics included: ``normalize_buffers = true`` (default); false averages them.
With equal τ_i every a_i is equal, so FedNova reduces to FedAvg: there it returns FedAvg's average itself, bit for
bit (the engine contract's FedAvg setting).
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.params import FedNovaParams


def normalizing_factor(steps: int, momentum: float) -> float:
    """a_i = Σ_{k=1..τ} Σ_{j<k} ρ^j, the ℓ1 norm of the heavy-ball step weights: how far τ steps move
    along a constant gradient, in units of the lr (τ without momentum). SCAFFOLD's K_eff is the same."""
    if momentum == 0:
        return float(steps)
    return (steps - momentum * (1 - momentum**steps) / (1 - momentum)) / (1 - momentum)


class FedNova(Algorithm):
    Params = FedNovaParams
    params: FedNovaParams

    def end_local(self, ctx, update):
        opt = ctx.spec.optimizer
        update.extra["a"] = normalizing_factor(update.num_steps, opt.momentum if opt.name == "sgd" else 0.0)

    def aggregate(self, server, updates, round_index):
        p = self.aggregation_weights(updates)
        a = torch.tensor([u.extra["a"] for u in updates], dtype=torch.float64)
        if len(set(a.tolist())) == 1:
            # every a_i = a: τ_eff = a and w − a Σ p_i (w − w_i)/a = Σ p_i w_i, FedAvg's average (and the same for the
            # buffers), taken as FedAvg computes it: the algebraically equal form rounds otherwise, and in float32
            # the rounding compounds into another curve than FedAvg's
            super().aggregate(server, updates, round_index)
            return
        tau_eff = float((p * a).sum())
        # w^{t+1} = w^t − τ_eff Σ p_i (w^t − w_i)/a_i
        normalized = [_normalized(server.params - u.params, a_i) for u, a_i in zip(updates, a.tolist())]
        server.params = server.params - tau_eff * weighted_average(normalized, p)
        if not self.params.normalize_buffers:
            server.buffers = average_buffers(updates, p)
            return
        buffers = {}
        for name, current in server.buffers.items():
            if current.is_floating_point():
                steps = [_normalized(current - u.buffers[name], a_i) for u, a_i in zip(updates, a.tolist())]
                buffers[name] = current - tau_eff * weighted_average(steps, p)
            else:
                buffers[name] = updates[0].buffers[name].clone()
        server.buffers = buffers


def _normalized(change: torch.Tensor, a_i: float) -> torch.Tensor:
    """d_i = change / a_i; a client that took no step (no training sample: τ_i = 0, so a_i = 0) did not move, and its
    d_i is 0, not 0/0 (its p_i is 0 too, but 0 · NaN would still poison the average)."""
    return change / a_i if a_i > 0 else torch.zeros_like(change)
