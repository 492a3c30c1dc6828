"""The diagnostic catalogue (``fedbench/vocab/diagnostics.py``) and the spec fields that ask for diagnostics: every
entry is well formed, the spec takes exactly the catalogued names, the fields are hash-neutral at their defaults,
the rounds they pick, and the settings they refuse."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fedbench.algorithms import ALGORITHMS
from fedbench.spec import RunSpec
from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES, DIAGNOSTICS

BASE = {"algorithm": "fedavg", "dataset": "digits", "model": "digits_mlp", "rounds": 10}
VALIDATED = {"eval_mode": "both", "client_test_fraction": 0.2, "client_val_fraction": 0.1}


def test_every_entry_says_its_shape_source_layout_meaning_and_figures():
    for name, entry in DIAGNOSTICS.items():
        assert entry.name == name
        assert entry.shape in ("scalar", "per_layer", "per_client", "per_class", "per_point")
        assert entry.source in ("engine", "evaluation", "method")
        assert entry.layout.startswith("{") and entry.meaning and entry.figures, name
        assert (entry.source == "evaluation") == ("personal_evaluation" in entry.needs), name
    assert DIAGNOSTIC_NAMES == tuple(DIAGNOSTICS)


def test_the_spec_takes_the_catalogued_names_only():
    assert RunSpec(**BASE, diagnostics=("weight_divergence",)).diagnostics == ("weight_divergence",)
    with pytest.raises(ValidationError, match="diagnostics"):
        RunSpec(**BASE, diagnostics=("model_inversion",))  # a name outside the catalogue


def test_every_method_diagnostic_is_reported_by_some_method():
    reported = set().union(*(ALGORITHMS.get(name).reported_diagnostics for name in ALGORITHMS.names()))
    assert reported == {name for name, d in DIAGNOSTICS.items() if d.source == "method"}
    assert {n for n in ALGORITHMS.names() if ALGORITHMS.get(n).reported_diagnostics} == {"lgmix", "apfl"}


def test_one_set_of_diagnostics_is_one_spec_whatever_the_order():
    listed = RunSpec(**BASE, **VALIDATED, diagnostics=("val_loss", "weight_divergence"))
    assert listed.diagnostics == ("weight_divergence", "val_loss")  # catalogue order
    assert listed.spec_hash == RunSpec(**BASE, **VALIDATED, diagnostics=("weight_divergence", "val_loss")).spec_hash


def test_the_diagnostic_fields_are_hash_neutral_at_their_defaults():
    plain = RunSpec(**BASE)
    assert '"diagnostics' not in plain.canonical_json()
    asked = RunSpec(**BASE, diagnostics=("weight_divergence",))
    every = RunSpec(**BASE, diagnostics=("weight_divergence",), diagnostics_every=5)
    at = RunSpec(**BASE, diagnostics=("weight_divergence",), diagnostics_rounds=(3,))
    assert len({plain.spec_hash, asked.spec_hash, every.spec_hash, at.spec_hash}) == 4  # a run records what it asks


def test_the_rounds_diagnosed_are_every_kth_the_last_and_those_named():
    spec = RunSpec(**BASE, diagnostics=("weight_divergence",), diagnostics_every=4, diagnostics_rounds=(3, 30))
    assert [r for r in range(1, 11) if spec.diagnoses(r)] == [3, 4, 8, 10]  # 30 is past the run: never reached
    assert [r for r in range(1, 11) if RunSpec(**BASE).diagnoses(r)] == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"diagnostics_every": 5}, "diagnostics_every and diagnostics_rounds pick the rounds of diagnostics"),
        ({"diagnostics_rounds": (2,)}, "diagnostics_every and diagnostics_rounds pick the rounds of diagnostics"),
        ({"diagnostics": ("val_loss", "val_loss"), **VALIDATED}, "names a diagnostic twice"),
        ({"diagnostics": ("weight_divergence",), "diagnostics_rounds": (0,)}, "rounds, 1-based"),
        ({"diagnostics": ("val_loss",), **VALIDATED, "client_val_fraction": 0.0}, "set client_val_fraction > 0"),
        ({"diagnostics": ("val_loss",), **VALIDATED, "eval_mode": "global"}, "set eval_mode 'personal' or 'both'"),
        (  # the whole message, as pydantic frames it
            {"diagnostics": ("personal_divergence",)},
            r"Value error, diagnostic 'personal_divergence' is measured by personal evaluation: set eval_mode "
            r"'personal' or 'both' \[",
        ),
    ],
)
def test_settings_the_diagnostics_cannot_have_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        RunSpec(**{**BASE, **fields})
