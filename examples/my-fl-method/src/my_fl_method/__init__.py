"""A fedbench plug-in: the method ``adaprox`` (``method.py``), the model ``tiny_cnn`` (``models.py``) and the data set
``sitedigits`` (``data.py``), registered when fedbench imports this package — through the entry point of the group
``fedbench.plugins`` once the package is installed, or with ``--plugin PATH/TO/src/my_fl_method``.

Every fedbench command that compiles a recipe or lists plug-ins imports it, ``fedbench report`` and ``fedbench
algorithms`` among them, and those start without torch. So importing this package imports no torch: the method is
declared by name and by the place of its class, imported the first time a run builds it (as fedbench declares its
own methods), and the model's builder imports its network when it is called.
"""

from fedbench.algorithms import ALGORITHMS

from my_fl_method import data, models  # noqa: F401  (imported to register the data set and the model)
from my_fl_method.params import AdaProxParams

# `@register_algorithm("adaprox", ...)` on the class would register it in one step, but importing the class imports
# torch. The declaration states what compiling a recipe reads without it: the hyperparameters, and the setting in
# which AdaProx is FedAvg (μ = 0: every μ_k stays 0), which `fedbench check-method adaprox` checks.
ALGORITHMS.declare(
    "adaprox",
    "my_fl_method.method:AdaProx",
    params=AdaProxParams,
    fedavg_setting={"algorithm_params": {"mu": 0.0}},
)
