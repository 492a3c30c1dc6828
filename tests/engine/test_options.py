"""EngineOptions (engine/options.py): the defaults train on the CPU, sequentially, without a checkpoint; an options
object is one frozen value a caller builds from its own settings; and none of it changes a run's result."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from algorithm_fixtures import Sink, make_spec
from fedbench.algorithms.client_states import DEFAULT_MEMORY_BUDGET
from fedbench.algorithms.context import EVAL_BATCH_SIZE
from fedbench.engine import EngineOptions, run
from fedbench.engine.accel import Acceleration


def test_the_defaults_train_on_the_cpu_sequentially_without_a_checkpoint():
    options = EngineOptions()
    assert torch.device(options.device) == torch.device("cpu")
    assert (options.packing, options.acceleration) == ("sequential", Acceleration())
    assert (options.checkpoint_path, options.checkpoint_ledger, options.checkpoint_mirror) == (None, None, None)
    assert (options.data_root, options.verify, options.arrays) == (None, True, None)
    assert options.eval_batch_size == EVAL_BATCH_SIZE == 1000
    assert options.client_state_memory == DEFAULT_MEMORY_BUDGET == 1 << 30
    assert (options.on_round, options.on_warning) == (None, None)


def test_options_are_frozen_and_replaced_field_by_field():
    options = EngineOptions(packing="packed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.packing = "sequential"  # type: ignore[misc]
    assert dataclasses.replace(options, eval_batch_size=10) == EngineOptions(packing="packed", eval_batch_size=10)


def test_the_evaluation_batch_size_changes_no_figure_beyond_summation_order():
    spec = make_spec("fedavg", rounds=2)
    default, small = Sink(), Sink()
    run(spec, default)
    run(spec, small, EngineOptions(eval_batch_size=7))
    assert [(r.train_loss, r.test_acc) for r in small.records] == [(r.train_loss, r.test_acc) for r in default.records]
    assert [r.test_loss for r in small.records] == pytest.approx([r.test_loss for r in default.records], rel=1e-6)
