"""AdaProx's hyperparameters, its ``algorithm_params``: a pydantic class without torch, so that compiling a recipe
checks them and fills their defaults in without importing the method. A recipe sets them as
``algorithm_params = { mu = 0.05 }``; an unknown key or a value out of bounds is a one-line error."""

from fedbench.algorithms.params import NoParams
from pydantic import Field


class AdaProxParams(NoParams):
    mu: float = Field(0.01, ge=0)  # μ_k of a client before its first round (0: AdaProx is FedAvg)
    rate: float = Field(0.5, ge=0)  # μ_k ← μ_k·(1 + rate) when the client's loss rose, μ_k / (1 + rate) when it fell
    mu_max: float = Field(1.0, ge=0)  # the largest μ_k
