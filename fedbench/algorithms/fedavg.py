"""FedAvg (McMahan et al., 2017): the base class as it is."""

from fedbench.algorithms import register_algorithm
from fedbench.algorithms.base import Algorithm


@register_algorithm("fedavg", papers=("fedtr", "feddrplus", "fedtrip", "fedimpro", "lgmix"))
class FedAvg(Algorithm):
    """Local SGD on every sampled client; the server averages the models weighted by sample count."""
