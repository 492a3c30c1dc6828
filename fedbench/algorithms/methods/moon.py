"""MOON (Li, He & Song, CVPR 2021): model-contrastive federated learning.

Local loss per batch (MOON Eq. 3–4): ℓ = CE + μ·ℓ_con with

    ℓ_con = −log( exp(sim(z, z_glob)/τ) / (exp(sim(z, z_glob)/τ) + exp(sim(z, z_prev)/τ)) ),

z = the representation of the local model, z_glob that of the round's global model (the positive) and
z_prev that of the client's previous local model (the one negative, p = 1); sim is the cosine.

Spec choices:
- z is the model's ``features`` (the penultimate representation the model registry names). The MOON paper
  adds a projection head; FedTR's spec calls it optional and the FedTrip [code] uses none.
- A client's previous local model persists in ``ctx.state``; before its first participation it is the
  initial global model w^0 (MOON [code] ``old_nets`` start as copies of the initial net; FedTrip [proposal]).
- Hyperparameters: FedTrip μ = 1, τ = 0.5 [paper]; FedTR [proposal] μ = 5, τ = 0.5. Recipes set μ.
- ``representation = "pre_activation"`` takes z before the encoder's final activation, as FedTrip's code
  does (spec §3: the output of Linear(120→84) for the CNN, Linear(784→100) for the MLP).
"""

import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.functional import masked_cross_entropy, masked_mean
from fedbench.algorithms.params import MoonParams
from fedbench.algorithms.partial import initial_model_payload, remember_initial_model
from fedbench.errors import ConfigError


def activation_cut(model) -> int:
    """Index of the encoder's final activation (trailing dropout allowed after it)."""
    encoder = getattr(model, "encoder", None)
    if isinstance(encoder, torch.nn.Sequential):
        for index in range(len(encoder) - 1, -1, -1):
            if isinstance(encoder[index], (torch.nn.ReLU, torch.nn.ReLU6)):
                return index
            if not isinstance(encoder[index], (torch.nn.Dropout, torch.nn.Identity)):
                break
    raise ConfigError(
        f"moon: model {type(model).__name__} has no final activation to cut before; "
        "use algorithm_params.representation = 'features'"
    )


def pre_activation(model, x):
    """The encoder's output before its final activation (FedTrip's MOON representation)."""
    return model.encoder[: activation_cut(model)](x)


class Moon(Algorithm):
    Params = MoonParams
    params: MoonParams

    def init_server(self, server):
        remember_initial_model(server)  # w^0, the previous model of a first-time client

    def payload(self, server, round_index):
        return initial_model_payload(server)

    def begin_local(self, ctx):
        params = ctx.state.get("previous_params", ctx.payload["initial_params"])
        buffers = ctx.state.get("previous_buffers", ctx.payload["initial_buffers"])
        ctx.scratch["previous"] = ctx.frozen_model("moon_previous", params, buffers)

    def forward(self, ctx, x):
        if self.params.representation == "features":
            return super().forward(ctx, x)
        ctx.scratch["representation"] = pre_activation(ctx.model, x)
        ctx.scratch["features"] = ctx.model.encoder[activation_cut(ctx.model) :](ctx.scratch["representation"])
        return ctx.model.head(ctx.scratch["features"])

    def loss(self, ctx, x, y, logits):
        if self.params.representation == "features":
            z = ctx.scratch["features"].flatten(1)
            teacher_features = self.teacher_outputs(ctx, x)[1]
            assert teacher_features is not None  # the global model is ctx.model's architecture, which has features
            z_glob = teacher_features.flatten(1)
            with torch.no_grad():
                z_prev = ctx.scratch["previous"].features(x).flatten(1)
        else:
            z = ctx.scratch["representation"].flatten(1)
            teacher = ctx.scratch.setdefault("teacher", ctx.global_model())
            with torch.no_grad():
                z_glob = pre_activation(teacher, x).flatten(1)
                z_prev = pre_activation(ctx.scratch["previous"], x).flatten(1)
        positive = F.cosine_similarity(z, z_glob, dim=1) / self.params.tau
        negative = F.cosine_similarity(z, z_prev, dim=1) / self.params.tau
        # −log(e^pos / (e^pos + e^neg)) = CE over the logits [pos, neg] with label 0
        contrastive = F.cross_entropy(torch.stack([positive, negative], dim=1), torch.zeros_like(y))
        return super().loss(ctx, x, y, logits) + self.params.mu * contrastive

    packed_step = True

    def packed_inputs(self, ctx):
        # the previous local model as ``begin_local`` takes it (w^0 before a client's first participation)
        return {
            "previous": ctx.state.get("previous_params", ctx.payload["initial_params"]),
            "global": ctx.global_params,
        }

    def packed_objective(self, call, params, inputs, x, y, mask):
        z, logits = call(self._representation_and_logits, params, x)
        with torch.no_grad():
            z_glob = call(self._representation, inputs["global"], x)
            z_prev = call(self._representation, inputs["previous"], x)
        positive = F.cosine_similarity(z, z_glob, dim=1) / self.params.tau
        negative = F.cosine_similarity(z, z_prev, dim=1) / self.params.tau
        contrastive = F.cross_entropy(torch.stack([positive, negative], dim=1), torch.zeros_like(y), reduction="none")
        return masked_cross_entropy(logits, y, mask) + self.params.mu * masked_mean(contrastive, mask)

    def _representation(self, model, x):
        """z of ``loss``: the features, or the encoder's output before its final activation."""
        if self.params.representation == "features":
            return model.features(x).flatten(1)
        return pre_activation(model, x).flatten(1)

    def _representation_and_logits(self, model, x):
        if self.params.representation == "features":
            features = model.features(x)
            return features.flatten(1), model.head(features)
        representation = pre_activation(model, x)
        features = model.encoder[activation_cut(model) :](representation)
        return representation.flatten(1), model.head(features)

    def end_local(self, ctx, update):
        ctx.state["previous_params"] = update.params
        ctx.state["previous_buffers"] = update.buffers

    def attach_flops_per_round(self, *, steps, batch_size, forward_flops, **_):
        # FedTrip Table VIII: K·M·(1+p)·FP — forward passes of the global and the p = 1 previous model
        return float(steps * batch_size * 2 * forward_flops)
