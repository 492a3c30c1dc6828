"""FL methods, one per file in ``methods/``, declared by name below: the catalogue of built-in methods. Beside them,
the API a method sees: ``base.py`` (``Algorithm``, which is FedAvg), ``context.py`` (a client's context and update),
``params.py`` (every method's hyperparameters, no torch), ``functional.py``, ``losses.py`` and ``regularizers.py``
(shared formulas), ``partial.py`` (personalised layer splits), ``fixed_classifier.py`` (ETF heads) and the registry.

Each entry names the method, its class in ``fedbench/algorithms/methods/<name>.py``, its hyperparameters (a class of
``params.py``) and what the registry records about it: ``papers`` (the paper specs that train it),
``finetune_losses`` (the ``finetune.loss`` values whose objective it is, with the ``algorithm_params`` that give
it), ``kind`` ("personal" for a method whose clients are evaluated with models of their own, ``eval_model``;
"global", the default, for one that trains one global model) and ``fedavg_setting`` (the ``algorithm_params``, and
run ``setup`` where needed, with which the method is FedAvg: the engine contract checks that it trains as FedAvg there, ``fedbench/execution/contract/``). A method's module is imported the first time ``ALGORITHMS.get(name)`` (or ``build_algorithm``) needs its
class; compiling a recipe, hashing its specs and listing the methods read only this catalogue and ``params.py``,
which import no torch. A plug-in written outside the repository registers its class in one step instead:
``@register_algorithm(name, papers=...)`` (``_registry.py``).
"""

import importlib
import sys
import warnings
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from fedbench.algorithms import params as p
from fedbench.algorithms._registry import (
    ALGORITHMS,
    build_algorithm,
    finetune_objective,
    params_class,
    register_algorithm,
    validate_algorithm_params,
)
from fedbench.plugins import register_catalogue

_BUILT_IN: set[str] = set()  # the modules of methods/, by name


def _method(name: str, cls: str, params: type[p.NoParams], **info: Any) -> None:
    _BUILT_IN.add(name)
    ALGORITHMS.declare(name, f"fedbench.algorithms.methods.{name}:{cls}", params=params, **info)


# APFL and Ditto train the global model as FedAvg does whatever their parameters (the personal models are their own)
_method("apfl", "APFL", p.APFLParams, papers=("lgmix", "bench"), fedavg_setting={}, kind="personal")
_method("ccvr", "CCVR", p.CCVRParams, papers=("bench",), kind="personal")
_method("ditto", "Ditto", p.DittoParams, papers=("feddrplus", "bench"), fedavg_setting={}, kind="personal")
# finetune.loss = "dr" | "dr_plus" (FedDr+ Table 8's crossed rows): fine-tuning with L_DR (β = 1) or L_Dr+ (β = 0.9)
_method(
    "dot_regression",
    "DotRegression",
    p.NoParams,
    papers=("feddrplus",),
    finetune_losses={"dr": {}, "dr_plus": p.FEDDR_PLUS_PARAMS},
)
# the adaptive server optimizers (Reddi et al.) divide by √v + τ: no setting reduces them to FedAvg
_method("fedadagrad", "FedAdagrad", p.FedAdagradParams, papers=("bench",))
_method("fedadam", "FedAdam", p.FedAdamParams, papers=("bench",))
# p = 0 higher layers: every layer is the global model's, as FedAvg loads it
_method(
    "fedala",
    "FedALA",
    p.FedALAParams,
    papers=("bench",),
    fedavg_setting={"algorithm_params": {"layer_idx": 0}},
    kind="personal",
)
_method("fedalt", "FedAlt", p.FedAltParams, papers=("lgmix", "bench"), kind="personal")
# finetune.loss = "ce": fine-tuning with FedAvg's objective, the task loss (cross-entropy; Dice for segmentation)
_method(
    "fedavg",
    "FedAvg",
    p.NoParams,
    papers=("fedtr", "feddrplus", "fedtrip", "fedimpro", "lgmix", "bench"),
    finetune_losses={"ce": {}},
)
_method(
    "fedavgm",
    "FedAvgM",
    p.FedAvgMParams,
    papers=("bench",),
    fedavg_setting={"algorithm_params": {"beta": 0.0, "server_lr": 1.0}},
)
_method("fedbabu", "FedBABU", p.NoParams, papers=("feddrplus", "lgmix", "bench"))
_method("fedbn", "FedBN", p.NoParams, papers=("lgmix", "bench"), kind="personal")
_method("feddc", "FedDC", p.FedDCParams, papers=("bench",))
_method(
    "feddecorr",
    "FedDecorr",
    p.FedDecorrParams,
    papers=("bench",),
    fedavg_setting={"algorithm_params": {"beta": 0.0}},
)
_method("feddyn", "FedDyn", p.FedDynParams, papers=("fedtr", "fedtrip", "fedimpro", "bench"))
_method("fedetf", "FedETF", p.FedETFParams, papers=("feddrplus",))
_method("fedexp", "FedExP", p.FedExPParams, papers=("feddrplus", "bench"))
_method("fedfomo", "FedFomo", p.FedFomoParams, papers=("lgmix", "bench"), kind="personal")
_method(
    "fedhkd",
    "FedHKD",
    p.FedHKDParams,
    papers=("lgmix", "bench"),
    fedavg_setting={"algorithm_params": {"lam": 0.0, "gamma": 0.0}},
    kind="personal",
)
_method(
    "fedimpro",
    "FedImpro",
    p.FedImproParams,
    papers=("fedimpro",),
    fedavg_setting={"algorithm_params": {"feature_weight": 0.0}},
)
# τ = 0 calibrates nothing: the loss is cross-entropy
_method("fedlc", "FedLC", p.FedLCParams, papers=("bench",), fedavg_setting={"algorithm_params": {"tau": 0.0}})
# equal step counts (local_steps) make every a_i equal, so w − τ_eff·Σ p_i (w − w_i)/a_i is FedAvg's average
_method(
    "fednova", "FedNova", p.FedNovaParams, papers=("fedimpro", "bench"), fedavg_setting={"setup": {"local_steps": 2}}
)
_method(
    "fedntd",
    "FedNTD",
    p.FedNTDParams,
    papers=("fedtr", "feddrplus", "bench"),
    fedavg_setting={"algorithm_params": {"beta": 0.0}},
)
_method("fedper", "FedPer", p.NoParams, papers=("feddrplus", "bench"), kind="personal")
_method("fedproto", "FedProto", p.FedProtoParams, papers=("bench",), kind="personal")
_method(
    "fedprox",
    "FedProx",
    p.FedProxParams,
    papers=("fedtr", "fedtrip", "fedimpro", "bench"),
    fedavg_setting={"algorithm_params": {"mu": 0.0}},
)
_method("fedrep", "FedRep", p.FedRepParams, papers=("lgmix", "feddrplus", "bench"), kind="personal")
_method("fedrod", "FedRoD", p.FedRoDParams, papers=("bench",), kind="personal")
_method("fedsam", "FedSAM", p.FedSAMParams, papers=("bench",), fedavg_setting={"algorithm_params": {"rho": 0.0}})
_method(
    "fedtr",
    "FedTR",
    p.FedTRParams,
    papers=("fedtr", "bench"),
    fedavg_setting={"algorithm_params": {"lambda_r": 0.0, "alpha_g": 0.0}},
)
_method(
    "fedtrip", "FedTrip", p.FedTripParams, papers=("fedtrip", "bench"), fedavg_setting={"algorithm_params": {"mu": 0.0}}
)
_method("fedyogi", "FedYogi", p.FedYogiParams, papers=("bench",))
_method("l2sgd", "L2SGD", p.L2SGDParams, papers=("lgmix", "bench"), kind="personal")
_method("lgmix", "LGMix", p.LGMixParams, papers=("lgmix", "bench"), kind="personal")
_method("local", "Local", p.LocalParams, papers=("lgmix", "feddrplus", "bench"), kind="personal")
_method(
    "mofedsam",
    "MoFedSAM",
    p.MoFedSAMParams,
    papers=("bench",),
    fedavg_setting={"algorithm_params": {"rho": 0.0, "alpha": 1.0}},
)
_method(
    "moon", "Moon", p.MoonParams, papers=("fedtr", "fedtrip", "bench"), fedavg_setting={"algorithm_params": {"mu": 0.0}}
)
_method("perfedavg", "PerFedAvg", p.PerFedAvgParams, papers=("lgmix", "feddrplus", "bench"), kind="personal")
_method("pfedme", "PFedMe", p.PFedMeParams, papers=("bench",), kind="personal")
_method("scaffold", "Scaffold", p.ScaffoldParams, papers=("fedtr", "feddrplus", "fedimpro", "bench"))
_method(
    "slowmo",
    "SlowMo",
    p.SlowMoParams,
    papers=("fedtrip", "bench"),
    fedavg_setting={"algorithm_params": {"beta": 0.0, "slow_lr": 1.0}},
)
_method("spherefed", "SphereFed", p.NoParams, papers=("feddrplus",))
register_catalogue(
    ALGORITHMS
)  # every built-in declared: a plug-in that fails to load leaves them (plugins/registry.py)


class _MovedMethod(MetaPathFinder, Loader):
    """The built-in methods' modules lived at ``fedbench.algorithms.<name>`` before ``methods/``; a plug-in that
    imports one from there (``from fedbench.algorithms.fedprox import FedProx``, to subclass it) still gets it, with a
    ``DeprecationWarning`` naming the new path. It gets the very module of the new path, so its classes are the ones
    the catalogue builds."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in _BUILT_IN:
            return None
        return ModuleSpec(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        name = spec.name.rpartition(".")[2]
        warnings.warn(f"{spec.name} moved: import it from {__name__}.methods.{name}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(f"{__name__}.methods.{name}")

    def exec_module(self, module: ModuleType) -> None:
        """The module was executed under its new name."""


sys.meta_path.append(_MovedMethod())

__all__ = [
    "ALGORITHMS",
    "build_algorithm",
    "finetune_objective",
    "params_class",
    "register_algorithm",
    "validate_algorithm_params",
]
