"""FedDC (Gao et al., CVPR 2022, "FedDC: Federated Learning with Non-IID Data via Local Drift Decoupling and
Correction").

Client i keeps a local drift h_i and a gradient estimate g_i (``ctx.state``, both 0 at first); the server keeps the
global estimate g (``server.state["control"]``). Local training minimises (FedDC Eq. 8)

    F_i(θ) = L_i(θ) + (α_i/2)·‖θ + h_i − w‖² + ⟨θ, g/ω_i − g_i⟩,

the penalty R of Eq. 6 and the gradient correction G of Eq. 7, whose gradients α_i(θ + h_i − w) + g/ω_i − g_i are
added to the task gradient before each optimizer step. After K local steps at learning rate η the client updates
(Eq. 9, Alg. 1 lines 9–10; the estimate in gradient units as the authors' code keeps it)

    h_i ← h_i + (θ_i⁺ − w),        g_i⁺ = g_i − g/ω_i + (w − θ_i⁺)/(K·η),

and the server (Alg. 1 lines 13–15) takes the drift-corrected average and updates g:

    w ← Σ_{i∈S} p_i θ_i⁺ + (1/N)·Σ_{i=1..N} h_i,       g ← g + (1/N)·Σ_{i∈S} ω_i·(g_i⁺ − g_i).

ω_i = n_i / (|D|/N) is the client's data size relative to the mean, and α_i = α/ω_i [code] (FedDC's ``weight_list``
and ``alpha_coef / weight_list``); Σ_{i=1..N} h_i runs over every client, those not yet sampled holding h_i = 0
[code]: the server keeps the sum, updated by the sampled clients' changes of h_i. p_i are the engine's sample
weights, where the authors' code takes the plain mean over the sampled clients (equal for equal n_i) [proposal].
α = 0.01 is the authors' code's ``alpha_coef`` for CIFAR-10 [code].
"""

import torch

from fedbench.algorithms.base import Algorithm, average_buffers, weighted_average
from fedbench.algorithms.context import param_views
from fedbench.algorithms.params import FedDCParams


def relative_size(ctx) -> float:
    """ω_i = n_i / (|D|/N): the client's share of the data relative to the mean client's (FedDC's ``weight_list``)."""
    return ctx.num_samples * ctx.spec.num_clients / ctx.data.train_x.shape[0]


class FedDC(Algorithm):
    """FedDC (Gao et al., CVPR 2022): local drift decoupling and gradient correction."""

    Params = FedDCParams
    params: FedDCParams

    def init_server(self, server):
        server.state["control"] = torch.zeros_like(server.params)  # g
        server.state["drift_sum"] = torch.zeros_like(server.params)  # Σ_i h_i over all N clients

    def payload(self, server, round_index):
        return {"control": server.state["control"]}

    def local_terms(self, ctx) -> dict[str, torch.Tensor]:
        """h_i, g/ω_i − g_i and α_i of this round (creating the client's state on its first round)."""
        drift = ctx.state.setdefault("drift", torch.zeros_like(ctx.global_params))
        control = ctx.state.setdefault("control", torch.zeros_like(ctx.global_params))
        omega = relative_size(ctx)
        if omega == 0:  # a client without samples takes no step: its terms are never used
            return {"drift": drift, "correction": torch.zeros_like(drift), "alpha": drift.new_zeros(())}
        alpha = torch.tensor(self.params.alpha / omega, dtype=drift.dtype, device=drift.device)
        return {"drift": drift, "correction": ctx.payload["control"] / omega - control, "alpha": alpha}

    def begin_local(self, ctx):
        terms = self.local_terms(ctx)
        ctx.scratch["alpha"] = float(terms["alpha"])
        ctx.scratch["drift"] = param_views(terms["drift"], ctx.model)
        ctx.scratch["correction"] = param_views(terms["correction"], ctx.model)

    @torch.no_grad()
    def adjust_gradients(self, ctx):
        alpha = ctx.scratch["alpha"]
        for theta, w, h, c in zip(
            ctx.model.parameters(), ctx.global_tensors, ctx.scratch["drift"], ctx.scratch["correction"]
        ):
            if theta.grad is not None:
                theta.grad.add_(theta - w + h, alpha=alpha).add_(c)  # ∇R + ∇G (Eqs. 6–7)

    packed_step = True

    def packed_inputs(self, ctx):
        return {"global": ctx.global_params, **self.local_terms(ctx)}

    def packed_adjust_gradients(self, inputs, params, grad):
        return grad + inputs["alpha"] * (params - inputs["global"] + inputs["drift"]) + inputs["correction"]

    def end_local(self, ctx, update):
        change = update.params - ctx.global_params  # θ_i⁺ − w
        drift, control = ctx.state["drift"], ctx.state["control"]
        if update.num_steps == 0:  # learned nothing: h_i and g_i stay, and the server's sums change by 0
            update.extra["drift_change"] = torch.zeros_like(drift)
            update.extra["control_change"] = torch.zeros_like(control)
            return
        omega = relative_size(ctx)
        new_control = control - ctx.payload["control"] / omega - change / (update.num_steps * ctx.lr)  # Eq. 9
        update.extra["drift_change"] = change
        update.extra["control_change"] = omega * (new_control - control)
        ctx.state["drift"] = drift + change  # h_i ← h_i + (θ_i⁺ − w)
        ctx.state["control"] = new_control

    def aggregate(self, server, updates, round_index):
        assert self.spec is not None  # bound by bind_model before any server hook
        weights = self.aggregation_weights(updates)
        n = self.spec.num_clients
        server.state["drift_sum"] = server.state["drift_sum"] + sum(u.extra["drift_change"] for u in updates)
        server.state["control"] = server.state["control"] + sum(u.extra["control_change"] for u in updates) / n
        # Alg. 1 line 15: the average of the sampled models, corrected by the mean drift of all clients
        server.params = weighted_average([u.params for u in updates], weights) + server.state["drift_sum"] / n
        server.buffers = average_buffers(updates, weights)

    def extra_upload_floats(self, model_params):
        return 2 * model_params  # the changes of h_i and of g_i

    def extra_download_floats(self, model_params):
        return model_params  # g

    def attach_flops_per_round(self, *, steps, num_params, **_):
        return 4.0 * steps * num_params  # θ − w + h, its scaled add, the correction's add per step
