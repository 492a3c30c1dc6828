"""FedBABU (Oh, Kim & Yun, ICLR 2022): federated averaging with body aggregation and body update.

The head (classifier) keeps its random initialisation and is frozen during FL ("lr 0, bias included",
FedDr+ spec §3.1); only the body is trained, with plain CE, and aggregated. The head's parameters are the
model's ``head_parameter_names()``, so any FedModel works with its default trainable head
(model_params.classifier = "linear" where the model has that option).

Frozen parameters are left out of the client optimizer (no weight decay on them), so every client returns
the global head unchanged and the exact float64 averaging keeps it bit-identical: the head never changes.
The flags are restored after local training (the working model is shared), so FedBABU-FT — a separate
fine-tuning step (``spec.finetune``), not part of this method — can train the whole model.
"""

from fedbench.algorithms.base import Algorithm


class FedBABU(Algorithm):
    """Body-only training and aggregation; the randomly initialised head stays fixed."""

    def begin_local(self, ctx):
        head = set(ctx.model.head_parameter_names())
        ctx.scratch["head_flags"] = {}
        for name, p in ctx.model.named_parameters():
            if name in head:
                ctx.scratch["head_flags"][name] = p.requires_grad
                p.requires_grad_(False)

    def end_local(self, ctx, update):
        for name, p in ctx.model.named_parameters():
            if name in ctx.scratch["head_flags"]:
                p.requires_grad_(ctx.scratch["head_flags"][name])
