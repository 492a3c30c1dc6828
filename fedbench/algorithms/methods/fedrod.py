"""FedRoD (Chen & Chao, ICLR 2022): one model, two heads — a generic head for the federation, a personal head for
the client.

With body f (shared), generic head G (shared) and client k's personal head P_k, on a batch:
  generic loss   L_G = CE(G(f(x)) + log n_k, y)          balanced softmax (Ren et al. 2020), n_k the client's class
                                                          counts: the generic head learns the class-balanced rule
                                                          (FedRoD §4, the balanced risk)
  personal loss  L_P = CE(sg[G(f(x))] + P_k(sg[f(x)]), y) the personal head fits the residual of the generic
                                                          logits on the client's distribution (§4, the personal
                                                          risk on the sum of both heads)
and one step on L_G + L_P trains body, G and P_k together; sg (stop-gradient) keeps L_P out of the body and G, as
the authors' code does [code]. A class the client does not hold has log 0 = −∞: it leaves the local softmax.
The server averages body and G as FedAvg; P_k never leaves the client. P_k starts as w^0's head, a copy of the
generic head at initialisation [code], and has G's architecture (the linear-head FedRoD, not the hypernetwork).
Personal evaluation: G(f(x)) + P_k(f(x)) with the current global body and G; the global model is G ∘ f.
``balanced = false`` trains G with plain cross-entropy [proposal: an ablation switch, not in the paper].
No packed path: the personal head is a second set of trained tensors outside the model.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from fedbench.algorithms.base import Algorithm, LocalPhase
from fedbench.algorithms.params import FedRoDParams
from fedbench.algorithms.partial import WithClassifier, parameter_mask


def head_parameters(classifier: nn.Module, vector: torch.Tensor) -> dict[str, torch.Tensor]:
    """A flat vector of the classifier's parameters (their order in the model) as the classifier's named tensors."""
    views, offset = {}, 0
    for name, p in classifier.named_parameters():
        views[name] = vector[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return views


def personal_logits(classifier: nn.Module, head: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """P_k(z): the classifier's architecture with the personal head's weights."""
    return functional_call(classifier, head_parameters(classifier, head), (features,))


class TwoHeads(nn.Module):
    """The classifier of a client's personalised model: G(z) + P_k(z)."""

    def __init__(self, generic: nn.Module, personal: torch.Tensor):
        super().__init__()
        self.generic = generic
        self.personal = personal

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.generic(z) + personal_logits(self.generic, self.personal, z)


class FedRoD(Algorithm):
    Params = FedRoDParams
    params: FedRoDParams

    def bind_model(self, spec, model, input_shape, num_classes):
        super().bind_model(spec, model, input_shape, num_classes)
        self._classes = num_classes
        self._head = parameter_mask(model, model.head_parameter_names())

    def init_server(self, server):
        server.state["initial_head"] = server.params[self._head].clone()  # P_k's start, w^0's head

    def payload(self, server, round_index):
        return {"initial_head": server.state["initial_head"]}

    def local_phases(self, ctx):
        start = ctx.state.get("personal_head", ctx.payload["initial_head"])
        ctx.scratch["personal_head"] = start.detach().clone().requires_grad_(True)
        counts = torch.bincount(ctx.data.train_y[ctx.indices], minlength=self._classes)
        ctx.scratch["log_counts"] = counts.to(ctx.global_params.dtype).log()  # −∞ for a class it does not hold
        return [LocalPhase(ctx.batches(), step=self._train_both_heads)]

    def _train_both_heads(self, ctx, batches):
        """The round's steps with one optimizer over the model and P_k."""
        optimizer = ctx.make_optimizer([*ctx.model.parameters(), ctx.scratch["personal_head"]])
        self.train_steps(ctx, optimizer, batches)

    def loss(self, ctx, x, y, logits):
        # the balanced risk: softmax shifted by log n_k (the plain risk without the shift)
        shifted = logits + ctx.scratch["log_counts"].to(logits.dtype) if self.params.balanced else logits
        generic = F.cross_entropy(shifted, y)
        residual = personal_logits(ctx.model.classifier, ctx.scratch["personal_head"], ctx.scratch["features"].detach())
        return generic + F.cross_entropy(logits.detach() + residual, y)  # + the personal risk on the residual

    def end_local(self, ctx, update):
        ctx.state["personal_head"] = ctx.scratch["personal_head"].detach().clone()

    def eval_model(self, ctx):
        if "personal_head" not in ctx.state:  # a client that never trained: the generic model
            return ctx.model
        return WithClassifier(ctx.model, TwoHeads(ctx.model.classifier, ctx.state["personal_head"]))
