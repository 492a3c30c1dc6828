"""The diagnostic catalogue (``fedbench/vocab/diagnostics.py``) and the spec fields that ask for diagnostics: every
entry is well formed, the spec takes exactly the catalogued names, the fields are hash-neutral at their defaults,
the rounds they pick, and the settings they refuse."""

from __future__ import annotations

from typing import get_args, is_typeddict

import pytest
from pydantic import ValidationError

from fedbench import vocab
from fedbench.algorithms import ALGORITHMS
from fedbench.recipes.views import TableView
from fedbench.spec import RunSpec
from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES, DIAGNOSTICS, NEEDS, Need, Source, unmet_need

BASE = {"algorithm": "fedavg", "dataset": "digits", "model": "digits_mlp", "rounds": 10}
VALIDATED = {"eval_mode": "both", "client_test_fraction": 0.2, "client_val_fraction": 0.1}


def test_every_entry_says_its_shape_source_value_type_needs_meaning_and_figures():
    view_layouts = set(get_args(TableView.model_fields["layout"].annotation)) - {"default"}
    for name, entry in DIAGNOSTICS.items():
        assert entry.name == name
        assert entry.shape in ("scalar", "per_layer", "per_client", "per_class", "per_point")
        assert entry.source in get_args(Source)
        assert is_typeddict(entry.value) and entry.meaning and entry.figures, name
        assert set(entry.needs) <= set(NEEDS) and set(entry.layouts) <= view_layouts, name
        assert (entry.source == "evaluation") == ("personal_evaluation" in entry.needs), name
        assert (entry.source == "method") == ("method_report" in entry.needs), name
        # its constant: vocab.diagnostics.WEIGHT_DIVERGENCE is "weight_divergence"
        assert getattr(vocab.diagnostics, name.upper()) == name
    assert DIAGNOSTIC_NAMES == tuple(DIAGNOSTICS)
    assert set(NEEDS) == set(get_args(Need))  # every need says how a run without it is refused


def test_a_need_is_judged_only_where_the_caller_knows_it_and_refused_in_the_catalogues_sentence():
    names = ["weight_divergence", "mixing_weights", "feature_stats"]
    assert unmet_need(names, {}) is None  # nothing known: nothing refused
    assert unmet_need(names, {"classification": True, "fed_model": True}, {"mixing_weights"}) is None
    facts = {"dataset": "isic", "task": "segmentation", "model": "unet", "algorithm": "fedavg"}
    assert unmet_need(names, {"classification": False}, **facts) == (
        "diagnostic 'feature_stats' tells the test points apart by class: dataset 'isic' is a segmentation task"
    )
    assert unmet_need(names, {"classification": False}, frozenset(), **facts) == (  # the first name refused first
        "diagnostic 'mixing_weights' is reported by the method, and fedavg does not report it (methods that do: "
        "those whose reported_diagnostics names it, e.g. lgmix, apfl)"
    )
    assert unmet_need(["feature_snapshot"], {"classification": True, "fed_model": False}, **facts) == (
        "diagnostic 'feature_snapshot' reads FedModel.features(x): model 'unet' is not a FedModel (fedbench.models)"
    )


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
