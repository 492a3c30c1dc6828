"""The plug-in registries as plain data (``fedbench/report/plugin_listing.py``) for ``fedbench algorithms`` and
``fedbench models``: every method with its parameters' defaults, papers and one-line description; model cards at the
paper configuration or with overrides."""

from __future__ import annotations

import pytest

from fedbench.algorithms import ALGORITHMS, params_class
from fedbench.models import MODELS
from fedbench.report.plugin_listing import algorithm_entries, model_entries


def test_every_method_once_in_name_order_with_its_parameter_defaults():
    entries = algorithm_entries()
    assert [e["name"] for e in entries] == ALGORITHMS.names()
    by_name = {e["name"]: e for e in entries}
    assert by_name["fedprox"]["params"] == {"regularizers": (), "mu": 0.01}
    assert set(by_name["fedprox"]["papers"]) == {"fedtr", "fedtrip", "fedimpro", "bench"}
    assert by_name["spherefed"]["papers"] == ["feddrplus"]
    # the setting in which the method is FedAvg, as declared; None where none is
    assert by_name["fedprox"]["fedavg_setting"] == {"algorithm_params": {"mu": 0.0}}
    assert by_name["fednova"]["fedavg_setting"] == {"setup": {"local_steps": 2}}
    assert by_name["lgmix"]["fedavg_setting"] is None
    for entry in entries:
        assert list(entry["params"]) == list(params_class(entry["name"]).model_fields)
        assert entry["description"] and "\n" not in entry["description"]
        assert entry["description"] == ALGORITHMS.doc(entry["name"]).strip().splitlines()[0]


@pytest.mark.slow  # builds every model at its paper size (seconds)
def test_model_cards_of_every_model_at_its_paper_configuration():
    cards = model_entries()
    assert [c["name"] for c in cards] == MODELS.names()
    mlp = next(c for c in cards if c["name"] == "mlp")
    assert (mlp["params"], mlp["num_classes"], mlp["input_shape"]) == (79_510, 10, [1, 28, 28])


def test_a_model_card_with_overrides():
    (card,) = model_entries("mlp", {"num_classes": 47, "hidden": [50]})
    assert (card["num_classes"], card["model_params"], card["feature_dim"]) == (47, {"hidden": [50]}, 50)
    assert card["params"] == (784 * 50 + 50) + (50 * 47 + 47)


def test_methods_filtered_by_kind_and_paper_and_a_value_no_method_has_is_one_error():
    from fedbench.errors import ConfigError

    personal = {e["name"] for e in algorithm_entries(kind="personal")}
    global_ = {e["name"] for e in algorithm_entries(kind="global")}
    assert {"ditto", "lgmix", "fedrep"} <= personal and {"fedavg", "fedadam", "feddc", "fedsam"} <= global_
    assert personal.isdisjoint(global_) and personal | global_ == set(ALGORITHMS.names())
    fedtrip = [e["name"] for e in algorithm_entries(paper="fedtrip")]
    assert "fedtrip" in fedtrip and "lgmix" not in fedtrip
    assert [e["name"] for e in algorithm_entries("personal", "fedtrip")] == []  # both filters at once
    with pytest.raises(ConfigError, match=r"^--kind 'both': expected one of global, personal$"):
        algorithm_entries(kind="both")
    with pytest.raises(
        ConfigError, match=r"^--paper 'nope': no method listed is of that paper; the papers are .*fedtrip"
    ):
        algorithm_entries(paper="nope")
