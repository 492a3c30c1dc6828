"""FedRep (Collins et al., ICML 2021): shared representation (body), local heads.

Each round a client loads the global body and its own head, then (FedRep Alg. 1)
  1. trains the head for ``head_epochs`` with the body frozen:   h_k ← GD(h_k; φ^t fixed),
  2. trains the body for ``body_epochs`` with the head frozen:   φ_k ← GD(φ; h_k fixed),
and uploads; the server averages the bodies only, the head stays on the client.

Epochs: FedDr+ spec §3.2 / FedBABU [code]: head for E epochs (the run's ``local_epochs``) then the body for 1;
LG-Mix gives none ("body epochs 1; head epochs unspecified") [proposal: the same].
"""

from fedbench.algorithms.base import LocalPhase
from fedbench.algorithms.params import FedRepParams
from fedbench.algorithms.partial import PartialPersonalization


class FedRep(PartialPersonalization):
    Params = FedRepParams
    params: FedRepParams

    def local_parameter_names(self, model):
        return model.head_parameter_names()

    def local_phases(self, ctx):
        """FedRep Alg. 1: the head with the body frozen, then the body with the head frozen."""
        head = self.local_parameter_names(ctx.model)
        body = [n for n, _ in ctx.model.named_parameters() if n not in set(head)]
        head_epochs = ctx.spec.local_epochs if self.params.head_epochs is None else self.params.head_epochs
        if ctx.spec.local_steps:  # a fixed step budget: each "epoch" of a phase is local_steps steps
            steps = ctx.spec.local_steps
            head_steps = steps if self.params.head_epochs is None else self.params.head_epochs * steps
            return [
                LocalPhase(ctx.batches(steps=head_steps), head),
                LocalPhase(ctx.batches(steps=self.params.body_epochs * steps), body),
            ]
        return [
            LocalPhase(ctx.batches(epochs=head_epochs), head),
            LocalPhase(ctx.batches(epochs=self.params.body_epochs), body),
        ]
