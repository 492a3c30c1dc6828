"""``fedbench.settings``: one frozen, torch-free value for how a run trains, with the one default of each setting;
none of it is part of a spec, a name from outside the command line is checked, and the algorithms' defaults are
its own."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from fedbench.errors import ConfigError
from fedbench.settings import DEFAULT_MEMORY_BUDGET, EVAL_BATCH_SIZE, Packing, Settings
from fedbench.spec import RunSpec


def test_the_defaults():
    settings = Settings()
    assert (settings.data_root, settings.verify, settings.threads) == (None, True, 1)
    assert settings.packing is Packing.AUTO
    assert (settings.fast, settings.compile) == (True, False)
    assert (settings.eval_batch_size, settings.client_state_memory) == (1000, 1 << 30)
    assert (EVAL_BATCH_SIZE, DEFAULT_MEMORY_BUDGET) == (1000, 1 << 30)


def test_the_engine_reads_the_same_defaults():
    from fedbench.engine import client_states, evaluation, state

    assert state.EVAL_BATCH_SIZE is EVAL_BATCH_SIZE and evaluation.EVAL_BATCH_SIZE is EVAL_BATCH_SIZE
    assert client_states.DEFAULT_MEMORY_BUDGET is DEFAULT_MEMORY_BUDGET


def test_settings_are_frozen_and_compare_by_value():
    settings = Settings(threads=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.threads = 3  # type: ignore[misc]
    assert settings == Settings(threads=2) != Settings()


def test_a_packing_name_becomes_the_enum_and_an_unknown_one_is_a_user_error():
    assert Settings(packing="packed").packing is Packing.PACKED  # type: ignore[arg-type]
    assert Settings(packing="sequential") == Settings(packing=Packing.SEQUENTIAL)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^--packing 'gpu': expected one of auto, packed, sequential$"):
        Settings(packing="gpu")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("threads", 0, "threads 0: expected at least 1"),
        ("eval_batch_size", 0, "eval_batch_size 0: expected at least 1"),
        ("client_state_memory", -1, "client_state_memory -1: expected at least 0"),
    ],
)
def test_a_value_out_of_range_is_a_user_error(field, value, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        Settings(**{field: value})


@pytest.mark.parametrize(("field", "value"), [("threads", 1), ("eval_batch_size", 1), ("client_state_memory", 0)])
def test_the_least_values_are_taken(field, value):
    assert getattr(Settings(**{field: value}), field) == value


def test_no_setting_is_a_spec_field():
    names = {f.name for f in dataclasses.fields(Settings)}
    assert not names & set(RunSpec.model_fields)


def test_the_settings_import_no_torch_and_no_spec():
    code = "import sys, fedbench.settings; sys.exit('torch' in sys.modules or 'fedbench.spec' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
