"""The plug-in registries (``fedbench.plugins.registry``): a declared entry is known by name, info and docstring
without importing its module, and imported by the first ``get``; a name is registered once; a snapshot restored
leaves every registry as it was, the built-in catalogues' names kept."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from plugin_fixtures import fresh_plugins, method_source, write_method, write_plugged_recipe  # noqa: F401 (fixture)

from fedbench.algorithms import ALGORITHMS
from fedbench.data import DATASETS, PARTITIONERS
from fedbench.errors import ConfigError, UnknownNameError
from fedbench.models import MODELS
from fedbench.plugins import (
    PluginRegistry,
)
from fedbench.plugins.registry import catalogues, on_registry_change, register_catalogue, snapshot

# every plug-in a test loads is forgotten after it (``plugin_fixtures.fresh_plugins``)
pytestmark = pytest.mark.usefixtures("fresh_plugins")


MODULE = "fedbench_test_lazy_plugin"  # written by the fixture; unique, so no other test has imported it


@pytest.fixture
def plugin_module(tmp_path, monkeypatch) -> str:
    """A plug-in module on the path, not imported yet: one class, ``Thing``, whose ``Params`` is ``dict``."""
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(
            '''
            """The module's docstring."""


            class Thing:
                """A thing that does one thing."""

                Params = dict
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    return MODULE


def registry() -> PluginRegistry:
    return PluginRegistry("widget", describe=lambda cls: {"params": cls.Params})


def test_a_declared_entry_is_known_without_importing_it_and_imported_by_get(plugin_module):
    widgets = registry()
    widgets.declare("thing", f"{plugin_module}:Thing", params=dict, papers=("p",))
    assert widgets.names() == ["thing"] and "thing" in widgets and list(widgets) == ["thing"]
    assert widgets.info("thing") == {"params": dict, "papers": ("p",)}
    assert widgets.doc("thing") == "A thing that does one thing."  # read from the source
    assert plugin_module not in sys.modules
    thing = widgets.get("thing")
    assert plugin_module in sys.modules and thing is sys.modules[plugin_module].Thing
    assert widgets.get("thing") is thing and widgets.doc("thing") == "A thing that does one thing."


def test_a_registered_entry_records_what_its_object_states():
    widgets = registry()

    @widgets.register("made", papers=("q",))
    class Made:
        Params = list

    assert widgets.get("made") is Made
    assert widgets.info("made") == {"papers": ("q",), "params": list}
    assert widgets.doc("made") == sys.modules[__name__].__doc__  # no docstring of its own: its module's


def test_a_name_is_registered_or_declared_once(plugin_module):
    widgets = registry()
    widgets.declare("thing", f"{plugin_module}:Thing", params=dict)
    with pytest.raises(ValueError, match="widget 'thing' registered twice"):
        widgets.declare("thing", f"{plugin_module}:Thing", params=dict)
    with pytest.raises(ValueError, match="widget 'thing' registered twice"):
        widgets.register("thing")(type("Other", (), {"Params": dict}))
    assert widgets.get("thing").__name__ == "Thing"  # the first entry stays


def test_an_entry_point_must_name_a_module_and_an_attribute():
    with pytest.raises(ValueError, match="widget 'bad': entry point 'no_colon' is not 'package.module:attribute'"):
        registry().declare("bad", "no_colon")


def test_a_declaration_the_imported_object_contradicts_is_a_one_line_config_error(plugin_module):
    widgets = registry()
    widgets.declare("thing", f"{plugin_module}:Thing", params=list)
    with pytest.raises(ConfigError) as caught:
        widgets.get("thing")
    assert str(caught.value) == (
        f"widget 'thing': {plugin_module}:Thing has params <class 'dict'>, declared <class 'list'>"
    )


def test_a_missing_module_or_attribute_is_a_one_line_config_error(plugin_module):
    widgets = registry()
    widgets.declare("gone", "fedbench_no_such_module:Thing")
    widgets.declare("typo", f"{plugin_module}:Thinq", params=dict)
    with pytest.raises(ConfigError, match=r"^widget 'gone': no module fedbench_no_such_module \(entry point"):
        widgets.get("gone")
    with pytest.raises(ConfigError, match=rf"^widget 'typo': module {plugin_module} has no Thinq \(entry point"):
        widgets.get("typo")


def test_an_unknown_name_lists_close_matches(plugin_module):
    widgets = registry()
    widgets.declare("thing", f"{plugin_module}:Thing", params=dict)
    for lookup in (widgets.get, widgets.info, widgets.doc):
        with pytest.raises(UnknownNameError, match="unknown widget 'thinq'; did you mean thing?"):
            lookup("thinq")
    assert plugin_module not in sys.modules


PROBE = """
import json, sys
from fedbench.algorithms import ALGORITHMS, params_class
from fedbench.recipes.resolve import resolve_spec

spec = resolve_spec({"algorithm": "fedprox", "dataset": "digits", "model": "digits_cnn"})
seen = {"resolved": "fedbench.algorithms.methods.fedprox" in sys.modules or "torch" in sys.modules}
ALGORITHMS.get("fedprox")
seen["got"] = "fedbench.algorithms.methods.fedprox" in sys.modules
seen["mu"] = spec.algorithm_params["mu"]
print(json.dumps(seen))
"""


def test_resolving_a_spec_imports_neither_the_method_nor_torch_and_get_imports_the_method():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"resolved": False, "got": True, "mu": 0.01}


# ---------------------------------------------------------------------------------------- snapshots
def test_a_restored_snapshot_leaves_the_registry_as_it_was_and_clears_the_caches(plugin_module):
    widgets = registry()
    widgets.register("kept", size=1)(type("Kept", (), {"Params": int}))
    cleared = []
    on_registry_change(lambda: cleared.append(True))
    with snapshot() as before:
        widgets.register("added")(type("Added", (), {"Params": str}))
        widgets.declare("declared", f"{plugin_module}:Thing", params=dict)
        widgets.get("kept")
        assert before.added()[-2:] == [("widget", "added"), ("widget", "declared")]
        before.restore()
    assert widgets.names() == ["kept"] and widgets.info("kept") == {"size": 1, "params": int}
    assert cleared == [True]
    with pytest.raises(UnknownNameError):
        widgets.get("added")
    widgets.register("added")(type("Added", (), {"Params": str}))  # the name is free again


def test_a_catalogue_completed_while_a_snapshot_is_open_keeps_its_builtins_when_it_is_restored():
    """A catalogue first imported by a plug-in being loaded: restoring forgets only the names after its built-ins."""
    with snapshot() as before:
        catalogue = PluginRegistry("gadget")
        catalogue.register("builtin")(type("Builtin", (), {}))
        register_catalogue(catalogue)
        catalogue.register("plugged")(type("Plugged", (), {}))
        assert [pair for pair in before.added() if pair[0] == "gadget"] == [("gadget", "plugged")]
        before.restore()
    assert catalogue.names() == ["builtin"]
    register_catalogue(catalogue)  # no snapshot open: nothing to record
    assert catalogue.names() == ["builtin"]
    assert catalogue in catalogues()


def test_the_builtin_catalogues_register_themselves_once_their_builtins_are_in():
    assert {registry for registry in catalogues() if registry.kind != "gadget"} == {
        ALGORITHMS,
        DATASETS,
        MODELS,
        PARTITIONERS,
    }
    assert [r.kind for r in catalogues() if r.kind != "gadget"] == ["algorithm", "dataset", "model", "partitioner"]
