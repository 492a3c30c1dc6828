"""FedAvg (McMahan et al., 2017): the base class as it is."""

from fedbench.algorithms.base import Algorithm


class FedAvg(Algorithm):
    """Local SGD on every sampled client; the server averages the models weighted by sample count."""

    packed_step = True  # the base class's local step, as the packed training path's default hooks express it
