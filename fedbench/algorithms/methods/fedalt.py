"""FedAlt (Pillutla et al., ICML 2022, partial personalisation with alternating updates).

The model is split into a personal part v_k (the output layer, LG-Mix spec §3 [proposal]) and a shared part
u. Each round a client first updates v_k with u^t fixed, then u with its new v_k fixed (FedAlt Alg. 1:
"personal first, then shared"); the server averages u only. The round's local steps (``local_epochs`` or
``local_steps``) are split between the two: ``personal_fraction`` of them for v_k [proposal: one half],
the rest for u. (FedRep is the same split with whole epochs for each part.)
"""

from fedbench.algorithms.base import LocalPhase
from fedbench.algorithms.params import FedAltParams
from fedbench.algorithms.partial import PartialPersonalization


class FedAlt(PartialPersonalization):
    Params = FedAltParams
    params: FedAltParams

    def local_parameter_names(self, model):
        return model.head_parameter_names()  # the output layer, as FedRep's head

    def local_phases(self, ctx):
        """FedAlt Alg. 1: the personal part v_k with u fixed, then u with v_k fixed, sharing the round's steps."""
        personal = self.local_parameter_names(ctx.model)
        shared = [n for n, _ in ctx.model.named_parameters() if n not in set(personal)]
        steps = ctx.planned_steps()
        personal_steps = round(self.params.personal_fraction * steps)
        return [
            LocalPhase(ctx.batches(steps=personal_steps), personal),
            LocalPhase(ctx.batches(steps=steps - personal_steps), shared),
        ]
