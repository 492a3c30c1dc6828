"""The client learning-rate schedules at several rounds, and every rule of ``RunSpec`` and of a recipe's
structure that rejects an invalid combination: one accepted and one rejected case per rule, the accepted one
as close to the boundary as the rule allows, so a rule moved by one step fails one of them."""

from __future__ import annotations

import hashlib
from typing import Annotated

import pytest
import torch
import torch.nn.functional as F

from fedbench.checkpoint.format import load_checkpoint
from fedbench.data.federated import prepare_data
from fedbench.engine import EngineOptions, run
from fedbench.engine.loop import init_model
from fedbench.recipes.resolve import resolve_spec
from fedbench.seeding import torch_generator
from fedbench.spec import HashNeutral, RunSpec, ScheduleSpec, _Strict


def test_spec_hash_is_stable_and_canonical():
    def resolved(**fields):  # as a recipe compiles it
        return resolve_spec(fields)

    a = resolved(
        algorithm="fedprox",
        algorithm_params={"mu": 0.01},
        dataset="digits",
        model="digits_mlp",
        optimizer={"lr": 0.1, "momentum": 0.9},
    )
    b = resolved(
        model="digits_mlp",
        dataset="digits",
        algorithm="fedprox",
        algorithm_params={"mu": 1e-2},
        optimizer={"momentum": 0.9, "lr": 0.1},
    )
    assert a.spec_hash == b.spec_hash
    # integral floats and ints hash alike (2 == 2.0 in TOML-written recipes)
    c = resolved(algorithm="fedavg", dataset="digits", model="digits_mlp", rounds=2, optimizer={"lr": 1})
    d = resolved(algorithm="fedavg", dataset="digits", model="digits_mlp", rounds=2, optimizer={"lr": 1.0})
    assert c.spec_hash == d.spec_hash
    assert a.spec_hash != resolved(**{**a.model_dump(), "seed": 1}).spec_hash
    # Pinned: a change here silently orphans every registry; change it only with a registry migration.
    assert c.canonical_json().startswith('{"algorithm":"fedavg","algorithm_params":{"regularizers":[]}')
    assert len(a.spec_hash) == 16


BASE = dict(
    algorithm="fedavg",
    dataset="digits",
    model="digits_mlp",
    model_params={"hidden": 8},
    partition="iid",
    num_clients=4,
    clients_per_round=2,
    rounds=2,
    batch_size=64,
)


# ------------------------------------------------------------------------------------------- LR schedules
@pytest.mark.parametrize(
    "schedule, factors",
    [
        ({}, {1: 1.0, 2: 1.0, 9: 1.0}),
        ({"name": "constant", "gamma": 0.5}, {1: 1.0, 7: 1.0}),  # constant ignores gamma
        # lr · γ^(r − 1): round 1 trains at lr itself
        ({"name": "exponential", "gamma": 0.5}, {1: 1.0, 2: 0.5, 3: 0.25, 6: 0.5**5}),
        ({"name": "exponential", "gamma": 0.99}, {1: 1.0, 101: 0.99**100}),
        # lr · γ^(number of milestones ≤ r): the decay applies from the milestone round on
        ({"name": "step", "milestones": [3, 5], "gamma": 0.1}, {1: 1.0, 2: 1.0, 3: 0.1, 4: 0.1, 5: 0.1**2, 9: 0.1**2}),
        ({"name": "step", "milestones": [2], "gamma": 0.5}, {1: 1.0, 2: 0.5, 100: 0.5}),
        ({"name": "step", "milestones": [], "gamma": 0.5}, {1: 1.0, 50: 1.0}),
    ],
)
def test_schedule_factor_at_several_rounds(schedule, factors):
    spec = ScheduleSpec(**schedule)
    for round_index, factor in factors.items():
        assert spec.factor(round_index) == pytest.approx(factor, rel=1e-12), round_index


@pytest.mark.parametrize(
    "schedule",
    [{"name": "exponential", "gamma": 0.5}, {"name": "step", "milestones": [2], "gamma": 0.2}],
)
def test_the_engine_trains_round_t_at_the_scheduled_lr(tmp_path, sink, schedule):
    """One client holding all the data: the run equals mini-batch SGD whose lr is set to lr·factor(t) in
    round t (written out by hand: γ^(t−1), or γ once round t reaches the milestone)."""
    spec = RunSpec(
        **{**BASE, "num_clients": 1, "clients_per_round": 1, "rounds": 3, "optimizer": {"lr": 0.2}},
        lr_schedule=schedule,
    )
    path = tmp_path / "run.pt"
    run(spec, sink, EngineOptions(checkpoint_path=path))
    trained = load_checkpoint(path, spec.spec_hash)["server"]["params"]

    data = prepare_data(spec, torch.device("cpu"))
    model = init_model(spec, data.num_classes, data.input_shape, torch.device("cpu"))
    indices = data.client_train[0]
    for round_index in (1, 2, 3):
        if schedule["name"] == "exponential":
            lr = 0.2 * 0.5 ** (round_index - 1)
        else:
            lr = 0.2 * (0.2 if round_index >= 2 else 1.0)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        order = indices[torch.randperm(len(indices), generator=torch_generator(spec.seed, "client", round_index, 0))]
        for start in range(0, len(order), spec.batch_size):
            batch = order[start : start + spec.batch_size]
            loss = F.cross_entropy(model(data.tensors.train_x[batch]), data.tensors.train_y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert torch.equal(trained, torch.nn.utils.parameters_to_vector(model.parameters()).detach())


# ------------------------------------------------------------------------------------------- RunSpec rules
FINETUNE_NEEDS_TESTS = (
    "finetune needs client_test_fraction > 0 or client_test = 'class_matched' / 'natural' "
    "(clients are evaluated on their own test sets)"
)


BEST_VAL_NEEDS = "finetune.start = 'best_val' needs client_val_fraction > 0 and eval_mode 'personal' or 'both'"


# (accepted setup, rejected setup, the rejection): each rule at its boundary. The rejection is the whole one-line
# message a user reads, or (for a field's bound) the name of the field the error points at.
SPEC_RULES = [
    (
        {"num_clients": 4, "clients_per_round": 4},
        {"num_clients": 4, "clients_per_round": 5},
        "clients_per_round=5 exceeds num_clients=4",
    ),
    (
        {"eval_mode": "personal", "client_test_fraction": 0.01},
        {"eval_mode": "personal", "client_test_fraction": 0.0},
        "eval_mode='personal' needs client_test_fraction > 0 (or client_test = 'class_matched' / 'natural')",
    ),
    (
        {"eval_mode": "global"},
        {"eval_mode": "both"},
        "eval_mode='both' needs client_test_fraction > 0 (or client_test = 'class_matched' / 'natural')",
    ),
    (
        {"eval_mode": "both", "client_test": "class_matched"},
        {"eval_mode": "both", "client_test": "class_matched", "client_test_fraction": 0.1},
        "client_test='class_matched' draws client test sets from the global test set; set client_test_fraction = 0",
    ),
    (
        {"eval_mode": "both", "client_test": "natural"},
        {"eval_mode": "both", "client_test": "natural", "client_test_fraction": 0.1},
        "client_test='natural' draws client test sets from the global test set; set client_test_fraction = 0",
    ),
    (
        {"eval_mode": "both", "client_test": "class_matched", "client_test_params": {"disjoint": True}},
        {"eval_mode": "both", "client_test": "class_matched", "client_test_params": {"disjont": True}},
        "client_test='class_matched' has no parameter 'disjont'; known: disjoint, cap_per_class",
    ),
    (
        {
            "eval_mode": "both",
            "client_test": "class_matched",
            "client_test_params": {"disjoint": True, "cap_per_class": 2},
        },
        {"eval_mode": "both", "client_test": "class_matched", "client_test_params": {"disjont": True, "cap": 2}},
        "client_test='class_matched' has no parameter 'cap', 'disjont'; known: disjoint, cap_per_class",
    ),
    (
        {"eval_mode": "both", "client_test_fraction": 0.2},
        {"eval_mode": "both", "client_test_fraction": 0.2, "client_test_params": {"disjoint": True}},
        "client_test='split' has no parameter 'disjoint'",
    ),
    (
        {"client_test_fraction": 0.5, "client_val_fraction": 0.4},
        {"client_test_fraction": 0.5, "client_val_fraction": 0.5},
        "client_test_fraction + client_val_fraction must stay below 1",
    ),
    (
        {"client_split": "class_ordered", "client_val_fraction": 0.25},
        {"client_split": "class_ordered"},
        "client_split='class_ordered' cuts the clients' test and validation splits; set client_test_fraction or "
        "client_val_fraction > 0",
    ),
    (
        {"client_test_fraction": 0.0, "client_val_fraction": 0.75},
        {"client_test_fraction": 0.25, "client_val_fraction": 0.75},
        "client_test_fraction + client_val_fraction must stay below 1",
    ),
    (
        {"finetune": {"start": "final"}, "client_test_fraction": 0.2},
        {"finetune": {"start": "final"}},
        FINETUNE_NEEDS_TESTS,
    ),
    (
        {"finetune": {"start": "final"}, "client_test": "natural"},
        {"finetune": {"start": "final"}, "client_test": "split"},
        FINETUNE_NEEDS_TESTS,
    ),
    (
        {"finetune": {"start": "best"}, "client_test_fraction": 0.2, "eval_mode": "both"},
        {"finetune": {"start": "best"}, "client_test_fraction": 0.2, "eval_mode": "personal"},
        "finetune.start = 'best' selects on global test accuracy; use eval_mode 'global' or 'both'",
    ),
    (
        {"finetune": {"start": "final"}, "client_test_fraction": 0.2, "eval_mode": "personal"},
        {"finetune": {"start": "best"}, "client_test_fraction": 0.2, "eval_mode": "personal"},
        "finetune.start = 'best' selects on global test accuracy; use eval_mode 'global' or 'both'",
    ),
    (
        {
            "finetune": {"start": "best_val"},
            "client_test_fraction": 0.2,
            "client_val_fraction": 0.1,
            "eval_mode": "personal",
        },
        {
            "finetune": {"start": "best_val"},
            "client_test_fraction": 0.2,
            "client_val_fraction": 0.0,
            "eval_mode": "personal",
        },
        BEST_VAL_NEEDS,
    ),
    (
        {
            "finetune": {"start": "best_val"},
            "client_test_fraction": 0.2,
            "client_val_fraction": 0.1,
            "eval_mode": "both",
        },
        {
            "finetune": {"start": "best_val"},
            "client_test_fraction": 0.2,
            "client_val_fraction": 0.1,
            "eval_mode": "global",
        },
        BEST_VAL_NEEDS,
    ),
    (
        {"diagnostics": ["weight_divergence", "mixing_weights"]},
        {"diagnostics": ["weight_divergence", "weight_divergence"]},
        "diagnostics names a diagnostic twice",
    ),
    (
        {"diagnostics": ["weight_divergence"], "diagnostics_every": 5},
        {"diagnostics_every": 5},
        "diagnostics_every and diagnostics_rounds pick the rounds of diagnostics: set diagnostics",
    ),
    (
        {"diagnostics": ["weight_divergence"], "diagnostics_rounds": [3]},
        {"diagnostics_rounds": [3]},
        "diagnostics_every and diagnostics_rounds pick the rounds of diagnostics: set diagnostics",
    ),
    (
        {"eval_metrics": ["auc"], "eval_mode": "personal", "client_test_fraction": 0.2},
        {"eval_metrics": ["auc"], "eval_mode": "global"},
        "eval_metrics are computed per client: use eval_mode 'personal' or 'both'",
    ),
    # field bounds: the last accepted value beside the first rejected one
    ({"num_clients": 1, "clients_per_round": 1}, {"num_clients": 0, "clients_per_round": 1}, ("field", "num_clients")),
    ({"clients_per_round": 1}, {"clients_per_round": 0}, ("field", "clients_per_round")),
    ({"rounds": 1}, {"rounds": 0}, ("field", "rounds")),
    ({"local_epochs": 0}, {"local_epochs": -1}, ("field", "local_epochs")),
    ({"local_steps": 1}, {"local_steps": 0}, ("field", "local_steps")),
    ({"batch_size": 1}, {"batch_size": 0}, ("field", "batch_size")),
    ({"optimizer": {"lr": 1e-12}}, {"optimizer": {"lr": 0.0}}, ("field", "lr")),
    ({"optimizer": {"momentum": 0.0}}, {"optimizer": {"momentum": -0.1}}, ("field", "momentum")),
    ({"optimizer": {"momentum": 0.999}}, {"optimizer": {"momentum": 1.0}}, ("field", "momentum")),
    ({"optimizer": {"weight_decay": 0.0}}, {"optimizer": {"weight_decay": -1e-4}}, ("field", "weight_decay")),
    ({"lr_schedule": {"gamma": 1e-9}}, {"lr_schedule": {"gamma": 0.0}}, ("field", "gamma")),
    ({"clip_grad_norm": 1e-9}, {"clip_grad_norm": 0.0}, ("field", "clip_grad_norm")),
    ({"eval_every": 1}, {"eval_every": 0}, ("field", "eval_every")),
    ({"client_val_fraction": 0.0}, {"client_val_fraction": -0.1}, ("field", "client_val_fraction")),
    # the field's own bound, before the sum rule (which alone would also reject 1.0, naming no field)
    ({"client_val_fraction": 0.99}, {"client_val_fraction": 1.0}, ("field", "client_val_fraction")),
    ({"client_test_fraction": 0.99}, {"client_test_fraction": 1.0}, ("field", "client_test_fraction")),
    ({"augmentation": {"crop_padding": 0}}, {"augmentation": {"crop_padding": -1}}, ("field", "crop_padding")),
    ({"augmentation": {"cutout": 0}}, {"augmentation": {"cutout": -1}}, ("field", "cutout")),
    ({"augmentation": {"cutout": 2}}, {"augmentation": {"cutout": 2.0}}, ("field", "cutout")),  # strict: no silent cast
    ({"precision": "tf32"}, {"precision": "fp16"}, ("field", "precision")),
    # unknown keys, at the top and in a section, are errors naming the key (not silently ignored)
    ({"rounds": 3}, {"roundz": 3}, ("field", "roundz")),
    ({"optimizer": {"lr": 0.1}}, {"optimizer": {"lrr": 0.1}}, ("field", "lrr")),
    ({"lr_schedule": {"gamma": 0.5}}, {"lr_schedule": {"gama": 0.5}}, ("field", "gama")),
    # a plug-in name must be a string and its parameters a table: a type error naming the key, before any
    # parameter is resolved against the plug-in
    ({"algorithm": "fedprox"}, {"algorithm": None}, ("field", "algorithm")),
    ({"model": "digits_mlp"}, {"model": 3}, ("field", "model")),
    ({"model_params": {"hidden": 4}}, {"model_params": [4]}, ("field", "model_params")),
    ({"partition_params": {}}, {"partition_params": "iid"}, ("field", "partition_params")),
    (
        {"augmentation": {"affine": {"degrees": 0.0}}},
        {"augmentation": {"affine": {"degrees": -1.0}}},
        ("field", "degrees"),
    ),
    (
        {"finetune": {"epochs": 0}, "client_test_fraction": 0.2},
        {"finetune": {"epochs": -1}, "client_test_fraction": 0.2},
        ("field", "epochs"),
    ),
    (
        {"finetune": {"lr": 1e-9}, "client_test_fraction": 0.2},
        {"finetune": {"lr": 0.0}, "client_test_fraction": 0.2},
        ("field", "lr"),
    ),
    (
        {"finetune": {"momentum": 0.0}, "client_test_fraction": 0.2},
        {"finetune": {"momentum": 1.0}, "client_test_fraction": 0.2},
        ("field", "momentum"),
    ),
    (
        {"finetune": {"weight_decay": 0.0}, "client_test_fraction": 0.2},
        {"finetune": {"weight_decay": -1.0}, "client_test_fraction": 0.2},
        ("field", "weight_decay"),
    ),
    (
        {"finetune": {"batch_size": 1}, "client_test_fraction": 0.2},
        {"finetune": {"batch_size": 0}, "client_test_fraction": 0.2},
        ("field", "batch_size"),
    ),
    # the registry's seed column is a signed 64-bit integer
    ({"seed": 2**63 - 1}, {"seed": 2**63}, ("field", "seed")),
    ({"seed": -(2**63)}, {"seed": -(2**63) - 1}, ("field", "seed")),
]


@pytest.mark.parametrize("accepted, rejected, message", SPEC_RULES)
def test_every_spec_rule_accepts_its_boundary_and_rejects_past_it(accepted, rejected, message):
    from pydantic import ValidationError

    RunSpec(**{**BASE, **accepted})
    with pytest.raises(ValidationError) as raised:
        RunSpec(**{**BASE, **rejected})
    errors = raised.value.errors()
    if isinstance(message, tuple):  # a field's bound: the error points at that field
        assert [e["loc"][-1] for e in errors] == [message[1]], errors
    else:
        assert [e["msg"] for e in errors] == [f"Value error, {message}"]


def test_a_spec_and_each_of_its_sections_is_frozen():
    """A spec is a run's identity: changing a field of a built spec (or of one of its sections) is an error naming
    the field, never a silent change that its stored hash would no longer describe."""
    from pydantic import ValidationError

    spec = RunSpec(**BASE, augmentation={"affine": {}}, client_test_fraction=0.2, finetune={})
    sections = [
        (spec, "rounds", 5),
        (spec.optimizer, "lr", 0.5),
        (spec.lr_schedule, "gamma", 0.5),
        (spec.augmentation, "cutout", 4),
        (spec.augmentation.affine, "degrees", 5.0),
        (spec.finetune, "epochs", 2),
    ]
    before = spec.spec_hash
    for section, key, value in sections:
        with pytest.raises(ValidationError) as raised:
            setattr(section, key, value)
        assert [(e["type"], e["loc"]) for e in raised.value.errors()] == [("frozen_instance", (key,))]
    assert spec.spec_hash == before and spec.rounds == 2


def test_finetune_optimizer_spec_carries_the_finetune_settings():
    spec = RunSpec(
        **BASE,
        client_test_fraction=0.2,
        finetune={"optimizer": "adam", "lr": 0.003, "momentum": 0.5, "weight_decay": 0.01},
    )
    optimizer = spec.finetune.optimizer_spec()
    assert (optimizer.name, optimizer.lr, optimizer.momentum, optimizer.weight_decay) == ("adam", 0.003, 0.5, 0.01)


@pytest.mark.parametrize(
    ("rounds", "eval_every", "evaluated"),
    [(5, 2, [2, 4, 5]), (6, 2, [2, 4, 6]), (3, 1, [1, 2, 3]), (3, 5, [3]), (4, 4, [4])],
)
def test_a_spec_evaluates_every_eval_every_th_round_and_the_last(rounds, eval_every, evaluated):
    spec = RunSpec(**{**BASE, "rounds": rounds, "eval_every": eval_every})
    assert [t for t in range(1, rounds + 1) if spec.evaluates(t)] == evaluated


def test_spec_defaults_are_the_documented_ones():
    """Defaults change every hash that relies on them: RunSpec's and its sections' documented values."""
    spec = RunSpec(algorithm="fedavg", dataset="digits", model="digits_mlp")
    assert (spec.num_clients, spec.clients_per_round, spec.rounds, spec.local_epochs, spec.batch_size) == (
        10,
        10,
        10,
        1,
        32,
    )
    assert (spec.partition, spec.local_steps, spec.eval_every, spec.eval_mode, spec.seed) == (
        "iid",
        None,
        1,
        "global",
        0,
    )
    opt = spec.optimizer
    assert (opt.name, opt.lr, opt.momentum, opt.weight_decay, opt.nesterov, opt.betas) == (
        "sgd",
        0.01,
        0.0,
        0.0,
        False,
        (0.9, 0.999),
    )
    assert (spec.lr_schedule.name, spec.lr_schedule.milestones, spec.lr_schedule.gamma) == ("constant", (), 1.0)
    finetune = RunSpec(**BASE, client_test_fraction=0.2, finetune={}).finetune
    assert (finetune.epochs, finetune.optimizer, finetune.lr, finetune.momentum, finetune.part) == (
        5,
        "sgd",
        1e-3,
        0.9,
        "full",
    )
    assert (finetune.loss, finetune.start, finetune.batch_size, finetune.weight_decay) == ("ce", "best", None, 0.0)
    assert (spec.scale, spec.synthetic, spec.precision, spec.drop_last, spec.clip_grad_norm) == (
        "full",
        False,
        "fp32",
        False,
        None,
    )
    assert (spec.client_test, spec.client_test_params, spec.client_test_fraction, spec.client_val_fraction) == (
        "split",
        {},
        0.0,
        0.0,
    )
    augmentation = spec.augmentation
    assert (augmentation.crop_padding, augmentation.horizontal_flip, augmentation.affine, augmentation.cutout) == (
        0,
        False,
        None,
        0,
    )
    # an affine section given without values is the identity, as torchvision's RandomAffine(0): no rotation,
    # no translation (0, 0), scale range (1, 1)
    affine = RunSpec(**BASE, augmentation={"affine": {}}).augmentation.affine
    assert (affine.degrees, affine.translate, affine.scale) == (0.0, (0.0, 0.0), (1.0, 1.0))


# ------------------------------------------------------------------------------------------- documented values
@pytest.mark.parametrize(
    "setup",
    [
        {"optimizer": {"name": "sgd", "nesterov": True, "momentum": 0.9}},
        {"optimizer": {"name": "adam", "betas": (0.5, 0.9)}},
        {"lr_schedule": {"name": "constant"}},
        {"lr_schedule": {"name": "step", "milestones": [2], "gamma": 0.5}},
        {"lr_schedule": {"name": "exponential", "gamma": 0.9}},
        {"eval_mode": "global"},
        {"eval_mode": "personal", "client_test_fraction": 0.2},
        {"eval_mode": "both", "client_test_fraction": 0.2},
        {"eval_mode": "both", "client_test": "split", "client_test_fraction": 0.2},
        {"eval_mode": "both", "client_test": "class_matched", "client_test_params": {"cap_per_class": 3}},
        {"eval_mode": "both", "client_test": "natural"},
        *(
            {"client_test_fraction": 0.2, "eval_mode": "both", "client_val_fraction": 0.1, "finetune": finetune}
            for finetune in (
                {"optimizer": "sgd", "part": "full", "loss": "ce", "start": "final"},
                {"optimizer": "adam", "part": "head", "loss": "method", "start": "best"},
                {"part": "body", "loss": "dr", "start": "best_val"},
                {"loss": "dr_plus"},
            )
        ),
        {"augmentation": {"crop_padding": 4, "horizontal_flip": True, "affine": {"degrees": 10.0}, "cutout": 8}},
    ],
)
def test_every_documented_option_value_is_accepted_as_written(setup):
    def holds(dumped: dict, given: dict) -> None:
        for key, value in given.items():
            if isinstance(value, dict):
                holds(dumped[key], value)
            else:
                assert dumped[key] == (list(value) if isinstance(value, (tuple, list)) else value), key

    holds(RunSpec(**{**BASE, **setup}).model_dump(mode="json"), setup)


def test_canonical_json_normalises_numbers_and_sorts_keys():
    from fedbench.spec import HashNeutral, canonical_json

    data = {"s": "x", "b": True, "n": None, "f": 0.1, "i": 2.0, "l": (1.0, 2.5), "d": {3: 4.0}, "z": 1e-1}
    assert canonical_json(data) == '{"b":true,"d":{"3":4},"f":0.1,"i":2,"l":[1,2.5],"n":null,"s":"x","z":0.1}'
    # integral floats become ints while exactly representable (below 2^53), stay floats beyond
    assert canonical_json({"a": 2.0**53 - 1, "b": 1000.0}) == '{"a":9007199254740991,"b":1000}'
    assert canonical_json({"a": 2.0**53}) == '{"a":9007199254740992.0}'
    assert canonical_json({"a": False, "b": 0}) == '{"a":false,"b":0}'  # a bool is not the number 0
    assert repr(HashNeutral(0)) == "HashNeutral(0)" and repr(HashNeutral("split")) == "HashNeutral('split')"


# ------------------------------------------------------------------------------------------- spec hash by hand
def sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# The canonical JSON of resolve_spec(algorithm="fedavg", dataset="digits", model="digits_mlp"), written out by hand from
# the documented defaults: keys sorted at every level, no whitespace, integral floats as ints (lr_schedule.gamma 1.0,
# momentum 0.0 …), tuples as lists, the plug-ins' defaults filled in (digits: test_fraction 0.2, split_seed 0;
# digits_mlp: hidden 128; fedavg: no regularizers; iid: no parameters), and the fields holding their hash-neutral
# value (client_test 'split', client_test_params {}, precision 'fp32', augmentation.cutout 0) left out.
DEFAULT_CANONICAL = (
    '{"algorithm":"fedavg","algorithm_params":{"regularizers":[]},'
    '"augmentation":{"affine":null,"crop_padding":0,"horizontal_flip":false},'
    '"batch_size":32,"client_test_fraction":0,"client_val_fraction":0,"clients_per_round":10,"clip_grad_norm":null,'
    '"dataset":"digits","dataset_params":{"split_seed":0,"test_fraction":0.2},"drop_last":false,"eval_every":1,'
    '"eval_metrics":[],"eval_mode":"global","finetune":null,"local_epochs":1,"local_steps":null,'
    '"lr_schedule":{"gamma":1,"milestones":[],"name":"constant"},"model":"digits_mlp","model_params":{"hidden":128},'
    '"num_clients":10,'
    '"optimizer":{"betas":[0.9,0.999],"lr":0.01,"momentum":0,"name":"sgd","nesterov":false,"weight_decay":0},'
    '"partition":"iid","partition_params":{},"rounds":10,"scale":"full","seed":0,"synthetic":false}'
)


MINIMAL = dict(algorithm="fedavg", dataset="digits", model="digits_mlp")


def resolved(**fields):
    """The spec as a recipe compiles it."""
    return resolve_spec(fields)


def test_the_default_spec_hashes_to_the_sha256_of_its_canonical_json_written_by_hand():
    spec = resolve_spec(MINIMAL)
    assert spec.canonical_json() == DEFAULT_CANONICAL
    assert spec.spec_hash == sha16(DEFAULT_CANONICAL)
    # the hash-neutral values spelled out, and the numbers written another way, give the same identity
    spelled = resolved(
        **MINIMAL,
        precision="fp32",
        client_test="split",
        client_test_params={},
        augmentation={"cutout": 0},
        optimizer={"lr": 1e-2, "momentum": 0, "betas": [0.9, 0.999]},
        lr_schedule={"gamma": 1},
        model_params={"hidden": 128},
        dataset_params={"test_fraction": 0.2},
    )
    assert spelled.spec_hash == sha16(DEFAULT_CANONICAL)
    # a method whose fix changed its result: the revision joins the JSON (after "algorithm_params", sorted)
    revised = DEFAULT_CANONICAL.replace(
        '"algorithm_params":{"regularizers":[]},', '"algorithm_params":{"regularizers":[]},"algorithm_revision":2,'
    )
    assert spec.model_copy(update={"algorithm_revision": 2}).canonical_json() == revised
    assert spec.model_copy(update={"algorithm_revision": 2}).spec_hash == sha16(revised)


def test_with_seeds_gives_each_seed_the_spec_and_hash_of_setting_it_alone():
    """The canonical JSON is written once and each seed put in its place: the same copies and hashes as resolving
    the spec at each seed (a negative and a large seed included, and the seed the spec already has)."""
    fields = {**MINIMAL, "algorithm": "fedprox", "algorithm_params": {"mu": 0.5}, "seed": 7}
    seeds = [7, 0, -3, 2**40]
    shared = resolved(**fields).with_seeds(seeds)
    assert [copy.seed for copy, _ in shared] == seeds
    for copy, digest in shared:
        alone = resolved(**{**fields, "seed": copy.seed})
        assert copy == alone and copy.model_fields_set == alone.model_fields_set
        assert digest == alone.spec_hash == sha16(alone.canonical_json())


def test_with_seeds_hashes_each_copy_when_another_field_holds_the_seeds_placeholder():
    """The seed's placeholder written elsewhere in the JSON (a string field holding it) cannot be substituted:
    each copy is hashed on its own; a seed that is not a plain int is refused."""
    from fedbench.spec import _SEED_MARK

    spec = RunSpec(**MINIMAL, scale=_SEED_MARK)
    assert [(copy.seed, digest) for copy, digest in spec.with_seeds([1, 2])] == [
        (seed, spec.model_copy(update={"seed": seed}).spec_hash) for seed in (1, 2)
    ]
    with pytest.raises(TypeError, match=r"^with_seeds takes int seeds, not \[True\]$"):
        spec.with_seeds([True])


def test_a_spec_is_plain_data_until_resolved():
    """Building or hashing a RunSpec reads no plug-in: the defaults are the resolver's job (``resolve_spec``)."""
    plain = RunSpec(**MINIMAL)
    assert plain.algorithm_params == plain.model_params == {} and plain.algorithm_revision == 1
    assert plain.spec_hash != resolve_spec(MINIMAL).spec_hash
    assert '"model_params":{}' in plain.canonical_json()


def test_a_spec_with_every_section_set_hashes_to_its_canonical_json_written_by_hand():
    """Non-neutral values of the hash-neutral fields are in the JSON (cutout 4, precision 'tf32', client_test and
    its parameters); the affine and finetune sections carry their defaults; 1e-1 is written 0.1, 10.0 as 10."""
    spec = resolved(
        **MINIMAL,
        model_params={"hidden": 16},
        num_clients=4,
        clients_per_round=2,
        optimizer={"lr": 1e-1, "momentum": 0.9},
        lr_schedule={"name": "step", "milestones": (2,), "gamma": 0.5},
        augmentation={"affine": {}, "cutout": 4},
        precision="tf32",
        eval_mode="both",
        client_test="class_matched",
        client_test_params={"cap_per_class": 3},
        finetune={"start": "final"},
        clip_grad_norm=10.0,
        scale="smoke",
        synthetic=True,
        seed=3,
    )
    expected = (
        '{"algorithm":"fedavg","algorithm_params":{"regularizers":[]},'
        '"augmentation":{"affine":{"degrees":0,"scale":[1,1],"translate":[0,0]},"crop_padding":0,"cutout":4,'
        '"horizontal_flip":false},'
        '"batch_size":32,"client_test":"class_matched","client_test_fraction":0,"client_test_params":{"cap_per_class":3},'
        '"client_val_fraction":0,"clients_per_round":2,"clip_grad_norm":10,'
        '"dataset":"digits","dataset_params":{"split_seed":0,"test_fraction":0.2},"drop_last":false,"eval_every":1,'
        '"eval_metrics":[],"eval_mode":"both",'
        '"finetune":{"batch_size":null,"epochs":5,"loss":"ce","lr":0.001,"momentum":0.9,"optimizer":"sgd","part":"full",'
        '"start":"final","weight_decay":0},'
        '"local_epochs":1,"local_steps":null,"lr_schedule":{"gamma":0.5,"milestones":[2],"name":"step"},'
        '"model":"digits_mlp","model_params":{"hidden":16},"num_clients":4,'
        '"optimizer":{"betas":[0.9,0.999],"lr":0.1,"momentum":0.9,"name":"sgd","nesterov":false,"weight_decay":0},'
        '"partition":"iid","partition_params":{},"precision":"tf32","rounds":10,"scale":"smoke","seed":3,'
        '"synthetic":true}'
    )
    assert spec.canonical_json() == expected
    assert spec.spec_hash == sha16(expected)


class _Knob(_Strict):
    """A spec section that gained a hash-neutral field after runs were registered."""

    knob: Annotated[int, HashNeutral(0)] = 0
    size: int = 1


class _Holder(_Strict):
    plain: _Knob = _Knob()
    optional: _Knob | None = None  # as RunSpec.finetune and AugmentationSpec.affine
    none_first: None | _Knob = None
    annotated: Annotated[_Knob, "a note"] = _Knob()
    count: int = 0
    table: dict[str, int] = {}


def test_hash_neutral_fields_are_left_out_of_every_kind_of_nested_section():
    """A hash-neutral field of a section held plainly, optionally (``X | None``, ``None | X``) or annotated is left
    out while it holds its value, and kept otherwise; fields that are no section are never searched."""
    from fedbench.spec import _hash_layout, _without_neutral

    holder = _Holder(optional={}, none_first={"size": 2}, annotated={"knob": 5})
    assert _without_neutral(_Holder, holder.model_dump(mode="json")) == {
        "plain": {"size": 1},
        "optional": {"size": 1},
        "none_first": {"size": 2},
        "annotated": {"knob": 5, "size": 1},
        "count": 0,
        "table": {},
    }
    assert _without_neutral(_Holder, _Holder().model_dump(mode="json"))["optional"] is None
    # the sections of the real spec, the optional finetune and affine ones included
    from fedbench.spec import AffineSpec, AugmentationSpec, FinetuneSpec, OptimizerSpec

    assert _hash_layout(RunSpec)[1] == {
        "optimizer": OptimizerSpec,
        "lr_schedule": ScheduleSpec,
        "augmentation": AugmentationSpec,
        "finetune": FinetuneSpec,
    }
    assert _hash_layout(AugmentationSpec) == ({"cutout": 0}, {"affine": AffineSpec})
    # fixed per class, so worked out once: every spec hash (thousands per report) reuses it
    assert _hash_layout(RunSpec) is _hash_layout(RunSpec)


def test_diagnosed_rounds_are_every_nth_the_last_and_the_listed_ones():
    """``RunSpec.diagnoses``: with diagnostics asked for, every ``diagnostics_every``-th round, the last round and
    those of ``diagnostics_rounds``; with none asked for, no round."""
    base = dict(algorithm="fedavg", dataset="digits", model="digits_mlp", rounds=7)
    spec = RunSpec(**base, diagnostics=["weight_divergence"], diagnostics_every=3, diagnostics_rounds=[1])
    assert [r for r in range(1, 8) if spec.diagnoses(r)] == [1, 3, 6, 7]
    assert not any(RunSpec(**base).diagnoses(r) for r in range(1, 8))
