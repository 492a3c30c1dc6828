"""The plug-in registries (``fedbench.plugins.PluginRegistry``): a declared entry is known by name, info and
docstring without importing its module, and imported by the first ``get``; a name is registered once."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from plugin_fixtures import fresh_plugins, method_source, write_method, write_plugged_recipe  # noqa: F401 (fixture)

import fedbench.plugins as plugins
from fedbench.algorithms import ALGORITHMS, params_class
from fedbench.data import DATASETS, PARTITIONERS
from fedbench.errors import ConfigError, UnknownNameError
from fedbench.models import MODELS
from fedbench.plugins import (
    PluginError,
    PluginRegistry,
    load_plugins,
    loaded_plugins,
    plugin_sources,
    source_changes,
)
from fedbench.recipes.expand import compile_recipes
from fedbench.recipes.resolve import check_plugin_code, plugin_records, resolve_spec
from fedbench.spec import RunSpec

# every plug-in a test loads is forgotten after it (``plugin_fixtures.fresh_plugins``)
pytestmark = pytest.mark.usefixtures("fresh_plugins")
KINDS = {"algorithm": ALGORITHMS, "model": MODELS, "dataset": DATASETS, "partition": PARTITIONERS}

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
seen = {"resolved": "fedbench.algorithms.fedprox" in sys.modules or "torch" in sys.modules}
ALGORITHMS.get("fedprox")
seen["got"] = "fedbench.algorithms.fedprox" in sys.modules
seen["mu"] = spec.algorithm_params["mu"]
print(json.dumps(seen))
"""


def test_resolving_a_spec_imports_neither_the_method_nor_torch_and_get_imports_the_method():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"resolved": False, "got": True, "mu": 0.01}


# ---------------------------------------------------------------------------------------- loading plug-ins
BASE = {"dataset": "digits", "model": "digits_mlp", "partition": "iid", "num_clients": 4, "clients_per_round": 2}


def sha256_of(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_plugin_registers_with_the_public_decorator_and_is_recorded(tmp_path):
    path = write_method(tmp_path)
    [plugin] = load_plugins([str(path)])
    assert "growingprox" in ALGORITHMS and params_class("growingprox").__name__ == "GrowingProxParams"
    assert ALGORITHMS.get("growingprox").__module__ == "my_methods"
    assert plugin.module == "my_methods" and plugin.source == str(path.resolve())
    assert plugin.names == (("algorithm", "growingprox"),)
    assert plugin.sha256 == sha256_of(path) and plugin.files == {"my_methods.py": sha256_of(path)}
    assert plugin.revision is None and plugin.distribution is None
    assert loaded_plugins() == [plugin] and plugin_sources() == (str(path.resolve()),)
    assert load_plugins([str(path)]) == [plugin]  # once per process: the same file is not imported again


def test_a_package_folder_plugin_registers_every_kind_and_its_digest_covers_every_file(tmp_path):
    package = tmp_path / "team_plugins"
    package.mkdir()
    (package / "__init__.py").write_text("from . import parts  # noqa: F401\n")
    (package / "parts.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            from fedbench.data import register_partitioner
            from fedbench.models import register_model


            @register_model("team_mlp")
            def team_mlp(num_classes, input_shape, hidden: int = 8):
                raise AssertionError("not built here")


            @register_partitioner("halves")
            def halves(labels, groups, num_clients, rng, shift: int = 0):
                return [np.sort(p) for p in np.array_split(np.arange(len(labels)), num_clients)]
            """
        )
    )
    [plugin] = load_plugins(["team_plugins"], base=tmp_path)  # a relative path: relative to base
    assert set(plugin.names) == {("model", "team_mlp"), ("partitioner", "halves")}
    assert set(plugin.files) == {"team_plugins/__init__.py", "team_plugins/parts.py"}
    assert "team_mlp" in MODELS and "halves" in PARTITIONERS
    spec = resolve_spec({**BASE, "algorithm": "fedavg", "model": "team_mlp", "partition": "halves"})
    assert spec.model_params == {"hidden": 8} and spec.partition_params == {"shift": 0}
    assert spec.plugin_code == {"model": f"sha256:{plugin.sha256}", "partition": f"sha256:{plugin.sha256}"}
    assert [record["used_as"] for record in plugin_records(spec)] == [["model", "partition"]]


def test_a_module_name_plugin_is_imported_from_the_path(tmp_path, monkeypatch):
    write_method(tmp_path, file="fedbench_test_named_plugin.py", name="namedprox")
    monkeypatch.syspath_prepend(str(tmp_path))
    [plugin] = load_plugins(["fedbench_test_named_plugin"])
    assert plugin.module == plugin.source == "fedbench_test_named_plugin" and "namedprox" in ALGORITHMS
    assert plugin.files == {"fedbench_test_named_plugin.py": sha256_of(tmp_path / "fedbench_test_named_plugin.py")}


BROKEN = {
    "syntax": ("def broken(:\n", r"syntax error in .*bad_plugin\.py line 1"),
    # a binary file given as a plug-in: Python cannot tokenise it, so its error has no file name or line to show
    "not python": ("\x7fELF\x00\x02\x01\n", r"^(?!.*None).*null bytes"),
    "missing import": ("import fedbench_no_such_dependency\n", r"cannot import it: No module named"),
    "exception": ("raise RuntimeError('no GPU licence')\n", r"RuntimeError: no GPU licence"),
    # registers a new name, then one that exists: the new one must not stay registered either
    "duplicate": (
        "from fedbench.algorithms import register_algorithm\n"
        "from fedbench.algorithms.fedavg import FedAvg\n"
        "register_algorithm('bad_new_name')(type('New', (FedAvg,), {}))\n"
        "register_algorithm('fedprox')(type('Mine', (FedAvg,), {}))\n",
        r"algorithm 'fedprox' registered twice: that name exists already",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_plugin_is_one_line_naming_it_and_leaves_nothing_registered(tmp_path, case):
    source, cause = BROKEN[case]
    path = tmp_path / "bad_plugin.py"
    path.write_text(source)
    before = {kind: set(registry.names()) for kind, registry in KINDS.items()}
    with pytest.raises(PluginError) as caught:
        load_plugins([str(path)])
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"plug-in {path.resolve()}: ")
    assert re.search(cause, message), message
    assert {kind: set(registry.names()) for kind, registry in KINDS.items()} == before
    assert "bad_plugin" not in sys.modules and loaded_plugins() == []
    path.write_text(method_source(name="bad_new_name"))  # fixed: it loads, under the name it failed to take
    load_plugins([str(path)])
    assert "bad_new_name" in ALGORITHMS


def test_a_source_that_is_neither_a_path_nor_a_module_name_is_one_line(tmp_path):
    with pytest.raises(PluginError, match=r"^plug-in gone\.py: no such file or folder"):
        load_plugins(["gone.py"], base=tmp_path)
    with pytest.raises(PluginError, match=r"^plug-in 'not a module': not a \.py file"):
        load_plugins(["not a module"], base=tmp_path)
    (tmp_path / "loose").mkdir()
    with pytest.raises(PluginError, match="has no __init__.py"):
        load_plugins(["loose"], base=tmp_path)
    with pytest.raises(PluginError, match="a module named json is imported already"):
        load_plugins([str(write_method(tmp_path, file="json.py"))])


def test_an_entry_point_of_an_installed_distribution_is_loaded_once(tmp_path, monkeypatch):
    write_entry_point_distribution(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    assert load_plugins() == []
    [plugin] = [p for p in loaded_plugins() if p.module == "fedbench_ep_demo"]
    assert plugin.source == "entry point demo = fedbench_ep_demo:register"
    assert (plugin.distribution, plugin.version) == ("fedbench-ep-demo", "1.2.3")
    assert plugin.names == (("algorithm", "epprox"),) and "epprox" in ALGORITHMS  # the callable was called
    assert plugin_sources() == ()  # a worker finds entry points by itself
    load_plugins()  # not again: a second registration would be a duplicate
    record = plugin_records(resolve_spec({**BASE, "algorithm": "epprox"}))[0]
    assert {k: record[k] for k in ("module", "distribution", "version", "sha256")} == {
        "module": "fedbench_ep_demo",
        "distribution": "fedbench-ep-demo",
        "version": "1.2.3",
        "sha256": sha256_of(tmp_path / "fedbench_ep_demo" / "__init__.py"),
    }


def test_the_folder_of_an_installed_plugin_is_that_plugin_not_a_clash(tmp_path, monkeypatch):
    write_entry_point_distribution(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    load_plugins()
    [installed] = [p for p in loaded_plugins() if p.module == "fedbench_ep_demo"]
    # its source folder named with --plugin too (a developer's checkout of the installed package): the same plug-in,
    # registered once
    assert load_plugins([str(tmp_path / "fedbench_ep_demo")]) == [installed]
    assert "epprox" in ALGORITHMS and len(loaded_plugins()) == len(set(p.source for p in loaded_plugins()))
    # another folder whose package has the installed one's name is a clash, said as one
    other = tmp_path / "elsewhere" / "fedbench_ep_demo"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text(method_source(name="otherprox"))
    with pytest.raises(PluginError, match="imported already .*another package or plug-in of that name"):
        load_plugins([str(other)])
    assert "otherprox" not in ALGORITHMS


def write_entry_point_distribution(folder) -> None:
    """An installed distribution, as pip leaves one: a package and its ``.dist-info`` naming the entry point."""
    package = folder / "fedbench_ep_demo"
    package.mkdir()
    (package / "__init__.py").write_text(
        method_source(name="epprox").replace('@register_algorithm("epprox")\n', "")
        + "\n\ndef register():\n    register_algorithm('epprox')(GrowingProx)\n"
    )
    info = folder / "fedbench_ep_demo-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fedbench-ep-demo\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[fedbench.plugins]\ndemo = fedbench_ep_demo:register\n")
    (info / "top_level.txt").write_text("fedbench_ep_demo\n")


# ---------------------------------------------------------------------------------------- identity of results
def test_builtin_specs_carry_no_plugin_code_and_keep_their_hash(tmp_path):
    before = resolve_spec({**BASE, "algorithm": "fedprox"})
    load_plugins([str(write_method(tmp_path))])
    after = resolve_spec({**BASE, "algorithm": "fedprox"})
    assert before.plugin_code == after.plugin_code == {} and after.spec_hash == before.spec_hash
    assert "plugin_code" not in json.loads(after.canonical_json())


def test_an_edited_plugin_gives_another_spec_hash(tmp_path):
    path = write_method(tmp_path)
    load_plugins([str(path)])
    first = resolve_spec({**BASE, "algorithm": "growingprox"})
    assert first.plugin_code == {"algorithm": f"sha256:{sha256_of(path)}"}
    assert RunSpec.model_validate_json(first.model_dump_json()).spec_hash == first.spec_hash  # without plug-ins
    assert resolve_spec(first) == first  # a stored spec keeps the code it was trained with
    path.write_text(method_source(comment="edited"))
    [reloaded] = load_plugins([str(path)])  # edited since loaded: loaded again, its name now the new code's
    second = resolve_spec({**BASE, "algorithm": "growingprox"})
    assert second.plugin_code == {"algorithm": f"sha256:{reloaded.sha256}"} != first.plugin_code
    assert second.spec_hash != first.spec_hash and loaded_plugins() == [reloaded]
    with pytest.raises(PluginError, match=r"^algorithm 'growingprox': this worker has sha256:.*planned with sha256:"):
        check_plugin_code(first)  # a worker with the new code refuses the run planned with the old
    check_plugin_code(second)


def test_a_declared_revision_keeps_the_hash_and_a_changed_source_is_a_warning(tmp_path):
    path = write_method(tmp_path, header="FEDBENCH_REVISION = 2")
    [old] = load_plugins([str(path)])
    first = resolve_spec({**BASE, "algorithm": "growingprox"})
    assert first.plugin_code == {"algorithm": "my_methods revision 2"}
    provenance = {"plugins": plugin_records(first)}
    assert provenance["plugins"][0]["revision"] == 2 and provenance["plugins"][0]["sha256"] == old.sha256
    assert source_changes([provenance, None]) == []
    path.write_text(method_source(comment="edited", header="FEDBENCH_REVISION = 2"))
    [new] = load_plugins([str(path)])
    assert resolve_spec({**BASE, "algorithm": "growingprox"}).spec_hash == first.spec_hash
    [warning] = source_changes([provenance, provenance])
    assert warning == (
        f"2 run(s) of plug-in my_methods (FEDBENCH_REVISION 2) were trained by other source code "
        f"(sha256 {old.sha256[:12]}…, now {new.sha256[:12]}…); if the change alters results, raise its "
        "FEDBENCH_REVISION"
    )
    path.write_text(method_source(header="FEDBENCH_REVISION = 3"))
    load_plugins([str(path)])
    assert resolve_spec({**BASE, "algorithm": "growingprox"}).spec_hash != first.spec_hash


def test_a_bad_revision_is_one_line(tmp_path):
    path = write_method(tmp_path, header="FEDBENCH_REVISION = '2'")
    with pytest.raises(PluginError, match=r"FEDBENCH_REVISION = '2'; expected an integer ≥ 1$"):
        load_plugins([str(path)])
    assert "growingprox" not in ALGORITHMS


def test_a_name_registered_outside_load_plugins_is_identified_by_its_module_file():
    @MODELS.register("test_script_model")
    def script_model(num_classes, input_shape):
        raise AssertionError("not built here")

    spec = resolve_spec({**BASE, "algorithm": "fedavg", "model": "test_script_model"})
    assert spec.plugin_code == {"model": f"sha256:{sha256_of(Path(__file__))}"}
    assert plugin_records(spec)[0]["module"] == __name__


def test_a_recipe_loads_its_plugins_relative_to_its_file(tmp_path):
    (tmp_path / "methods").mkdir()
    write_method(tmp_path / "methods")
    recipe = write_plugged_recipe(tmp_path, plugins='plugins = ["methods/my_methods.py"]')
    planned = compile_recipes([recipe])
    assert [p.spec.algorithm for p in planned] == ["fedavg", "growingprox"]
    assert planned[1].spec.plugin_code == {"algorithm": f"sha256:{sha256_of(tmp_path / 'methods/my_methods.py')}"}
    (tmp_path / "methods" / "my_methods.py").write_text("import fedbench_no_such_dependency\n")
    broken = write_plugged_recipe(tmp_path, name="fedprox", plugins='plugins = ["methods/my_methods.py"]')
    with pytest.raises(PluginError, match=rf"^{re.escape(str(broken))}: plug-in .*my_methods\.py: cannot import"):
        compile_recipes([broken])
