"""FedBN (Li et al., ICLR 2021): BatchNorm layers stay local, everything else is FedAvg.

Each client keeps its BN affine parameters (``model.batchnorm_parameter_names()``) and its BN buffers
(running mean/var and num_batches_tracked of ``model.batchnorm_module_names()``); neither is ever averaged
(FedBN Alg. 1: "aggregate all parameters except BN"). They start from the common initialisation. A model
without BatchNorm makes this FedAvg.
"""

from fedbench.algorithms.partial import PartialPersonalization


class FedBN(PartialPersonalization):
    def local_parameter_names(self, model):
        return model.batchnorm_parameter_names()

    def local_buffer_names(self, model):
        prefixes = tuple(f"{name}." for name in model.batchnorm_module_names())
        return [name for name, _ in model.named_buffers() if name.startswith(prefixes)]
