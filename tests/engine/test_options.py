"""EngineOptions (engine/options.py): the defaults train on the CPU with the settings' defaults, without a
checkpoint; a setting given by name lands in ``settings``; an options object is one frozen value a caller builds
from its own objects; and none of it changes a run's result."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from algorithm_fixtures import Sink, make_spec
from fedbench.engine import EngineOptions, run
from fedbench.engine.accel import Acceleration
from fedbench.engine.client_states import DEFAULT_MEMORY_BUDGET
from fedbench.settings import EVAL_BATCH_SIZE, Packing, Settings


def test_the_defaults_train_on_the_cpu_with_the_default_settings_without_a_checkpoint():
    options = EngineOptions()
    assert torch.device(options.device) == torch.device("cpu")
    assert options.settings == Settings() and options.settings.packing == Packing.AUTO
    assert (options.checkpoint_path, options.checkpoint_ledger, options.checkpoint_mirror) == (None, None, None)
    assert (options.arrays, options.acceleration) == (None, None)
    assert (options.on_round, options.on_warning) == (None, None)
    # the algorithms' defaults are the settings' (one default each)
    assert Settings().eval_batch_size == EVAL_BATCH_SIZE == 1000
    assert Settings().client_state_memory == DEFAULT_MEMORY_BUDGET == 1 << 30


def test_with_settings_changes_the_named_settings_and_keeps_the_rest():
    base = Settings(threads=2, fast=False)
    options = EngineOptions(settings=base, device="meta").with_settings(
        data_root="d", verify=False, packing="packed", eval_batch_size=7
    )
    assert options.settings == dataclasses.replace(
        base, data_root="d", verify=False, packing=Packing.PACKED, eval_batch_size=7
    )
    assert options.device == "meta"  # the per-process objects stay
    assert EngineOptions().with_settings(client_state_memory=0).settings.client_state_memory == 0
    assert EngineOptions(settings=base).settings is base  # the caller's settings as they are


def test_options_hold_no_setting_of_their_own():
    """How a run trains is the settings' alone: the options take no setting by name (one place for each)."""
    fields = {f.name for f in dataclasses.fields(EngineOptions)}
    assert not fields & {f.name for f in dataclasses.fields(Settings)}
    with pytest.raises(TypeError):
        EngineOptions(packing="packed")  # type: ignore[call-arg]


def test_options_are_frozen_and_replaced_field_by_field():
    options = EngineOptions().with_settings(packing="packed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.settings = Settings()  # type: ignore[misc]
    replaced = options.with_settings(eval_batch_size=10)
    assert replaced == EngineOptions(settings=Settings(packing=Packing.PACKED, eval_batch_size=10))
    assert replaced.settings.packing == Packing.PACKED  # a change keeps the settings not named
    fresh = dataclasses.replace(options, settings=Settings(verify=False))
    assert fresh.settings == Settings(verify=False)  # and a new settings value is taken whole


def test_the_speed_switches_follow_the_settings_for_the_device_unless_given():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert EngineOptions().accelerated(cpu) == Acceleration()
    assert EngineOptions().accelerated(cuda) == Acceleration(channels_last=True, fused_optimizer=True)
    compiled = EngineOptions(settings=Settings(fast=False, compile=True))
    assert compiled.accelerated(cuda) == Acceleration(compile=True)
    given = Acceleration(channels_last=True)
    assert EngineOptions(acceleration=given).accelerated(cpu) is given


def test_the_evaluation_batch_size_changes_no_figure_beyond_summation_order():
    spec = make_spec("fedavg", rounds=2)
    default, small = Sink(), Sink()
    run(spec, default)
    run(spec, small, EngineOptions().with_settings(eval_batch_size=7))
    assert [(r.train_loss, r.test_acc) for r in small.records] == [(r.train_loss, r.test_acc) for r in default.records]
    assert [r.test_loss for r in small.records] == pytest.approx([r.test_loss for r in default.records], rel=1e-6)
