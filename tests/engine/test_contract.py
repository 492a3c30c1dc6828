"""``fedbench.engine.contract``, the old path of the contract's checks: every name still imports from it, the new
package's own (``fedbench.execution.contract``), with a ``DeprecationWarning`` naming where it lives now."""

from __future__ import annotations

import importlib

import pytest

import fedbench.execution.contract as contract


@pytest.mark.parametrize("name", ["check_method", "contract_spec", "PROPERTIES", "F64_ATOL", "Checker"])
def test_the_old_path_gives_the_new_packages_names_and_warns(name):
    old = importlib.import_module("fedbench.engine.contract")
    with pytest.warns(
        DeprecationWarning,
        match=rf"^fedbench\.engine\.contract\.{name} moved: import it from fedbench\.execution\.contract$",
    ):
        assert getattr(old, name) is getattr(contract, name)


def test_a_name_the_package_lacks_is_an_attribute_error_and_no_warning(recwarn):
    old = importlib.import_module("fedbench.engine.contract")
    with pytest.raises(AttributeError, match="has no attribute 'speed'"):
        old.speed  # noqa: B018
    with pytest.raises(AttributeError):
        old.__wrapped__  # noqa: B018
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_from_import_of_the_old_path_works():
    with pytest.warns(DeprecationWarning):
        from fedbench.engine.contract import check_method, contract_spec  # noqa: F401
