"""FedNTD (Lee et al., NeurIPS 2022): federated not-true distillation.

Local loss (FedNTD Eq. 6, and the repo's ``NTD_Loss``):

    L = CE(q, y) + β·τ²·KL( q̃_g^τ ‖ q̃^τ ),   q̃^τ = softmax(z̃/τ), z̃ = the logits without the true class y,

with the round's global model w^t (frozen, eval mode) as the teacher. Removing the true class from both
logit vectors before the softmax is what makes it "not-true": the teacher's view of the true class never
enters the loss (``regularizers.not_true_distillation``).

Hyperparameters: FedDr+ Tables 6/7 (β, τ) = (1, 3) [paper], the default; the FedNTD repo configs (and the
FedTR [proposal]) use τ = 1, β = 1 — recipes set ``tau = 1`` there.
"""

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.params import FedNTDParams
from fedbench.algorithms.regularizers import not_true_distillation


class FedNTD(Algorithm):
    Params = FedNTDParams
    params: FedNTDParams

    def loss(self, ctx, x, y, logits):
        teacher_logits, _ = self.teacher_outputs(ctx, x)
        distill = not_true_distillation(logits, teacher_logits, y, self.params.tau)
        return super().loss(ctx, x, y, logits) + self.params.beta * distill
