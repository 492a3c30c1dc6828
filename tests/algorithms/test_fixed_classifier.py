"""Fixed-classifier methods (``fedbench/algorithms/fixed_classifier.py``: SphereFed, FedETF, FedDr+): the
classifier rows never move, and the model setting each method needs is named and checked."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    MLP,
    initial_params,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.errors import ConfigError
from global_formula_fixtures import head_and_body
from pfl_formula_fixtures import CLASSES


@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "algorithm,classifier,lr,frozen",
    [
        ("spherefed", "orthonormal", 1.0, ["classifier.weight"]),
        ("dot_regression", "etf", 1.0, ["classifier.weight"]),
        ("fedetf", "fedetf", 0.5, ["classifier.etf.weight"]),
    ],
)
def test_fixed_classifier_rows_stay_fixed(tmp_path, algorithm, classifier, lr, frozen):
    spec = make_spec(
        algorithm,
        model=MLP,
        model_params={"classifier": classifier},
        rounds=3,
        optimizer={"lr": lr, "momentum": 0.9, "weight_decay": 1e-3},
    )
    _, sink, ckpt = train(spec, tmp_path)
    head0, _ = head_and_body(spec, initial_params(spec))
    head, _ = head_and_body(spec, ckpt["server"]["params"])
    assert sorted(n for n in head if torch.equal(head[n], head0[n])) == frozen
    rows = head[frozen[0]].view(head[frozen[0]].shape[0], -1)
    assert torch.allclose(rows.norm(dim=1), torch.ones(len(rows)), rtol=0, atol=F64_ATOL)
    if algorithm == "fedetf":  # the projection and the temperature are trained
        assert not torch.equal(head["classifier.projection.weight"], head0["classifier.projection.weight"])
        assert not torch.equal(head["classifier.temperature"], head0["classifier.temperature"])
    assert sink.records[-1].test_acc > 0.3


@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize(
    "algorithm,classifier", [("spherefed", "linear"), ("dot_regression", "orthonormal"), ("fedetf", "etf")]
)
def test_fixed_classifier_methods_name_the_model_setting_they_need(tmp_path, algorithm, classifier):
    spec = make_spec(algorithm, model=MLP, model_params={"classifier": classifier}, rounds=1)
    wanted = {"spherefed": "orthonormal", "dot_regression": "etf", "fedetf": "fedetf"}[algorithm]
    with pytest.raises(ConfigError, match=f"model_params.classifier = '{wanted}'"):
        train(spec, tmp_path)


def test_a_fixed_classifier_must_be_frozen_normalising_and_of_its_kind():
    """require_classifier: the head must be frozen, normalise the features and have the kind's Gram matrix; the
    error says what to set."""
    from fedbench.algorithms.fixed_classifier import require_classifier
    from fedbench.errors import ConfigError
    from fedbench.models.heads import build_classifier, simplex_etf

    model = torch.nn.Module()
    model.classifier = build_classifier("etf", 5, CLASSES)
    require_classifier(model, "etf", "dot_regression")  # the real thing passes
    hint = r"^dot_regression needs a fixed etf classifier: build the model with model_params.classifier = 'etf'"
    plain = torch.nn.Linear(5, CLASSES, bias=False)  # ETF rows, frozen, but no feature normalisation
    with torch.no_grad():
        plain.weight.copy_(simplex_etf(CLASSES, 5))
    plain.weight.requires_grad_(False)
    model.classifier = plain
    with pytest.raises(ConfigError, match=hint):
        require_classifier(model, "etf", "dot_regression")
    model.classifier = build_classifier("linear", 5, CLASSES, bias=False, normalize_features=True)  # trainable
    with pytest.raises(ConfigError, match=hint + r" \(models with a 'classifier' option, e.g. vgg11, mobilenet\)$"):
        require_classifier(model, "etf", "dot_regression")
    model.classifier = build_classifier("orthonormal", 5, CLASSES)  # frozen and normalising, but not an ETF
    with pytest.raises(ConfigError, match=hint + r".* \(the model's frozen classifier rows are not etf\)$"):
        require_classifier(model, "etf", "dot_regression")
