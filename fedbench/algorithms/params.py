"""Every built-in method's hyperparameters (its ``algorithm_params``), one pydantic class per method in the order of
the methods' names, with the regularizers every method accepts (``NoParams``).

This module imports no torch: compiling a recipe fills in and checks each method's defaults, and ``fedbench
algorithms`` lists them, without importing the methods. A method's file sets ``Params = <its class>``; what a
field means is said in that file's docstring, which cites the paper. A field added after runs were registered,
whose default keeps the old behaviour, is marked ``Annotated[..., HashNeutral(old_value)]`` (``fedbench.spec``).

A fix that changes what some specs train to raises the method's ``result_revision`` for exactly those specs
(``NoParams.result_revision``): it is a rule about specs, so it lives here, beside the parameters, and compiling a
recipe reads it without importing the method.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fedbench.spec import HashNeutral

if TYPE_CHECKING:
    from fedbench.spec import RunSpec


class RegularizerSpec(BaseModel):
    """One composable local regularizer of ``NoParams.regularizers`` (``fedbench.algorithms.regularizers``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: Literal["prox", "kd", "ntd", "ld", "fd"]
    weight: float = Field(ge=0)  # 1 − β (convex; FedDr+ β = 0.9 → 0.1) or λ / μ (add)
    tau: float = Field(3.0, gt=0)  # kd/ntd temperature; FedDr+ [proposal] τ = 3 (FedNTD's)
    combine: Literal["convex", "add"] | None = None  # None: "add" for prox, "convex" for the others

    @property
    def mode(self) -> str:
        return self.combine or ("add" if self.name == "prox" else "convex")


class NoParams(BaseModel):
    """Base of every method's hyperparameters: the composable regularizers every method accepts."""

    # defer_build: a method's validator is built when its parameters are first checked, not for every method when
    # this module is imported (a command that resolves one spec needs one)
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    regularizers: tuple[RegularizerSpec, ...] = ()

    @field_validator("regularizers")
    @classmethod
    def _convex_weights_at_most_one(cls, value):
        if sum(r.weight for r in value if r.mode == "convex") > 1:
            raise ValueError("the weights of the convex regularizers sum to more than 1")
        return value

    @classmethod
    def result_revision(cls, spec: RunSpec) -> int:
        """Which revision of the method's results ``spec`` gets: 1 unless a fix changed what this spec trains to.
        A revision above 1 goes into the spec hash (``RunSpec.canonical_json``), so runs trained before the fix
        are not taken for the spec's result: ``run`` trains it again and ``report`` no longer shows the old
        numbers. Return the new revision only for the specs the fix changes."""
        return 1


# FedDr+ (Eq. 4, β = 0.9) as dot_regression's algorithm_params: L_Dr+ = 0.9·L_DR + 0.1·L_FD.
FEDDR_PLUS_PARAMS = {"regularizers": [{"name": "fd", "weight": 0.1}]}


class APFLParams(NoParams):
    alpha: float = Field(0.5, ge=0, le=1)
    adaptive_alpha: bool = True
    alpha_lr: float | None = Field(None, gt=0)


class CCVRParams(NoParams):
    virtual_per_class: int = Field(100, ge=1)  # M_c, virtual representations sampled per class
    calibration_epochs: int = Field(1, ge=1)  # passes of the server's head training over the virtual set
    calibration_lr: float | None = Field(None, gt=0)  # None: the run's client learning rate


class DittoParams(NoParams):
    lam: float = Field(0.75, ge=0)
    personal_epochs: int | None = Field(None, ge=0)  # None: as many steps as the global update


class FedALAParams(NoParams):
    rand_percent: float = Field(80.0, gt=0, le=100)  # s, % of the local data that trains W_i
    layer_idx: int = Field(1, ge=0)  # p, the higher layers adaptively aggregated
    eta: float = Field(1.0, gt=0)  # η, step size of W_i
    threshold: float = Field(0.1, ge=0)  # first round: W_i trains until the std of the last losses is below it
    loss_window: int = Field(10, ge=2)  # how many last losses that std is taken over
    max_first_epochs: int = Field(50, ge=1)  # cap on the first round's passes


class FedAdagradParams(NoParams):
    # Reddi et al. (ICLR 2021) Alg. 2 and Sec. 5: β1 = 0.9, τ = 1e-3; η tuned per task there, 0.01 here [proposal]
    server_lr: float = Field(0.01, gt=0)  # η
    beta1: float = Field(0.9, ge=0, lt=1)  # β1, first moment
    tau: float = Field(1e-3, gt=0)  # τ, the adaptivity floor (v starts at τ²)


class FedAdamParams(FedAdagradParams):
    beta2: float = Field(0.99, ge=0, lt=1)  # β2, second moment (Reddi et al. Sec. 5: 0.99)


class FedAltParams(NoParams):
    personal_fraction: float = Field(0.5, ge=0, le=1)


class FedAvgMParams(NoParams):
    # Hsu et al. (2019) Sec. 3: v ← βv + Δw, w ← w − v (server lr 1); β = 0.9, the value their sweeps favour
    beta: float = Field(0.9, ge=0, lt=1)  # server momentum β
    server_lr: float = Field(1.0, gt=0)  # η, 1 in the paper


class FedDCParams(NoParams):
    alpha: float = Field(0.01, gt=0)  # α of the penalty (α/2)‖h_i + θ_i − w‖²; FedDC [code] alpha_coef 1e-2


class FedDecorrParams(NoParams):
    beta: float = Field(0.1, ge=0)  # β, weight of L_FedDecorr (Shi et al. Sec. 5: 0.1 [paper])


class FedDynParams(NoParams):
    alpha: float = Field(0.01, gt=0)
    # the server's first h: "participation" (the standard rule), "unscaled" (FedTrip's code, without |P|/N)
    first_h: Annotated[Literal["participation", "unscaled"], HashNeutral("participation")] = "participation"


class FedETFParams(NoParams):
    beta: float = Field(1.0, ge=0)  # exponent on the local class counts


class FedExPParams(NoParams):
    epsilon: float = Field(0.001, ge=0)
    variant: Literal["original", "feddrplus_code"] = "original"


class FedFomoParams(NoParams):
    m: int = Field(5, ge=1)  # M, models downloaded per round
    val_fraction: float = Field(0.2, gt=0, lt=1)  # of the client's training data

    @classmethod
    def result_revision(cls, spec: RunSpec) -> int:
        # 2: peers are scored and mixed with their own BatchNorm statistics (0.1.0 used the client's own)
        from fedbench.cost import has_batchnorm  # local: whether a model has BatchNorm is seen by building it (torch)

        return 2 if has_batchnorm(spec.model, spec.dataset, json.dumps(spec.model_params, sort_keys=True)) else 1


class FedHKDParams(NoParams):
    lam: float = Field(0.05, ge=0)
    gamma: float = Field(0.05, ge=0)
    temperature: float = Field(0.5, gt=0)
    noise_std: float = Field(2.0, ge=0)


class FedImproParams(NoParams):
    split: str | None = None  # split point; None = the model's default (ResNet: layer2)
    sigma0: float = Field(0.1, ge=0)  # σ⁰ and the per-element upper clip of σ ([code] fed_split_noise_std)
    clip_sigma: bool = True  # spec §8 #4: the clip is [code], not [paper]
    stat_weight: Literal["code", "count", "beta"] = "code"  # Eq. 6 weight w = 1 − β_m (spec §1.4, §8 #1)
    beta_m: float = Field(0.9, ge=0, le=1)  # only for stat_weight = "beta" ([paper] value unspecified)
    count_ref: int = Field(5000, ge=1)  # "code": w = min(1, D/count_ref); "count": w = min(1, n_c/count_ref)
    beta_g: float = Field(0.0, ge=0, lt=1)  # Eq. 7 server momentum; [code] 0
    noise_std: float = Field(0.0, ge=0)  # σ_ε (Table 7): N(0, σ_ε²) on every uploaded μ and σ element
    sample_from: Literal["local", "global"] = "local"  # [code] evolving local copy | [paper] Alg. 1 H^r
    feature_weight: float = Field(1.0, ge=0)  # 0 = no synthetic features at all (FedAvg + estimation)
    feature_weight_sched: Literal["gradual", "capped", "constant"] = "gradual"  # [code] gradual2half
    feature_weight_epochs: int = Field(500, ge=1)  # T in λ(e) = feature_weight·e/T


class FedLCParams(NoParams):
    tau: float = Field(1.0, ge=0)  # τ, strength of the label-count calibration


class FedNovaParams(NoParams):
    normalize_buffers: bool = True

    @classmethod
    def result_revision(cls, spec: RunSpec) -> int:
        # 2: a round in which every client's a_i is equal aggregates as FedAvg itself (Eq. 7 is then FedAvg), bit for
        # bit, where 0.1.0 computed an algebraically equal form that rounds otherwise. Which rounds those are depends
        # on the clients' data (their step counts), not on the spec alone, so every FedNova spec gets the revision.
        return 2


class FedNTDParams(NoParams):
    beta: float = Field(1.0, ge=0)
    tau: float = Field(3.0, gt=0)


class FedProtoParams(NoParams):
    lam: float = Field(1.0, ge=0)  # λ, weight of the prototype distance


class FedProxParams(NoParams):
    mu: float = Field(0.01, ge=0)


class FedRepParams(NoParams):
    head_epochs: int | None = Field(None, ge=0)  # None: the run's local_epochs
    body_epochs: int = Field(1, ge=0)


class FedRoDParams(NoParams):
    balanced: bool = True  # the generic head's balanced softmax; False: plain cross-entropy


class FedSAMParams(NoParams):
    rho: float = Field(0.05, ge=0)  # ρ, the ascent radius (SAM's and Qu et al.'s 0.05 [paper])


class FedTRParams(NoParams):
    lambda_r: float = Field(1.0, ge=0)  # λ_R, weight of the centroid term R (spec A2 [proposal])
    r_reduction: Literal["mse", "sum_dim_mean_batch"] = "mse"  # FedPAC/FedProto MSE, or Eq. 4's sum over dims
    alpha_g: float = Field(0.01, ge=0)  # α_G of G (FedDC alpha_coef); literal Eq. 3 would be 2
    adaptive_alpha: bool = False  # FedDC: α_i = α_G·mean(n)/n_i
    drift_update: Literal["feddc", "grad"] = "feddc"  # spec §1.4 variant B (default) or A
    drift_lr: float | None = Field(None, gt=0)  # η_g of variant A; None = the client learning rate η_f
    centroid_batch_size: int = Field(1000, gt=0)


class FedTripParams(NoParams):
    mu: float = Field(0.4, ge=0)  # 1.0 for the MLP experiments, 0.4 otherwise (spec §1.5)
    xi_rule: Literal["inverse_gap", "gap", "const"] = "inverse_gap"
    # fedtripemd / fedcrac divide both coefficients by the local epochs E (spec §1.5); same for E = 1.
    epoch_scaled: bool = False


class FedYogiParams(FedAdamParams):
    """FedAdam's parameters; only the second-moment rule differs (Reddi et al. Alg. 2)."""


class L2SGDParams(NoParams):
    lam: float = Field(0.1, ge=0)  # λ, the pull toward the average
    p: float = Field(0.5, gt=0, le=1)  # probability of an averaging step (per round)


class LGMixParams(NoParams):
    history: bool = True  # λ̄ = running mean of λ (LG-Mix §3.3); false: Table 4 "w/o history"
    center: bool = True  # [code] centred covariance; false: the paper's Σ h hᵀ
    drop_smallest: bool = True  # [code] sum of all singular values but the smallest (ada_dim = −1)
    fixed_lambda: float | None = Field(None, ge=0, le=1)  # constant λ instead of Eq. 6

    @classmethod
    def result_revision(cls, spec: RunSpec) -> int:
        # 2: personal evaluation does not complete Eq. 2 (revision 1's runs let it change training under partial
        # participation); with every client in every round the results are the same, so they keep revision 1
        return 2 if spec.clients_per_round < spec.num_clients else 1


class LocalParams(NoParams):
    loss: Literal["ce", "dr"] = "ce"  # the local objective: the task loss, or L_DR through a frozen ETF


class MoFedSAMParams(FedSAMParams):
    alpha: float = Field(0.1, gt=0, le=1)  # α of v = α·g̃ + (1 − α)·Δ (Qu et al. Alg. 3; FedCM's 0.1 [paper])
    server_lr: float = Field(1.0, gt=0)  # η_g


class MoonParams(NoParams):
    mu: float = Field(1.0, ge=0)
    tau: float = Field(0.5, gt=0)
    representation: Literal["features", "pre_activation"] = "features"


class PerFedAvgParams(NoParams):
    beta: float = Field(1e-3, gt=0)
    adapt_steps: int = Field(1, ge=0)


class PFedMeParams(NoParams):
    lam: float = Field(15.0, gt=0)  # λ, the Moreau envelope's regularisation
    inner_steps: int = Field(5, ge=1)  # K, steps of the inner solver for θ_i per outer step
    personal_lr: float = Field(0.1, gt=0)  # the inner solver's learning rate
    beta: float = Field(1.0, gt=0)  # β, the server's step towards the clients' average


class ScaffoldParams(NoParams):
    server_lr: float = Field(1.0, gt=0)  # η_g
    control_update: Literal["paper", "mean"] = "paper"
    momentum_corrected_steps: bool = True


class SlowMoParams(NoParams):
    beta: float = Field(0.9, ge=0, lt=1)  # slow momentum β
    slow_lr: float = Field(1.0, gt=0)  # slow learning rate α

    @classmethod
    def result_revision(cls, spec: RunSpec) -> int:
        # 2: with β = 0 and α = 1 (its FedAvg setting) the server returns FedAvg's average itself, bit for bit, where
        # 0.1.0 computed w − α(w − w̄)/α, which rounds otherwise; every other β and α trains as before
        params = spec.algorithm_params
        return 2 if params.get("beta", 0.9) == 0 and params.get("slow_lr", 1.0) == 1 else 1
