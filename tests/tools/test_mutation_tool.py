"""The mutation-testing driver (tools/mutation.py): every target module has tests (its own file by the layout, or
the map's), the map lists only exceptions to the layout and existing files, the equivalents file is well formed,
mutants are attributed to the function they change, and a change since a base commit selects whole functions."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("mutation_driver", ROOT / "tools" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
sys.modules["mutation_driver"] = mutation
spec.loader.exec_module(mutation)

SOURCE = """
X = 1


class A:
    def f(self):
        return 1

    @staticmethod
    def g(y):
        def inner():
            return y
        return inner


def h():
    return 2
"""


def test_every_target_module_has_existing_tests_mapped():
    mapping = mutation.load_map()
    for module in mutation.target_files():
        tests = mutation.tests_for(module, mapping)
        assert tests, module
        for test in tests:
            assert (ROOT / test.split("::")[0]).is_file(), (module, test)
    with pytest.raises(mutation.MutationError, match="fedbench/nothing.py: no test file of its own"):
        mutation.tests_for("fedbench/nothing.py", mapping)


def test_a_modules_own_test_file_follows_from_the_layout_and_needs_no_entry(tmp_path, monkeypatch):
    """fedbench/<package>/<module>.py → tests/<package>/test_<module>.py (or test_<package>_<module>.py), top-level
    modules → tests/test_<module>.py; an entry adds tests to the own file, a package's glob covers only the modules
    without one."""
    for name in (
        "tests/pkg/test_a.py",
        "tests/pkg/test_pkg_b.py",
        "tests/test_top.py",
        "tests/other/test_x.py",
        "tests/pkg/test_pkg_registry.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    assert mutation.own_tests("fedbench/pkg/a.py") == "tests/pkg/test_a.py"
    assert mutation.own_tests("fedbench/pkg/b.py") == "tests/pkg/test_pkg_b.py"
    assert mutation.own_tests("fedbench/top.py") == "tests/test_top.py"
    assert mutation.own_tests("fedbench/pkg/c.py") is None
    assert mutation.own_tests("fedbench/pkg/_registry.py") == "tests/pkg/test_pkg_registry.py"
    assert mutation.tests_for("fedbench/pkg/a.py", []) == ["tests/pkg/test_a.py"]
    catch_all = (["fedbench/pkg/*.py"], ["tests/other/test_x.py"])
    assert mutation.tests_for("fedbench/pkg/a.py", [catch_all]) == ["tests/pkg/test_a.py"]
    assert mutation.tests_for("fedbench/pkg/c.py", [catch_all]) == ["tests/other/test_x.py"]
    extra = (["fedbench/pkg/a.py"], ["tests/pkg/test_a.py::test_one", "tests/other/test_x.py::test_two"])
    assert mutation.tests_for("fedbench/pkg/a.py", [extra, catch_all]) == [
        "tests/pkg/test_a.py",
        "tests/other/test_x.py::test_two",
    ]
    with pytest.raises(mutation.MutationError, match="fedbench/pkg/d.py: no test file of its own"):
        mutation.tests_for("fedbench/pkg/d.py", [extra])


def test_an_entry_naming_a_test_file_that_does_not_exist_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    mapping = tmp_path / "tests" / "mutation_map.toml"
    mapping.write_text('[[module]]\nmodules = ["fedbench/a.py"]\ntests = ["tests/test_a.py::test_x"]\n')
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    monkeypatch.setattr(mutation, "MAP", mapping)
    assert mutation.load_map() == [(["fedbench/a.py"], ["tests/test_a.py::test_x"])]
    mapping.write_text('[[module]]\nmodules = ["fedbench/a.py"]\ntests = ["tests/test_gone.py"]\n')
    with pytest.raises(mutation.MutationError, match="names tests/test_gone.py: no such file"):
        mutation.load_map()


def test_the_map_lists_only_exceptions_to_the_layout():
    """No entry names a module's own test file (or a node id in it): the layout already runs it."""
    for patterns, tests in mutation.load_map():
        owns = {mutation.own_tests(module) for module in patterns if "*" not in module}
        if len(owns) == 1 and None not in owns:
            (own,) = owns
            assert all(test.split("::")[0] != own for test in tests), (patterns, own)
            assert tests, patterns


def test_equivalents_name_a_target_module_and_give_a_reason():
    targets = set(mutation.target_files())
    for entry in mutation.load_equivalents():
        assert entry["module"] in targets and entry["line"] != entry["mutant"] and len(entry["reason"]) > 20


def test_functions_and_the_function_of_a_line():
    spans = mutation.function_spans(SOURCE)
    assert [name for name, _, _ in spans] == ["A.f", "A.g", "A.g.inner", "h"]
    lines = SOURCE.splitlines()
    assert mutation.function_at(spans, lines.index("            return y") + 1) == "A.g.inner"
    assert mutation.function_at(spans, lines.index("        return inner") + 1) == "A.g"
    assert mutation.function_at(spans, lines.index("    @staticmethod") + 1) == "A.g"  # its decorator
    assert mutation.function_at(spans, lines.index("X = 1") + 1) == "<module>"


def test_changed_lines_are_the_differing_lines():
    assert mutation.changed_lines("a\n  b = 1\nc\n", "a\n  b = 2\nc\n") == ("b = 1", "b = 2")
    assert mutation.changed_lines("a\n@d\nc\n", "a\nc\n") == ("@d", "")


def test_mutants_of_the_proximal_term_include_its_sign():
    pytest.importorskip("mutmut")
    mutants = mutation.mutants_of("fedbench/algorithms/functional.py")
    prox = [m for m in mutants if m.function == "proximal"]
    assert any("(p + a) ** 2" in m.mutated for m in prox) and any("(p - a) ** 3" in m.mutated for m in prox)
    assert all(m.original != m.mutated and m.source for m in mutants)


def test_touched_lines_cover_the_whole_changed_function(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    module = repo / "pkg" / "m.py"
    module.write_text(SOURCE)
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    module.write_text(SOURCE.replace("return 2", "return 3"))
    monkeypatch.setattr(mutation, "ROOT", repo)
    lines = SOURCE.splitlines()
    h = lines.index("def h():") + 1
    assert mutation.touched_lines("pkg/m.py", "HEAD") == {h, h + 1}
    module.write_text(SOURCE)
    assert mutation.touched_lines("pkg/m.py", "HEAD") == set()


def test_a_mutant_runs_only_the_tests_that_call_its_function(tmp_path):
    """The unmutated run records, per test, the module's functions it calls (directly or through a fixture set up
    once for several tests); a mutant inside a function then runs those tests only, a mutant outside every function
    (or in a function no test calls) all of them."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "m.py").write_text(SOURCE)
    (tmp_path / "test_m.py").write_text(
        "import pytest\n"
        "from pkg.m import A, h\n\n"
        "@pytest.fixture(scope='module')\n"
        "def shared():\n    return h()\n\n"
        "def test_f():\n    assert A().f() == 1\n\n"
        "def test_g():\n    assert A.g(3)() == 3\n\n"
        "def test_first_user(shared):\n    assert shared == 2\n\n"
        "def test_second_user(shared):\n    assert shared == 2\n"
    )
    out = tmp_path / "calls.json"
    script = (
        "import sys, pytest, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('driver', {str(ROOT / 'tools' / 'mutation.py')!r})\n"
        "driver = importlib.util.module_from_spec(spec); sys.modules['driver'] = driver; spec.loader.exec_module(driver)\n"
        "from pathlib import Path\n"
        f"recorder = driver.call_recorder(Path({str(tmp_path / 'pkg' / 'm.py')!r}), Path({str(out)!r}))\n"
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', 'test_m.py'], plugins=[recorder])\n"
        "recorder.write(); sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    calls = json.loads(out.read_text())
    tests = ["test_m.py"]
    assert mutation.tests_calling("A.f", calls, tests) == ["test_m.py::test_f"]
    assert mutation.tests_calling("A.g.inner", calls, tests) == ["test_m.py::test_g"]
    assert mutation.tests_calling("h", calls, tests) == ["test_m.py::test_first_user", "test_m.py::test_second_user"]
    assert mutation.tests_calling("<module>", calls, tests) == tests
    assert mutation.tests_calling("unused", calls, tests) == tests
    assert mutation.tests_calling("A.f", None, tests) == tests


def test_a_rerun_of_the_survivors_updates_the_recorded_counts():
    entry = {
        "mutants": 10,
        "killed": 6,
        "timeout": 0,
        "survived": 3,
        "equivalent": 1,
        "score": 66.7,
        "survivors": [{"line": "a"}, {"line": "b"}, {"line": "c"}],
        "equivalents": [{"line": "e"}],
        "commit": "x",
    }
    rerun = {
        "tests": ["t"],
        "mutants": 3,
        "killed": 1,
        "timeout": 0,
        "survived": 1,
        "equivalent": 1,
        "survivors": [{"line": "c"}],
        "equivalents": [{"line": "b"}],
    }
    merged = mutation.merge_survivors(entry, rerun, {"commit": "y", "date": "d"})
    assert (merged["killed"], merged["survived"], merged["equivalent"]) == (7, 1, 2)
    assert merged["score"] == round(100 * 7 / 8, 1) and merged["survivors"] == [{"line": "c"}]
    assert merged["commit"] == "x" and merged["survivors_rerun"]["commit"] == "y"


def test_cis_mutant_sample_is_stable_under_changes_elsewhere():
    """CI's budget: the same mutants on every run, and a change to one function never swaps out a mutant of another
    (every k-th mutant would: one mutant more in an early function shifts the whole draw)."""
    mutants = [mutation.Mutant("m.py", f"f{i // 10}", i, f"line {i}", f"mutated {i}") for i in range(100)]
    chosen = mutation.spread(mutants, 10)
    assert len(chosen) == 10 and len({id(m) for m in chosen}) == 10  # never the same mutant twice
    assert [m.line_number for m in chosen] == sorted(m.line_number for m in chosen)  # in the order of the module
    assert [m.line_number for m in mutation.spread(mutants, 10)] == [m.line_number for m in chosen]
    assert mutation.spread(mutants, 0) == mutants and mutation.spread(mutants[:5], 10) == mutants[:5]
    # f0 changed (its mutants replaced by 0 to 20 new ones): the draw's share may move between f0 and the rest, but
    # the rest's chosen mutants before and after are one a prefix of the other (none swapped for an unchecked one)
    for new in (0, 5, 20):
        edited = [mutation.Mutant("m.py", "f0", i, f"new {i}", f"new mutated {i}") for i in range(new)] + mutants[10:]
        after = mutation.spread(edited, 10)
        before_elsewhere = {m.line_number for m in chosen if m.function != "f0"}
        after_elsewhere = {m.line_number for m in after if m.function != "f0"}
        assert before_elsewhere <= after_elsewhere or after_elsewhere <= before_elsewhere
        assert len(after) == 10
    # the same mutation twice in one function counts twice
    twins = [mutation.Mutant("m.py", "f", 1, "a", "b"), mutation.Mutant("m.py", "f", 2, "a", "b")]
    assert len(mutation.spread(twins + mutants, 101)) == 101


def test_ci_mutates_what_changed_since_each_modules_recorded_run(tmp_path, monkeypatch):
    """`--changed-since-record`: the base of a module is the commit its recorded run names; a module without a record,
    or whose recorded commit this clone lacks, has none."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    module = repo / "pkg" / "m.py"
    module.write_text(SOURCE)
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "recorded"], check=True)
    recorded_commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    module.write_text(SOURCE.replace("return 2", "return 3"))
    subprocess.run([*git, "commit", "-qam", "later"], check=True)
    monkeypatch.setattr(mutation, "ROOT", repo)
    recorded = {"pkg/m.py": {"commit": recorded_commit}, "pkg/gone.py": {"commit": "0" * 40}}
    base = mutation.record_base("pkg/m.py", recorded)
    assert base == recorded_commit
    h = SOURCE.splitlines().index("def h():") + 1
    assert mutation.touched_lines("pkg/m.py", base) == {h, h + 1}  # the change after the record, not the last commit
    assert mutation.record_base("pkg/gone.py", recorded) is None
    assert mutation.record_base("pkg/other.py", recorded) is None
