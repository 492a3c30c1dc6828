"""FedYogi (Reddi et al., ICLR 2021, Alg. 2): FedAdagrad's server step (``fedadagrad.py``) with Yogi's second moment

    v^t = v^{t−1} − (1 − β2)·(Δ^t)²·sign(v^{t−1} − (Δ^t)²),

which moves v towards Δ² by an additive step instead of Adam's multiplicative one; β2 = 0.99 [paper]. It never
reduces to FedAvg.
"""

import torch

from fedbench.algorithms.methods.fedadagrad import FedAdagrad
from fedbench.algorithms.params import FedYogiParams


class FedYogi(FedAdagrad):
    """FedYogi (Reddi et al., ICLR 2021): Yogi on the server, additive second-moment steps."""

    Params = FedYogiParams
    params: FedYogiParams

    packed_step = True

    def second_moment(self, v, delta):
        squared = delta**2
        return v - (1 - self.params.beta2) * squared * torch.sign(v - squared)
