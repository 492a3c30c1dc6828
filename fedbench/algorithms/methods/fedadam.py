"""FedAdam (Reddi et al., ICLR 2021, Alg. 2): FedAdagrad's server step (``fedadagrad.py``) with Adam's second moment

    v^t = β2·v^{t−1} + (1 − β2)·(Δ^t)²,

β2 = 0.99 (Sec. 5) [paper]; the other parameters and defaults are FedAdagrad's. It never reduces to FedAvg.
"""

from fedbench.algorithms.methods.fedadagrad import FedAdagrad
from fedbench.algorithms.params import FedAdamParams


class FedAdam(FedAdagrad):
    """FedAdam (Reddi et al., ICLR 2021): Adam on the server (no bias correction)."""

    Params = FedAdamParams
    params: FedAdamParams

    packed_step = True

    def second_moment(self, v, delta):
        return self.params.beta2 * v + (1 - self.params.beta2) * delta**2
