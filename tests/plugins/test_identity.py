"""What identifies a plug-in's results (``fedbench.plugins.identity``): the built-ins carry no plug-in code and keep
their hashes; a plug-in's sha256, or its declared ``FEDBENCH_REVISION``, is in the spec; a changed source under the
same revision is a warning."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from plugin_fixtures import fresh_plugins, method_source, write_method, write_plugged_recipe  # noqa: F401 (fixture)

from fedbench.algorithms import ALGORITHMS
from fedbench.models import MODELS
from fedbench.plugins import (
    PluginError,
    load_plugins,
    loaded_plugins,
    source_changes,
)
from fedbench.recipes.resolve import check_plugin_code, plugin_records, resolve_spec
from fedbench.spec import RunSpec

# every plug-in a test loads is forgotten after it (``plugin_fixtures.fresh_plugins``)
pytestmark = pytest.mark.usefixtures("fresh_plugins")

BASE = {"dataset": "digits", "model": "digits_mlp", "partition": "iid", "num_clients": 4, "clients_per_round": 2}


def sha256_of(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
