"""SphereFed (Dong et al., ECCV 2022): hyperspherical federated learning.

The classifier W is a fixed set of orthonormal rows (Gram–Schmidt of a random init), shared by all
clients and never trained, with no bias; features are L2-normalised (scale 1), so the logits are the
cosines cos(f(x), w_c). The local loss is the mean squared error between the cosines and the one-hot label,
averaged over B×C (FedDr+ [code]; the paper's loss on normalised features):

    L = (1 / (B·C)) · Σ_b Σ_c (cos(f(x_b), w_c) − 1[c = y_b])².

Model: build it with ``model_params.classifier = "orthonormal"`` (checked when the run starts, ``check_model``).
The original's post-training closed-form classifier calibration is used neither by FedDr+'s paper nor its
[code] and is not implemented. lr: FedDr+ Tables 6/7 use 0.55 (CIFAR-10) / 6.5 (CIFAR-100).
"""

import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.fixed_classifier import require_classifier


class SphereFed(Algorithm):
    """Fixed orthonormal classifier on normalised features, MSE on the cosine logits."""

    def check_model(self, model, setting):
        require_classifier(model, "orthonormal", setting)

    def loss(self, ctx, x, y, logits):
        return F.mse_loss(logits, F.one_hot(y, logits.shape[1]).to(logits.dtype))
