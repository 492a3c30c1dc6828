"""FedProx (Li et al., 2020): local objective F_k(w) + (mu/2)·||w − w_global||² (FedProx Eq. 2)."""

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.params import FedProxParams


class FedProx(Algorithm):
    Params = FedProxParams
    params: FedProxParams

    def loss(self, ctx, x, y, logits):
        # The proximal term keeps the local model near the round's global model w^t.
        term = proximal(ctx.model.parameters(), ctx.global_tensors)
        return super().loss(ctx, x, y, logits) + 0.5 * self.params.mu * term

    packed_step = True

    def packed_inputs(self, ctx):
        return {"global": ctx.global_params}

    def packed_objective(self, call, params, inputs, x, y, mask):
        term = proximal([params], [inputs["global"]])  # Eq. 2 over the flat vector
        return super().packed_objective(call, params, inputs, x, y, mask) + 0.5 * self.params.mu * term

    def attach_flops_per_round(self, *, steps, num_params, **_):
        return 2.0 * steps * num_params  # FedTrip Table VIII: 2K|w| (w − w_g, then the scaled add)
