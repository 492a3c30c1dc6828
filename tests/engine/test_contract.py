"""``fedbench.engine.contract``, the old path of the contract's checks: every name still imports from it, the new
package's own (``fedbench.execution.contract``), with a ``DeprecationWarning`` naming where it lives now."""

from __future__ import annotations

import importlib

import pytest

import fedbench.execution.contract as contract


@pytest.mark.parametrize("name", ["check_method", "contract_spec", "PROPERTIES", "F64_ATOL", "Checker"])
def test_the_old_path_gives_the_new_packages_names_and_warns_where_it_is_imported(name):
    old = importlib.import_module("fedbench.engine.contract")
    with pytest.warns(DeprecationWarning) as warned:
        assert getattr(old, name) is getattr(contract, name)
    [warning] = warned
    assert str(warning.message) == f"fedbench.engine.contract.{name} moved: import it from fedbench.execution.contract"
    assert warning.filename == __file__  # the line that asked for it, not the shim


def test_a_name_the_package_lacks_and_a_dunder_are_attribute_errors_without_a_warning(recwarn):
    """``__path__`` (the package has one) stays missing: the old path is a module, not a package, to the import
    system."""
    old = importlib.import_module("fedbench.engine.contract")
    with pytest.raises(AttributeError, match=r"^module 'fedbench\.engine\.contract' has no attribute 'speed'$"):
        old.speed  # noqa: B018
    with pytest.raises(AttributeError, match=r"^module 'fedbench\.engine\.contract' has no attribute '__path__'$"):
        old.__path__  # noqa: B018
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_from_import_of_the_old_path_works():
    with pytest.warns(DeprecationWarning):
        from fedbench.engine.contract import check_method, contract_spec  # noqa: F401
