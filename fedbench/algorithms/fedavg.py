"""FedAvg (McMahan et al., 2017): the base class as it is."""

from fedbench.algorithms._registry import register_algorithm
from fedbench.algorithms.base import Algorithm


# finetune.loss = "ce": fine-tuning with FedAvg's objective, the task loss (cross-entropy; Dice for segmentation)
@register_algorithm("fedavg", papers=("fedtr", "feddrplus", "fedtrip", "fedimpro", "lgmix"), finetune_losses={"ce": {}})
class FedAvg(Algorithm):
    """Local SGD on every sampled client; the server averages the models weighted by sample count."""

    packed_step = True  # the base class's local step, as the packed executor's default hooks express it
