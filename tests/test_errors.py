"""fedbench/errors.py: the one place a pydantic ValidationError becomes the parts of a one-line message."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from fedbench.errors import FieldError, field_error


class Inner(BaseModel):
    size: int


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    items: list[Inner] = []

    @model_validator(mode="after")
    def _named(self) -> Outer:
        if self.name == "bad":
            raise ValueError("the name is bad")
        return self


def error_of(**data: object) -> FieldError:
    with pytest.raises(ValidationError) as raised:
        Outer(**data)
    return field_error(raised.value)


def test_the_first_error_names_its_dotted_key_pydantics_words_its_type_and_the_value():
    bad = error_of(name="n", items=[{"size": 1}, {"size": "x"}, {"size": "y"}])
    assert bad == FieldError(
        "items.1.size", "Input should be a valid integer, unable to parse string as an integer", "int_parsing", "x"
    )
    assert bad.line() == "items.1.size: Input should be a valid integer, unable to parse string as an integer"
    assert bad.line("setup.", "?").startswith("setup.items.1.size: ")
    assert error_of(name="n", colour=1) == FieldError("colour", "Extra inputs are not permitted", "extra_forbidden", 1)
    assert error_of().kind == "missing" and error_of().key == "name"


def test_an_error_about_the_whole_object_has_no_key_and_keeps_pydantics_words():
    bad = error_of(name="bad")
    assert (bad.key, bad.message, bad.kind) == ("", "Value error, the name is bad", "value_error")
    assert bad.line("line 3: key ", "(the line)") == "line 3: key (the line): Value error, the name is bad"
    assert bad.line() == ": Value error, the name is bad"
