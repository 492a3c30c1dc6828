"""The parameters of a function plug-in (``fedbench.plugins.parameters``): read from its signature, values checked
against its annotations as TOML or JSON write them, defaults filled in as JSON holds them."""

from __future__ import annotations

import inspect
import re
from typing import Annotated

import pytest
from pydantic import BaseModel

from fedbench.errors import ConfigError
from fedbench.plugins import check_params, json_value, parameter_defaults, parameter_hints, with_defaults


class Shape(BaseModel):
    width: int = 2


def loader(root: str, alpha: float = 0.5, sizes: tuple[int, ...] = (1, 2), *args, shape: Shape | None = None, **kw):
    """A data set loader: ``root`` supplied by the engine, ``alpha`` and ``sizes`` a recipe's."""


def needs(count: int, label: Annotated[str, "a marker"] = "x"):
    """A plug-in with a required parameter."""


def test_the_defaults_are_the_signatures_less_what_the_caller_supplies_and_varargs():
    assert parameter_defaults(loader, frozenset({"root"})) == {"alpha": 0.5, "sizes": (1, 2), "shape": None}
    assert parameter_defaults(needs, frozenset()) == {"count": inspect.Parameter.empty, "label": "x"}


def test_the_hints_keep_annotated_extras_unless_asked_not_to_and_leave_the_return_out():
    assert parameter_hints(needs)["label"] == Annotated[str, "a marker"]
    assert parameter_hints(needs, include_extras=False) == {"count": int, "label": str}


def test_an_unknown_parameter_is_a_config_error_listing_the_accepted_ones():
    with pytest.raises(ConfigError) as error:
        check_params("toy", loader, {"alfa": 1.0, "beta": 2}, {"root"}, "dataset")
    assert str(error.value) == (
        "dataset 'toy' has no parameter(s) 'alfa', 'beta'; accepted: alpha, args, kw, shape, sizes"
    )


@pytest.mark.parametrize(("value", "ok"), [(0.25, True), (1, True), ("0.5", False), ([1], False)])
def test_a_value_must_already_be_of_the_annotated_type_as_toml_writes_it(value, ok):
    if ok:
        check_params("toy", loader, {"alpha": value}, {"root"}, "dataset")
        return
    with pytest.raises(
        ConfigError, match=rf"^dataset 'toy': parameter alpha = {re.escape(repr(value))}: Input should be"
    ):
        check_params("toy", loader, {"alpha": value}, {"root"}, "dataset")


def test_an_object_json_cannot_hold_is_left_to_the_callee():
    check_params("toy", loader, {"alpha": object()}, {"root"}, "dataset")


def test_defaults_are_filled_in_as_json_holds_them_and_a_missing_required_one_names_its_key():
    resolved = with_defaults("toy", loader, {"alpha": 0.1}, frozenset({"root"}), "dataset", "dataset_params")
    assert resolved == {"alpha": 0.1, "sizes": [1, 2], "shape": None}
    with pytest.raises(ConfigError, match=r"^model 'needy' needs model_params\.count$"):
        with_defaults("needy", needs, {}, frozenset(), "model", "model_params")
    assert json_value({1: (Shape(), [Shape(width=3)])}) == {"1": [{"width": 2}, [{"width": 3}]]}
