"""CCVR (Luo et al., NeurIPS 2021): classifier calibration with virtual representations after federated training.

Rounds 1 … T−1 are FedAvg. The last round T is the calibration round [proposal: the paper calibrates once after
training; fedbench spends the run's last round on it, so that no hook outside the round is needed]: its clients
do not train; each computes, with the received global model's feature extractor f, for every class c it holds
(§4, Eq. 3 — the local Gaussian statistics):
  μ_{c,k} = 1/N_{c,k} Σ f(x),   Σ_{c,k} = 1/(N_{c,k} − 1) Σ (f(x) − μ_{c,k})(f(x) − μ_{c,k})ᵀ
and the server pools them exactly (Eq. 4):
  μ_c = Σ_k N_{c,k}/N_c μ_{c,k}
  Σ_c = Σ_k (N_{c,k} − 1)/(N_c − 1) Σ_{c,k} + Σ_k N_{c,k}/(N_c − 1) μ_{c,k} μ_{c,k}ᵀ − N_c/(N_c − 1) μ_c μ_cᵀ,
draws M_c = ``virtual_per_class`` virtual representations per class from N(μ_c, Σ_c) (§4, "virtual
representations"; sampled as μ_c + V Λ^{1/2} ε from Σ_c's eigendecomposition, since ReLU features make Σ_c
singular), and retrains the classifier g on them with cross-entropy (plain SGD, the run's batch size, lr
``calibration_lr`` or the run's client lr, ``calibration_epochs`` passes [proposal]), the body kept. The
calibrated model is the run's final global model. A class with one sample overall has Σ_c = 0.
M_c = 100 [proposal: to be checked against the paper's experiments, which vary it].
Virtual features come from the keyed stream ("ccvr", T), so a resumed run draws the same ones.
The last round's record has no training loss (0: no client steps), and its upload of the statistics, C·(1 + d + d²)
floats per client once, is not counted in the per-round bytes. No packed path: the calibration round does not train.
"""

from __future__ import annotations

import copy

import torch
from torch.nn import functional as F

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import load_weights
from fedbench.algorithms.functional import flat_parameters
from fedbench.algorithms.params import CCVRParams
from fedbench.algorithms.partial import parameter_mask
from fedbench.models.base import FedModel
from fedbench.seeding import torch_generator


@torch.no_grad()
def class_statistics(model: FedModel, x: torch.Tensor, y: torch.Tensor, classes: int, batch_size: int = 1000):
    """(counts N_c: C, means μ_c: C × d, unbiased covariances Σ_c: C × d × d) of a client's features, float64, eval
    mode (Eq. 3); a class with fewer than two samples has Σ_c = 0."""
    was_training = model.training
    model.eval()
    dim = model.feature_dim
    sums = torch.zeros(classes, dim, dtype=torch.float64, device=x.device)
    outer = torch.zeros(classes, dim, dim, dtype=torch.float64, device=x.device)
    for start in range(0, len(x), batch_size):
        z = model.features(x[start : start + batch_size]).to(torch.float64)
        labels = y[start : start + batch_size]
        sums.index_add_(0, labels, z)
        outer.index_add_(0, labels, z.unsqueeze(2) * z.unsqueeze(1))
    model.train(was_training)
    counts = torch.bincount(y, minlength=classes).to(torch.float64)
    means = sums / counts.clamp(min=1).unsqueeze(1)
    scatter = outer - counts[:, None, None] * means.unsqueeze(2) * means.unsqueeze(1)
    covariances = scatter / (counts - 1).clamp(min=1)[:, None, None]
    covariances[counts < 2] = 0.0
    return counts, means, covariances


def pooled_statistics(counts: torch.Tensor, means: torch.Tensor, covariances: torch.Tensor):
    """Eq. 4: the global (N_c, μ_c, Σ_c) from the clients' stacked (N_{c,k}: K × C, μ_{c,k}: K × C × d,
    Σ_{c,k}: K × C × d × d)."""
    total = counts.sum(0)
    mean = (counts.unsqueeze(2) * means).sum(0) / total.clamp(min=1).unsqueeze(1)
    below = (total - 1).clamp(min=1)[:, None, None]
    outer = means.unsqueeze(3) * means.unsqueeze(2)
    within = ((counts - 1).clamp(min=0)[..., None, None] * covariances).sum(0)
    between = (counts[..., None, None] * outer).sum(0)
    covariance = (within + between - total[:, None, None] * mean.unsqueeze(2) * mean.unsqueeze(1)) / below
    covariance[total < 2] = 0.0
    return total, mean, covariance


def virtual_representations(mean, covariance, per_class: int, present, generator):
    """M_c draws from N(μ_c, Σ_c) for every class present (float64): μ_c + V diag(√max(λ, 0)) ε."""
    features, labels = [], []
    for c in torch.nonzero(present).flatten().tolist():
        eigenvalues, vectors = torch.linalg.eigh(covariance[c])
        noise = torch.randn(per_class, mean.shape[1], generator=generator, dtype=torch.float64).to(mean.device)
        features.append(mean[c] + (noise * eigenvalues.clamp(min=0).sqrt()) @ vectors.T)
        labels.append(torch.full((per_class,), c, dtype=torch.long, device=mean.device))
    return torch.cat(features), torch.cat(labels)


class CCVR(Algorithm):
    Params = CCVRParams
    params: CCVRParams

    def bind_model(self, spec, model, input_shape, num_classes):
        super().bind_model(spec, model, input_shape, num_classes)
        self._classes = num_classes
        self._head = parameter_mask(model, model.head_parameter_names())
        self._classifier = copy.deepcopy(model.classifier)  # a template the server retrains

    def calibrates(self, round_index: int) -> bool:
        assert self.spec is not None
        return round_index == self.spec.rounds

    def local_phases(self, ctx):
        return [] if self.calibrates(ctx.round_index) else super().local_phases(ctx)

    def end_local(self, ctx, update):
        if self.calibrates(ctx.round_index):
            x, y = ctx.data.train_x[ctx.indices], ctx.data.train_y[ctx.indices]
            update.extra["class_statistics"] = class_statistics(ctx.model, x, y, self._classes)

    def aggregate(self, server, updates, round_index):
        if not self.calibrates(round_index):
            return super().aggregate(server, updates, round_index)
        counts, means, covariances = (
            torch.stack(part) for part in zip(*(u.extra["class_statistics"] for u in updates))
        )
        total, mean, covariance = pooled_statistics(counts, means, covariances)
        assert self.spec is not None
        generator = torch_generator(self.spec.seed, "ccvr", round_index)
        z, y = virtual_representations(mean, covariance, self.params.virtual_per_class, total > 0, generator)
        server.params = server.params.clone()
        server.params[self._head] = self.calibrated_head(server.params[self._head], z, y, generator)

    def calibrated_head(self, head: torch.Tensor, z: torch.Tensor, y: torch.Tensor, generator) -> torch.Tensor:
        """The classifier retrained on the virtual representations with cross-entropy (plain SGD)."""
        assert self.spec is not None
        classifier = self._classifier.to(device=head.device, dtype=head.dtype)
        load_weights(classifier, head)
        lr = self.params.calibration_lr or self.spec.optimizer.lr
        optimizer = torch.optim.SGD(classifier.parameters(), lr=lr)
        z, y = z.to(device=head.device, dtype=head.dtype), y.to(head.device)
        for _ in range(self.params.calibration_epochs):
            order = torch.randperm(len(y), generator=generator).to(head.device)
            for start in range(0, len(y), self.spec.batch_size):
                chosen = order[start : start + self.spec.batch_size]
                loss = F.cross_entropy(classifier(z[chosen]), y[chosen])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        return flat_parameters(classifier.parameters()).detach().clone()
