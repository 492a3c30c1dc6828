"""FedProto (Tan et al., AAAI 2022): clients exchange class prototypes, never model weights.

Every client keeps its whole model (it starts as the common w^0, the server's model, which is never averaged). With f_i the client's feature extractor:
  local prototype   C_i^(j) = 1/|D_i,j| Σ_{(x,y)∈D_i,j} f_i(x)                       (Eq. 4, after local training)
  global prototype  C̄^(j) = Σ_i |D_i,j| C_i^(j) / Σ_i |D_i,j|                          (Eq. 6, clients holding j)
  local loss        L = CE(F_i(x), y) + λ · ‖f_i(x) − C̄^(y)‖²                          (Eq. 8)
The distance is the mean squared error over the batch and the feature dimensions, a sample whose class has no global
prototype yet contributing 0, as the authors' code computes it (``nn.MSELoss`` on a target that is the sample's own
feature where no prototype exists) [code]; λ = 1 is that code's default (``ld``) [code].
Local prototypes are computed after the round's training on the client's whole training split, in eval mode and
without augmentation (Eq. 4 with the trained f_i) [paper]; a class no client of the round holds keeps its
previous global prototype [proposal: the paper has every client in every round].

Inference (§ "Inference" of the paper): a sample is assigned the class of the nearest global prototype in the
client's feature space, ``eval_model`` returning −‖f_i(x) − C̄^(j)‖² as the logits [paper]. The server's model is
never averaged: it stays w^0, so FedProto's global evaluation means nothing (evaluate it with ``eval_mode =
"personal"``). No packed path: every client trains its own model.
"""

from __future__ import annotations

import torch
from torch import nn

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.params import FedProtoParams
from fedbench.algorithms.partial import WithClassifier, restore_model, store_model
from fedbench.models.base import FedModel


class PrototypeDistances(nn.Module):
    """The global prototypes as classifier: logits −‖z − C̄^(j)‖²; a class without a prototype gets the lowest finite
    logit (never predicted while another class has one). The client's trained head stays a part of it, unused by
    inference, so that the evaluated model has the client's whole parameters (its divergence diagnostics)."""

    def __init__(self, trained_head: nn.Module, prototypes: torch.Tensor, present: torch.Tensor):
        super().__init__()
        self.trained_head = trained_head
        self.prototypes = prototypes
        self.present = present

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        distances = ((z.unsqueeze(1) - self.prototypes.to(z.dtype)) ** 2).sum(-1)
        return torch.where(self.present, -distances, torch.finfo(z.dtype).min)


class FedProto(Algorithm):
    Params = FedProtoParams
    params: FedProtoParams

    def bind_model(self, spec, model, input_shape, num_classes):
        super().bind_model(spec, model, input_shape, num_classes)
        self._shape = (num_classes, model.feature_dim)

    def init_server(self, server):
        server.state["prototypes"] = torch.zeros(self._shape, dtype=server.params.dtype, device=server.params.device)
        server.state["present"] = torch.zeros(self._shape[0], dtype=torch.bool, device=server.params.device)

    def payload(self, server, round_index):
        return {"prototypes": server.state["prototypes"], "present": server.state["present"]}

    def begin_local(self, ctx):
        restore_model(ctx, "local", ctx.model)  # the client's own model; on first participation the server's w^0

    def loss(self, ctx, x, y, logits):
        features = ctx.scratch["features"]
        present = ctx.payload["present"][y]
        target = torch.where(present.unsqueeze(1), ctx.payload["prototypes"][y].to(features.dtype), features.detach())
        return super().loss(ctx, x, y, logits) + self.params.lam * ((features - target) ** 2).mean()  # Eq. 8

    def end_local(self, ctx, update):
        store_model(ctx, "local", update.params, update.buffers)
        x, y = ctx.data.train_x[ctx.indices], ctx.data.train_y[ctx.indices]
        sums, counts = class_feature_sums(ctx.model, x, y, self._shape[0])
        update.extra["prototype_sums"], update.extra["class_counts"] = sums, counts

    def aggregate(self, server, updates, round_index):
        """Eq. 6: Σ_i |D_i,j| C_i^(j) / Σ_i |D_i,j|, i.e. the clients' per-class feature sums over their counts. The
        model weights are not averaged: each client's model is its own."""
        sums = sum(u.extra["prototype_sums"].to(torch.float64) for u in updates)
        counts = sum(u.extra["class_counts"].to(torch.float64) for u in updates)
        seen = counts > 0
        prototypes = server.state["prototypes"].clone()
        prototypes[seen] = (sums[seen] / counts[seen].unsqueeze(1)).to(prototypes.dtype)
        server.state["prototypes"] = prototypes
        server.state["present"] = server.state["present"] | seen

    def after_aggregation(self, ctx, server):
        """The client keeps the round's global prototypes: it is evaluated with them (evaluation sees no payload)."""
        ctx.state["prototypes"] = server.state["prototypes"].clone()
        ctx.state["present"] = server.state["present"].clone()

    def eval_model(self, ctx):
        restore_model(ctx, "local", ctx.model)  # a client that never trained holds w^0 and no prototypes
        if "prototypes" not in ctx.state:
            return ctx.model
        return WithClassifier(
            ctx.model, PrototypeDistances(ctx.model.classifier, ctx.state["prototypes"], ctx.state["present"])
        )

    def extra_upload_floats(self, model_params):
        classes, dim = self._shape
        return classes * dim + classes  # prototype sums and class counts

    def extra_download_floats(self, model_params):
        classes, dim = self._shape
        return classes * dim


@torch.no_grad()
def class_feature_sums(model: FedModel, x: torch.Tensor, y: torch.Tensor, classes: int, batch_size: int = 1000):
    """(Σ f(x) per class: C × d, the class counts: C) of a client's samples, in float64, the model in eval mode: the
    numerator and denominator of Eq. 4 (and of Eq. 6)."""
    was_training = model.training
    model.eval()
    sums = torch.zeros(classes, model.feature_dim, dtype=torch.float64, device=x.device)
    for start in range(0, len(x), batch_size):
        features = model.features(x[start : start + batch_size])
        sums.index_add_(0, y[start : start + batch_size], features.to(torch.float64))
    model.train(was_training)
    return sums, torch.bincount(y, minlength=classes).to(torch.float64)
