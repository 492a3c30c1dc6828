"""Loading plug-ins from outside fedbench (``fedbench.plugins.loading``): a file, a package folder, a module name, an
installed distribution's entry point or a recipe's ``plugins``, each all-or-nothing, a broken one one line."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import textwrap

import pytest
from plugin_fixtures import fresh_plugins, method_source, write_method, write_plugged_recipe  # noqa: F401 (fixture)

from fedbench.algorithms import ALGORITHMS, params_class
from fedbench.data import DATASETS, PARTITIONERS
from fedbench.models import MODELS
from fedbench.plugins import (
    PluginError,
    load_plugins,
    loaded_plugins,
    loading,
    plugin_sources,
)
from fedbench.recipes.expand import compile_recipes
from fedbench.recipes.resolve import plugin_records, resolve_spec

# every plug-in a test loads is forgotten after it (``plugin_fixtures.fresh_plugins``)
pytestmark = pytest.mark.usefixtures("fresh_plugins")

KINDS = {"algorithm": ALGORITHMS, "model": MODELS, "dataset": DATASETS, "partition": PARTITIONERS}


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
        "from fedbench.algorithms.methods.fedavg import FedAvg\n"
        "register_algorithm('bad_new_name')(type('New', (FedAvg,), {}))\n"
        "register_algorithm('fedprox')(type('Mine', (FedAvg,), {}))\n",
        r"algorithm 'fedprox' registered twice: 'fedprox' is a built-in algorithm of fedbench; register it under "
        "another name",
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


FIRST_IMPORT = """
import json, sys
from fedbench.plugins import PluginError, load_plugins

try:
    load_plugins([sys.argv[1]], entry_points=False)
except PluginError as exc:
    failed = str(exc)
from fedbench.algorithms import ALGORITHMS
from fedbench.data import DATASETS

good = load_plugins([sys.argv[2]], entry_points=False)[0]
print(json.dumps({
    "failed": failed, "fedprox": "fedprox" in ALGORITHMS, "digits": "digits" in DATASETS,
    "left": "bad_new_name" in ALGORITHMS, "names": good.names,
}))
"""


@pytest.mark.slow
def test_a_plugin_that_imports_the_catalogues_first_and_fails_leaves_their_builtins_and_none_of_its_names(tmp_path):
    """In a process where nothing imported the catalogues yet, the failing plug-in imports them itself: they record
    their built-ins as they complete (``register_catalogue``), so restoring the registries keeps those."""
    bad, good = tmp_path / "bad_plugin.py", tmp_path / "good_plugin.py"
    bad.write_text(BROKEN["duplicate"][0])
    good.write_text(method_source(name="good_new_name"))
    done = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORT, str(bad), str(good)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "registered twice" in seen["failed"]
    assert (seen["fedprox"], seen["digits"], seen["left"]) == (True, True, False)
    assert seen["names"] == [["algorithm", "good_new_name"]]  # a later plug-in's own names only


def test_a_source_that_is_neither_a_path_nor_a_module_name_is_one_line(tmp_path):
    with pytest.raises(PluginError) as caught:
        load_plugins(["gone.py"], base=tmp_path)
    assert str(caught.value) == (
        f"plug-in gone.py: no such file or folder {tmp_path / 'gone.py'}; a relative path is resolved against the "
        f"recipe's folder {tmp_path}"
    )
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
    monkeypatch.setattr(loading, "_entry_points_loaded", False)
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
    monkeypatch.setattr(loading, "_entry_points_loaded", False)
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
