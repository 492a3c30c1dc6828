"""RunSpec: the single contract between recipes and the engine.

A RunSpec is frozen plain data: it holds everything that determines a run's result. Its canonical JSON
(sorted keys, normalised numbers) hashes to ``spec_hash``, the run's identity in the registry. Device,
worker count, paths and table labels are *not* part of it.

A spec is *resolved* when recipes are compiled (``fedbench.recipes.resolve.resolve_spec``): every plug-in
parameter's default filled in, and the fields derived from the plug-ins (``RESOLVED_KEYS``) set, so that
hashing a spec reads nothing but the spec. This module imports no plug-in and no torch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES, Need, unmet_need
from fedbench.vocab.metrics import EVAL_METRICS

PLUGIN_KINDS = ("algorithm", "dataset", "model", "partition")
# The registry stores a run's seed in a signed 64-bit integer column (SQLite INTEGER, PostgreSQL BIGINT)
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def seed_out_of_range(seeds: Iterable[int]) -> str | None:
    """Why the first of ``seeds`` that the registry cannot store is refused (None if every one fits)."""
    for seed in seeds:
        if not SEED_MIN <= seed <= SEED_MAX:
            return f"seed {seed} does not fit the registry's 64-bit integers; give one from {SEED_MIN} to {SEED_MAX}"
    return None


class HashNeutral:
    """Marks a field (or plug-in parameter) added after runs were registered with the value that keeps the old
    behaviour: while the field holds that value it is left out of the canonical JSON, so the ``spec_hash`` of
    every existing run stays the same. ``Annotated[int, HashNeutral(0)] = 0``. The value is frozen: change
    the field's default if you must, never this value (tests/papers/test_spec_hashes.py pins every shipped cell)."""

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return f"HashNeutral({self.value!r})"


def neutral_fields(model: type[BaseModel]) -> dict[str, Any]:
    """{field: hash-neutral value} of a pydantic model's fields marked with ``HashNeutral``."""
    return {
        name: marker.value
        for name, info in model.model_fields.items()
        for marker in info.metadata
        if isinstance(marker, HashNeutral)
    }


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OptimizerSpec(_Strict):
    name: Literal["sgd", "adam"] = "sgd"
    lr: float = Field(0.01, gt=0)
    momentum: float = Field(0.0, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0)
    nesterov: bool = False
    betas: tuple[float, float] = (0.9, 0.999)


class ScheduleSpec(_Strict):
    """Client learning rate as a function of the round (1-indexed).

    constant: lr.  step: lr · gamma^(number of milestones ≤ round).  exponential: lr · gamma^(round-1).
    """

    name: Literal["constant", "step", "exponential"] = "constant"
    milestones: tuple[int, ...] = ()
    gamma: float = Field(1.0, gt=0)

    def factor(self, round_index: int) -> float:
        if self.name == "step":
            return self.gamma ** sum(1 for m in self.milestones if round_index >= m)
        if self.name == "exponential":
            return self.gamma ** (round_index - 1)
        return 1.0


class AffineSpec(_Strict):
    """Random affine as torchvision's RandomAffine(degrees, translate, scale), batched."""

    degrees: float = Field(0.0, ge=0)
    translate: tuple[float, float] = (0.0, 0.0)
    scale: tuple[float, float] = (1.0, 1.0)


class AugmentationSpec(_Strict):
    """Training augmentation, applied batched on the device in this order: random crop (``crop_padding``),
    horizontal flip, random affine, Cutout (``cutout``: side in pixels of one zeroed square per image,
    DeVries & Taylor 2017; 0 = off). The image-size bound of ``cutout`` is checked against the data set when
    a recipe is compiled (``fedbench.recipes.validate.check_augmentation``)."""

    crop_padding: int = Field(0, ge=0)
    horizontal_flip: bool = False
    affine: AffineSpec | None = None
    # strict: a bool or 16.5 is an error, not 1 / a silent cast; added in 0.1 after runs existed, hence HashNeutral
    cutout: Annotated[int, HashNeutral(0)] = Field(0, ge=0, strict=True)


class FinetuneSpec(_Strict):
    """Fine-tune then evaluate ("-FT", two-step personalised FL; FedDr+ §1.6, §3.2): after the last
    round every client fine-tunes a copy of the global model on its own training split and is evaluated
    on its own test split. Defaults are FedDr+ spec's [proposal] (FedBABU convention): 5 epochs, SGD
    lr 1e-3 momentum 0.9, whole model, CE, starting from the best-round global model. The values of ``loss``
    added later (``dr``, ``dr_plus``) leave every earlier spec's canonical JSON, hence its hash, unchanged."""

    epochs: int = Field(5, ge=0)
    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = Field(1e-3, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0)
    batch_size: int | None = Field(None, ge=1)  # None: the run's batch_size
    part: Literal["full", "head", "body"] = "full"  # which parameters are fine-tuned
    # ce: plain CE; method: the algorithm's own local objective (its regularizers included); dr / dr_plus: FedDr+'s
    # L_DR / L_Dr+ = 0.9·L_DR + 0.1·L_FD whatever the algorithm (needs an ``etf`` classifier; FedDr+ Table 8)
    loss: Literal["ce", "method", "dr", "dr_plus"] = "ce"
    # final: the last round's global model; best: the round with the best global test accuracy
    # (FedDr+ [code] best_model.pt); best_val: the best mean personal validation accuracy
    start: Literal["final", "best", "best_val"] = "best"

    def optimizer_spec(self) -> OptimizerSpec:
        return OptimizerSpec(name=self.optimizer, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay)


# parameters of each ``client_test`` source (those of fedbench.data.partition.class_matched_test_sets)
CLIENT_TEST_PARAMS: dict[str, tuple[str, ...]] = {
    "split": (),
    "class_matched": ("disjoint", "cap_per_class"),
    "natural": (),
}


class RunSpec(_Strict):
    algorithm: str
    algorithm_params: dict[str, Any] = {}
    dataset: str
    dataset_params: dict[str, Any] = {}
    model: str
    model_params: dict[str, Any] = {}
    partition: str = "iid"
    partition_params: dict[str, Any] = {}
    num_clients: int = Field(10, ge=1)
    clients_per_round: int = Field(10, ge=1)
    rounds: int = Field(10, ge=1)
    local_epochs: int = Field(1, ge=0)
    local_steps: int | None = Field(None, ge=1)  # if set, a fixed number of SGD steps replaces epochs
    batch_size: int = Field(32, ge=1)
    drop_last: bool = False
    optimizer: OptimizerSpec = OptimizerSpec()
    lr_schedule: ScheduleSpec = ScheduleSpec()
    augmentation: AugmentationSpec = AugmentationSpec()
    clip_grad_norm: float | None = Field(None, gt=0)
    # the order of a client's mini-batches: "shuffle", a fresh permutation of its training samples every epoch (what
    # every paper's SGD means), or "fixed", its samples in their stored order in every epoch of every round (Plato's
    # trainers, FedTrip's code base: DataLoader(shuffle=False) over a sampler re-created alike each round; with
    # partition_params.draw_order the stored order is the order that sampler yields). Added later, hence
    # hash-neutral at "shuffle"
    batch_order: Annotated[Literal["shuffle", "fixed"], HashNeutral("shuffle")] = "shuffle"
    # the weights p_k of the server's average over the round's clients: "samples", p_k = n_k / Σ n (McMahan et al.
    # Eq. 1, and every paper's Eq. of FedAvg aggregation), or "uniform", p_k = 1 / |S_t| (microsoft/PersonalizedFL's
    # util/modelsel.py: client_weights = 1 / n_clients). Added later, hence hash-neutral at "samples"
    client_weighting: Annotated[Literal["samples", "uniform"], HashNeutral("samples")] = "samples"
    # arithmetic of CUDA matmuls/convolutions: "fp32" (TF32 off) or "tf32" (``engine/accel.py``); no effect on a
    # CPU. It changes results, so it is part of the spec; added later, hence hash-neutral at "fp32"
    precision: Annotated[Literal["fp32", "tf32"], HashNeutral("fp32")] = "fp32"
    eval_every: int = Field(1, ge=1)
    # per-round diagnostics to record (``fedbench/vocab/diagnostics.py``), on the rounds ``diagnoses`` picks: every
    # ``diagnostics_every``-th round, the last, and those of ``diagnostics_rounds`` (a round past ``rounds``, as at a
    # smaller scale, is ignored). They never change training, but a run records them only when asked, so they are
    # part of the spec; added later, hence hash-neutral at their defaults
    diagnostics: Annotated[tuple[Literal[DIAGNOSTIC_NAMES], ...], HashNeutral(())] = ()  # type: ignore[valid-type]
    diagnostics_every: Annotated[int, HashNeutral(1)] = Field(1, ge=1)
    diagnostics_rounds: Annotated[tuple[int, ...], HashNeutral(())] = ()
    eval_mode: Literal["global", "personal", "both"] = "global"
    client_test_fraction: float = Field(0.0, ge=0, lt=1)  # per-client test split for personal evaluation
    client_val_fraction: float = Field(0.0, ge=0, lt=1)  # per-client validation split (validation-selected figures)
    # how those splits are cut from a client's partition: "random" = one shuffle, test then validation first
    # (fedbench.data.federated); "class_ordered" = within each class in the data set's order, training first, then
    # test, then validation (PersonalizedFL's "evenly" split, fedbench.data.partition.class_ordered_split)
    client_split: Annotated[Literal["random", "class_ordered"], HashNeutral("random")] = "random"
    # where per-client test sets come from: "split" = client_test_fraction of the client's partition;
    # "class_matched" = drawn from the global test set to match the client's training classes (FedDr+ §2.3,
    # params disjoint / cap_per_class); "natural" = the global test samples of the client's natural group
    client_test: Annotated[Literal["split", "class_matched", "natural"], HashNeutral("split")] = "split"
    client_test_params: Annotated[dict[str, Any], HashNeutral({})] = {}
    eval_metrics: tuple[Literal[EVAL_METRICS], ...] = ()  # type: ignore[valid-type]  # per-client metrics besides accuracy
    finetune: FinetuneSpec | None = None  # fine-tune then evaluate after the last round
    seed: Annotated[int, Field(ge=SEED_MIN, le=SEED_MAX)] = 0
    scale: str = "full"
    synthetic: bool = False
    # Derived from the plug-ins when the spec is resolved (RESOLVED_KEYS; a recipe never sets them):
    # which revision of the method's results this spec gets (``NoParams.result_revision``): 1 = unchanged since
    # 0.1.0; a fix that changes what the spec trains to raises it, so the hash moves and old runs are not reused
    algorithm_revision: Annotated[int, HashNeutral(1)] = Field(1, ge=1)
    # {kind: {parameter: value}}: the plug-in's parameters marked ``HashNeutral`` and the value at which each is
    # left out of the canonical JSON (never part of it itself)
    neutral_params: dict[Literal[PLUGIN_KINDS], dict[str, Any]] = {}  # type: ignore[valid-type]
    # {kind: code} of each plug-in from outside fedbench the spec uses (``fedbench.plugins.Plugin.code``): the
    # sha256 of its source ("sha256:…"), or the revision it declares ("MODULE revision N"), so that a run trained by
    # an edited plug-in is never taken for the earlier result. Empty for fedbench's own plug-ins: hash-neutral at {}
    plugin_code: Annotated[dict[Literal[PLUGIN_KINDS], str], HashNeutral({})] = {}  # type: ignore[valid-type]

    @field_validator("diagnostics")
    @classmethod
    def _catalogue_order(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        """The names in catalogue order: one set of diagnostics is one spec, whatever order a recipe lists them in."""
        if len(set(names)) != len(names):
            raise ValueError("diagnostics names a diagnostic twice")
        return tuple(name for name in DIAGNOSTIC_NAMES if name in names)

    @model_validator(mode="after")
    def _consistent(self) -> RunSpec:
        if self.clients_per_round > self.num_clients:
            raise ValueError(f"clients_per_round={self.clients_per_round} exceeds num_clients={self.num_clients}")
        split = self.client_test == "split"
        if self.eval_mode != "global" and split and self.client_test_fraction <= 0:
            raise ValueError(
                f"eval_mode={self.eval_mode!r} needs client_test_fraction > 0 (or client_test = "
                "'class_matched' / 'natural')"
            )
        if not split and self.client_test_fraction > 0:
            raise ValueError(
                f"client_test={self.client_test!r} draws client test sets from the global test set; "
                "set client_test_fraction = 0"
            )
        allowed = CLIENT_TEST_PARAMS[self.client_test]
        unknown = sorted(set(self.client_test_params) - set(allowed))
        if unknown:
            raise ValueError(
                f"client_test={self.client_test!r} has no parameter {', '.join(map(repr, unknown))}"
                + (f"; known: {', '.join(allowed)}" if allowed else "")
            )
        if self.client_test_fraction + self.client_val_fraction >= 1:
            raise ValueError("client_test_fraction + client_val_fraction must stay below 1")
        if self.client_split != "random" and self.client_test_fraction + self.client_val_fraction <= 0:
            raise ValueError(
                f"client_split={self.client_split!r} cuts the clients' test and validation splits; set "
                "client_test_fraction or client_val_fraction > 0"
            )
        if self.finetune is not None:
            if split and self.client_test_fraction <= 0:
                raise ValueError(
                    "finetune needs client_test_fraction > 0 or client_test = 'class_matched' / 'natural' "
                    "(clients are evaluated on their own test sets)"
                )
            if self.finetune.start == "best" and self.eval_mode == "personal":
                raise ValueError(
                    "finetune.start = 'best' selects on global test accuracy; use eval_mode 'global' or 'both'"
                )
            if self.finetune.start == "best_val" and (self.client_val_fraction <= 0 or self.eval_mode == "global"):
                raise ValueError(
                    "finetune.start = 'best_val' needs client_val_fraction > 0 and eval_mode 'personal' or 'both'"
                )
        if self.eval_metrics and self.eval_mode == "global":
            raise ValueError("eval_metrics are computed per client: use eval_mode 'personal' or 'both'")
        self._check_diagnostics()
        return self

    def _check_diagnostics(self) -> None:
        if not self.diagnostics and (self.diagnostics_every != 1 or self.diagnostics_rounds):
            raise ValueError("diagnostics_every and diagnostics_rounds pick the rounds of diagnostics: set diagnostics")
        if any(r < 1 for r in self.diagnostics_rounds):
            raise ValueError("diagnostics_rounds are rounds, 1-based")
        has: dict[Need, bool] = {
            "personal_evaluation": self.eval_mode != "global",
            "validation_split": self.client_val_fraction > 0,
        }
        refused = unmet_need(self.diagnostics, has)  # the catalogue's needs the spec decides
        if refused is not None:
            raise ValueError(refused)

    def diagnoses(self, round_index: int) -> bool:
        """Whether round ``round_index`` (1-based) records ``diagnostics``: every ``diagnostics_every``-th round, the
        last, and those of ``diagnostics_rounds``; never when none is asked for."""
        if not self.diagnostics:
            return False
        every = round_index % self.diagnostics_every == 0 or round_index == self.rounds
        return every or round_index in self.diagnostics_rounds

    def evaluates(self, round_index: int) -> bool:
        """Whether round ``round_index`` (1-based) is evaluated: every ``eval_every``-th round and always the last,
        so every run ends with its final figures."""
        return round_index % self.eval_every == 0 or round_index == self.rounds

    def _hashed_data(self) -> dict[str, Any]:
        """The spec as JSON data, less ``neutral_params`` and the fields (and plug-in parameters) that hold their
        ``HashNeutral`` value: what the canonical JSON writes."""
        data = _without_neutral(type(self), self.model_dump(mode="json"))
        del data["neutral_params"]
        for kind, neutral in self.neutral_params.items():
            params = data[f"{kind}_params"]
            for key, value in neutral.items():
                if key in params and params[key] == _normalise(value):
                    del params[key]
        return data

    def canonical_json(self) -> str:
        """The spec as canonical JSON, less ``neutral_params`` and the fields (and plug-in parameters) that hold
        their ``HashNeutral`` value."""
        return canonical_json(self._hashed_data())

    @property
    def spec_hash(self) -> str:
        return _digest(self.canonical_json())

    def with_seeds(self, seeds: Iterable[int]) -> list[tuple[RunSpec, str]]:
        """(this spec at the seed, its ``spec_hash``) for each of ``seeds`` (plain ints): the specs and hashes that
        setting each seed and hashing would give, for the cost of one canonical JSON: the seed is the only field
        that differs, so each seed is written into that JSON in its place. The copies share this spec's (read-only)
        parameter dicts. A recipe with thousands of seeds compiles in a fraction of the time."""
        seeds = list(seeds)
        if any(type(seed) is not int for seed in seeds):  # a bool or a str seed: validated one by one
            raise TypeError(f"with_seeds takes int seeds, not {seeds!r}")
        data = self._hashed_data()
        data["seed"] = _SEED_MARK
        parts = canonical_json(data).split(json.dumps(_SEED_MARK))
        copies = [self.model_copy(update={"seed": seed}) for seed in seeds]
        if len(parts) != 2:  # the mark written elsewhere too (a parameter holding it): hash each copy
            return [(copy, copy.spec_hash) for copy in copies]
        head, tail = parts
        # json.dumps writes an int as str(int) does
        return [(copy, _digest(f"{head}{seed}{tail}")) for copy, seed in zip(copies, seeds)]


# The seed's place in a spec's canonical JSON (``RunSpec.with_seeds``): a string no spec holds.
_SEED_MARK = "\x00seed\x00"


def spec_warnings(spec: RunSpec) -> list[str]:
    """Settings of ``spec`` that change nothing, one line each (``fedbench run`` prints them before training). Client
    test sets drawn from the global test set (``client_test`` = class_matched | natural) are read by personal
    evaluation and fine-tuning only: under ``eval_mode = "global"`` without ``finetune`` the global model is scored on
    the global test set and the setting is silently ignored (while still naming another spec hash)."""
    if spec.client_test != "split" and spec.eval_mode == "global" and spec.finetune is None:
        return [
            f"client_test = {spec.client_test!r} does nothing under eval_mode = 'global' (only the global model is "
            "scored, on the global test set); set eval_mode = 'personal' or 'both' to score each client on its own "
            "test set"
        ]
    return []


def _digest(canonical: str) -> str:
    """The ``spec_hash`` of a canonical JSON: the first 16 hex digits of its sha256."""
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _model_type(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (``X``, ``X | None``, ``Annotated[X, ...]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is not None:
        for arg in get_args(annotation):
            found = _model_type(arg)
            if found is not None:
                return found
    return None


@cache
def _hash_layout(model: type[BaseModel]) -> tuple[dict[str, Any], dict[str, type[BaseModel]]]:
    """(hash-neutral values, nested models) of a spec section's fields: fixed per class, so computed once."""
    nested = {
        name: found for name, info in model.model_fields.items() if (found := _model_type(info.annotation)) is not None
    }
    return {k: _normalise(v) for k, v in neutral_fields(model).items()}, nested


def _without_neutral(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    neutral, nested = _hash_layout(model)
    for name, value in neutral.items():
        if name in data and data[name] == value:
            del data[name]
    for name, section in nested.items():
        if isinstance(data.get(name), dict):
            _without_neutral(section, data[name])
    return data


def _normalise(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 else float(repr(value))
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


def canonical_json(data: Any) -> str:
    """Sorted keys, no whitespace, integral floats written as ints (so 0.1 and 1e-1, 2 and 2.0 agree)."""
    return json.dumps(_normalise(data), sort_keys=True, separators=(",", ":"))


# The fields resolution derives from the plug-ins, and those a recipe's setup may set.
RESOLVED_KEYS = ("algorithm_revision", "neutral_params", "plugin_code")
SETUP_KEYS = tuple(key for key in RunSpec.model_fields if key not in RESOLVED_KEYS)
