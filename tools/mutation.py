"""Mutation testing of fedbench's methods and plumbing: `make mutation`, `make mutation-changed`.

Every mutant is one of mutmut's single-point changes (its operators: a comparison, an arithmetic operator, a number,
a string, a keyword, an argument…), applied to one module of ``TARGETS``; the mutant then runs the module's tests
(``-m "not slow" -x``): its own test file, where the tests mirror the package (``fedbench/<package>/<module>.py`` →
``tests/<package>/test_<module>.py``, or ``test_<package>_<module>.py`` where two packages share a module name), then
the tests ``tests/mutation_map.toml`` adds for it (tests elsewhere that kill its mutants too) — of those, only the
tests that call the mutated function in the unmutated run (``call_recorder``; every mapped test for a mutant outside
functions). A mutant the tests fail on is *killed*; one they pass is a *survivor*, unless
``tests/mutation_equivalents.toml`` lists it as equivalent (it cannot change any behaviour) with a reason. Score per
module = (killed + timed out) / (mutants − equivalents).

The mutants run in a private copy of the worktree (the worktree itself is never modified), in processes forked from
this one after it imported the heavy dependencies (torch, pydantic, SQLAlchemy…) but not fedbench, so a mutant costs
the time of its tests only. No wall-clock figure decides an outcome on a busy machine: a mutant that runs past its
time limit (10 × the module's baseline, at least 60 s) is run again with a limit 5 times longer before it counts as
a timeout.

    python tools/mutation.py                       # every module of TARGETS (hours)
    python tools/mutation.py fedbench/spec.py      # one module (its entry in the JSON is updated)
    python tools/mutation.py --changed-since main  # only the functions a change touched since main
    python tools/mutation.py fedbench/execution/contract/properties.py --max-mutants 120   # a stable sample of a
                                                        # large module (its record says "sampled")
    python tools/mutation.py --changed-since-record --max-mutants 40   # CI: the functions changed since each
                                                        # module's recorded run (the recorded scores stay true)

Results: a killed/total table per module on stdout and ``benchmarks/results/mutation.json``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = (
    "fedbench/algorithms",
    "fedbench/algorithms/methods",  # the built-in methods (fedbench/algorithms/<name>.py when recorded before the move)
    "fedbench/engine",
    "fedbench/execution/contract",  # the engine contract's checks (fedbench/engine/contract.py when it was recorded)
    "fedbench/engine/diagnostics",  # the producers of the per-round diagnostics
    "fedbench/checkpoint/format.py",  # with atomic.py and location.py: engine/checkpoint.py when it was recorded
    "fedbench/checkpoint/atomic.py",
    "fedbench/checkpoint/location.py",
    "fedbench/registry",
    "fedbench/urls.py",
    "fedbench/spec.py",
    "fedbench/recipes/schema.py",
    "fedbench/recipes/views.py",
    "fedbench/recipes/validate.py",
    "fedbench/recipes/load.py",
    "fedbench/recipes/expand.py",
    "fedbench/report/table.py",
    "fedbench/report/figure_values.py",  # one function per table figure
    "fedbench/report/claims.py",  # the papers' claims: holds / fails / inconclusive
    "fedbench/report/diagnostics",  # the per-round diagnostics' runs and their figures
    "fedbench/cost.py",
    "fedbench/models/zoo.py",  # the builders' signatures are every model's model_params
)
MAP = ROOT / "tests" / "mutation_map.toml"
EQUIVALENTS = ROOT / "tests" / "mutation_equivalents.toml"
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
TARGET_SCORE = 85.0  # % of non-equivalent mutants killed, per module
# Imported before forking, so that every mutant's process starts with them loaded; never fedbench itself.
PRELOAD = (
    "torch",
    "torchvision.models",  # imports torch._dynamo: seconds per process otherwise
    "numpy",
    "scipy.stats",
    "sklearn.metrics",
    "pydantic",
    "sqlalchemy.orm",
    "alembic.command",
    "typer.testing",
    "rich.table",
    "filelock",
    "matplotlib",
    "PIL.Image",
    "hypothesis",
    "pytest",
)


class MutationError(Exception):
    """A configuration problem of the mutation run (the map, the equivalents file, a failing baseline)."""


# ------------------------------------------------------------------------------------------- configuration
def target_files() -> list[str]:
    files = []
    for target in TARGETS:
        path = ROOT / target
        files += [str(p.relative_to(ROOT)) for p in sorted(path.glob("*.py"))] if path.is_dir() else [target]
    return files


def load_map() -> list[tuple[list[str], list[str]]]:
    """The map's entries (module patterns, tests); a test file an entry names that does not exist is an error."""
    entries = tomllib.loads(MAP.read_text())["module"]
    for entry in entries:
        missing = [test for test in entry["tests"] if not (ROOT / test.split("::")[0]).is_file()]
        if missing:
            modules = ", ".join(entry["modules"])
            raise MutationError(f"{MAP.name}: the entry for {modules} names {missing[0]}: no such file")
    return [(entry["modules"], entry["tests"]) for entry in entries]


def own_tests(module: str) -> str | None:
    """The test file of ``module`` by the layout: ``fedbench/<package>/<module>.py`` →
    ``tests/<package>/test_<module>.py`` (``fedbench/<module>.py`` → ``tests/test_<module>.py``), or
    ``tests/<package>/test_<package>_<module>.py`` where two packages share a module name; None if it has neither.
    A private module's leading underscore is not part of the name (``_registry.py`` → ``test_registry.py``)."""
    path = Path(module).relative_to("fedbench")
    folder = Path("tests", *path.parent.parts)
    stem = path.stem.lstrip("_")
    names = [f"test_{stem}.py"] + ([f"test_{path.parent.name}_{stem}.py"] if path.parent.parts else [])
    return next((str(folder / name) for name in names if (ROOT / folder / name).is_file()), None)


def tests_for(module: str, mapping: list[tuple[list[str], list[str]]]) -> list[str]:
    """The module's own test file, then the tests of the first map entry that covers it: one that names it, or one
    whose glob matches it (a package's catch-all) if it has no file of its own. A node id of the own file already runs
    with it. An error if the module has no tests either way."""
    own = own_tests(module)
    covering = (
        tests
        for patterns, tests in mapping
        if module in patterns or (own is None and any(fnmatch.fnmatchcase(module, p) for p in patterns))
    )
    extra = next(covering, [])
    tests = [own] if own else []
    tests += [test for test in extra if test.split("::")[0] != own and test not in tests]
    if not tests:
        raise MutationError(
            f"{module}: no test file of its own (tests/<package>/test_<module>.py) and no entry in"
            f" {MAP.name}; add the file, or an entry naming the tests that exercise it"
        )
    return tests


def load_equivalents() -> list[dict[str, str]]:
    """Entries {module, line, mutant, reason}: ``line`` the original source line, ``mutant`` the mutated line (both
    stripped of indentation, as the JSON's survivors show them; "" where the mutant deletes the line)."""
    if not EQUIVALENTS.exists():
        return []
    entries = tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])
    for i, entry in enumerate(entries):
        missing = [key for key in ("module", "line", "reason") if not str(entry.get(key, "")).strip()]
        missing += [] if isinstance(entry.get("mutant"), str) else ["mutant"]
        if missing:
            raise MutationError(f"{EQUIVALENTS.relative_to(ROOT)}: equivalent[{i}] lacks {', '.join(missing)}")
    return entries


# ------------------------------------------------------------------------------------------- mutants
@dataclass
class Mutant:
    module: str
    function: str
    line_number: int  # 1-based
    original: str
    mutated: str
    status: str = "pending"  # killed | timeout | survived | equivalent
    seconds: float = 0.0
    reason: str = ""  # an equivalent's reason
    source: str = field(default="", repr=False)  # the whole mutated module


def function_spans(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, first line, last line) of every function, decorators included."""
    spans: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                spans.append((name, first, child.end_lineno or child.lineno))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return spans


def function_at(spans: list[tuple[str, int, int]], line: int) -> str:
    inside = [(end - first, name) for name, first, end in spans if first <= line <= end]
    return min(inside)[1] if inside else "<module>"


def changed_lines(before: str, after: str) -> tuple[str, str]:
    old, new = before.splitlines(), after.splitlines()
    removed, added = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += old[i1:i2]
            added += new[j1:j2]
    return " ⏎ ".join(s.strip() for s in removed), " ⏎ ".join(s.strip() for s in added)


def mutants_of(module: str, lines: set[int] | None = None) -> list[Mutant]:
    """mutmut's mutants of ``module`` (only those on ``lines``, 1-based, when given)."""
    import mutmut

    source = (ROOT / module).read_text()
    spans = function_spans(source)
    out = []
    for mutation_id in mutmut.list_mutations(mutmut.Context(source=source, filename=module)):
        line = mutation_id.line_number + 1
        if lines is not None and line not in lines:
            continue
        mutated, count = mutmut.mutate(mutmut.Context(source=source, filename=module, mutation_id=mutation_id))
        if not count or mutated == source:
            continue
        original, changed = changed_lines(source, mutated)
        out.append(Mutant(module, function_at(spans, line), line, original, changed, source=mutated))
    return out


# ------------------------------------------------------------------------------------------- running
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
RUNNING: set[int] = set()  # the forked mutant process (its process group), killed with the run


def _terminate(signum, frame) -> None:
    """`kill` of a run cleans up like Ctrl-C: the mutant's tests stop, the sandbox goes (the worktree was never
    touched)."""
    for pid in list(RUNNING):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sys.exit(143)


class Sandbox:
    """A private copy of the worktree in which one module at a time is replaced by a mutant."""

    def __init__(self):
        self.directory = Path(tempfile.mkdtemp(prefix="fedbench-mutation-"))
        for name in ("fedbench", "tests", "recipes", "docs"):
            if (ROOT / name).exists():
                shutil.copytree(ROOT / name, self.directory / name, ignore=IGNORE)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, self.directory / name)

    def run(
        self, module: str, source: str | None, tests: list[str], limit: float, record: Path | None = None
    ) -> tuple[str, float]:
        """Run ``tests`` with ``module`` replaced by ``source`` (None: the original): (outcome, seconds), outcome
        "passed", "failed" or "timeout". ``record``: write there which of ``module``'s functions each test calls
        (``CallRecorder``; fork only)."""
        path = self.directory / module
        original = path.read_text()
        if source is not None:
            path.write_text(source)
        try:
            return self._pytest(tests, limit, (path, record) if record is not None else None)
        finally:
            path.write_text(original)

    def _pytest(self, tests: list[str], limit: float, record: tuple[Path, Path] | None = None) -> tuple[str, float]:
        args = ["-x", "-q", "-p", "no:cacheprovider", "-m", "not slow", "--timeout", str(int(limit) + 30), *tests]
        began = time.monotonic()
        pid = os.fork() if hasattr(os, "fork") else None
        if pid is None:  # no fork (not POSIX): a fresh interpreter per mutant
            command = [sys.executable, "-B", "-m", "pytest", *args]
            env = {**os.environ, "PYTHONPATH": str(self.directory), "PYTHONDONTWRITEBYTECODE": "1"}
            try:
                code = subprocess.run(
                    command, cwd=self.directory, env=env, capture_output=True, timeout=limit
                ).returncode
            except subprocess.TimeoutExpired:
                return "timeout", time.monotonic() - began
            return ("passed" if code == 0 else "failed"), time.monotonic() - began
        RUNNING.add(pid)
        if pid == 0:  # the child: run the tests against the sandbox's fedbench, quietly
            code = 3
            try:
                os.setpgid(0, 0)
                sys.dont_write_bytecode = True
                os.chdir(self.directory)
                sys.path.insert(0, str(self.directory))
                os.environ["PYTHONPATH"] = str(self.directory)
                os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                import pytest

                plugins = [call_recorder(*record)] if record is not None else []
                code = int(pytest.main(args, plugins=plugins))
                for plugin in plugins:
                    plugin.write()
            finally:
                os._exit(code)
        deadline = began + limit
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                RUNNING.discard(pid)
                code = os.waitstatus_to_exitcode(status)
                return ("passed" if code == 0 else "failed"), time.monotonic() - began
            if time.monotonic() > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                RUNNING.discard(pid)
                return "timeout", time.monotonic() - began
            time.sleep(0.02)

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def call_recorder(module_path: Path, out: Path):
    """A pytest plugin for the unmutated run: which functions of the mutated module each test calls, directly or
    through the fixtures it uses (a module- or session-scoped fixture runs once, inside the first test that needs
    it, yet every test using it depends on what it computed). Only ``call`` events are traced, no lines: cheap.

    A mutant inside a function then runs only the tests that call that function: a deterministic test that never
    calls it runs identically on the mutant, so leaving it out changes no verdict. ``write()`` stores
    ``{"order": [node ids, in run order], "calls": {node id: [function]}}`` in ``out``."""
    import threading

    import pytest

    filename = str(module_path)
    starts = {first: name for name, first, _ in function_spans(module_path.read_text())}

    class CallRecorder:
        def __init__(self):
            self.active: list[str] = []  # the running test, and the fixtures being set up inside it
            self.calls: dict[str, set[str]] = {}
            self.fixtures: dict[str, list[str]] = {}  # node id -> the fixtures it uses
            self.order: list[str] = []

        def trace(self, frame, event, arg):
            if event == "call" and frame.f_code.co_filename == filename:
                name = starts.get(frame.f_code.co_firstlineno)
                if name is not None:
                    for context in self.active:
                        self.calls.setdefault(context, set()).add(name)
            return None  # no line tracing

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_protocol(self, item, nextitem):
            self.order.append(item.nodeid)
            self.fixtures[item.nodeid] = list(getattr(item, "fixturenames", ()))
            self.active = [item.nodeid]
            sys.settrace(self.trace)
            threading.settrace(self.trace)
            try:
                yield
            finally:
                sys.settrace(None)
                threading.settrace(None)  # type: ignore[arg-type]
                self.active = []

        @pytest.hookimpl(hookwrapper=True)
        def pytest_fixture_setup(self, fixturedef, request):
            self.active.append(f"fixture:{fixturedef.argname}")
            try:
                yield
            finally:
                self.active.pop()

        def write(self) -> None:
            calls = {
                nodeid: sorted(
                    self.calls.get(nodeid, set()).union(
                        *(self.calls.get(f"fixture:{name}", set()) for name in self.fixtures[nodeid])
                    )
                )
                for nodeid in self.order
            }
            out.write_text(json.dumps({"order": self.order, "calls": calls}))

    return CallRecorder()


def tests_calling(function: str, calls: dict | None, tests: list[str]) -> list[str]:
    """The tests (node ids, in run order) that call ``function`` in the unmutated run; all of ``tests`` for a mutant
    outside functions (class bodies, module constants, decorators of classes: their effect reaches every test), when
    no test calls the function (a function called only at import or in a worker process: no record of who depends on
    it), or without a record."""
    if calls is None or function == "<module>":
        return tests
    chosen = [nodeid for nodeid in calls["order"] if function in calls["calls"].get(nodeid, ())]
    return chosen or tests


def run_module(
    sandbox: Sandbox,
    module: str,
    tests: list[str],
    mutants: list[Mutant],
    equivalents: list[dict],
    log,
    select: bool = True,
) -> dict:
    record = sandbox.directory / ".mutation-calls.json" if select and hasattr(os, "fork") else None
    outcome, baseline = sandbox.run(module, None, tests, limit=1800, record=record)
    if outcome != "passed":
        raise MutationError(f"{module}: its tests ({' '.join(tests)}) do not pass unmutated: {outcome}")
    calls = json.loads(record.read_text()) if record is not None and record.exists() else None
    limit = max(60.0, 10 * baseline)
    for i, mutant in enumerate(mutants, 1):
        match = next(
            (
                e
                for e in equivalents
                if e["module"] == module
                and e["line"].strip() == mutant.original.strip()
                and e["mutant"].strip() == mutant.mutated.strip()
            ),
            None,
        )
        chosen = tests_calling(mutant.function, calls, tests)  # only the tests that reach the mutated function
        outcome, mutant.seconds = sandbox.run(module, mutant.source, chosen, limit)
        if outcome == "timeout":  # a busy machine is no reason to call a mutant killed: once more, with 5× the time
            outcome, mutant.seconds = sandbox.run(module, mutant.source, chosen, 5 * limit)
        if outcome == "passed" and match is not None:
            mutant.status, mutant.reason = "equivalent", match["reason"]
        else:
            mutant.status = {"passed": "survived", "failed": "killed", "timeout": "timeout"}[outcome]
        log(f"  [{i}/{len(mutants)}] {mutant.status:<10} {module}:{mutant.line_number} {mutant.mutated[:90]}")
    counted = [m for m in mutants if m.status != "equivalent"]
    detected = sum(m.status in ("killed", "timeout") for m in counted)
    used = {(e["line"].strip(), e["mutant"].strip()) for e in equivalents if e["module"] == module}
    matched = {(m.original.strip(), m.mutated.strip()) for m in mutants if m.status == "equivalent"}
    return {
        "tests": tests,
        "baseline_seconds": round(baseline, 1),
        "mutants": len(mutants),
        "killed": sum(m.status == "killed" for m in mutants),
        "timeout": sum(m.status == "timeout" for m in mutants),
        "survived": sum(m.status == "survived" for m in mutants),
        "equivalent": len(mutants) - len(counted),
        "score": round(100.0 * detected / len(counted), 1) if counted else 100.0,
        "survivors": [
            {"function": m.function, "line_number": m.line_number, "line": m.original, "mutant": m.mutated}
            for m in mutants
            if m.status == "survived"
        ],
        "equivalents": [
            {"function": m.function, "line": m.original, "mutant": m.mutated, "reason": m.reason}
            for m in mutants
            if m.status == "equivalent"
        ],
        # listed as equivalent, yet no mutant of this run matched (or its tests failed it): fix the file
        "unmatched_equivalents": sorted(" → ".join(pair) for pair in used - matched) if len(mutants) else [],
    }


# ------------------------------------------------------------------------------------------- changed functions
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def touched_lines(module: str, base: str, recorded_path: str | None = None) -> set[int]:
    """Every line of each function that ``git diff BASE`` (working tree included) touches in ``module``, plus the
    touched lines outside functions. ``recorded_path``: where the module was at BASE, if it moved since (a move
    alone touches no line)."""
    paths = [module] if recorded_path in (None, module) else [recorded_path, module]
    diff = subprocess.run(
        ["git", "diff", "-U0", "-M", base, "--", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    changed: set[int] = set()
    for start, count in HUNK.findall(diff):
        first, length = int(start), int(count) if count else 1
        changed |= set(range(first, first + length)) if length else {first}
    if not changed:
        return set()
    spans = function_spans((ROOT / module).read_text())
    lines = set(changed)
    for _, first, end in spans:
        if any(first <= line <= end for line in changed):
            lines |= set(range(first, end + 1))
    return lines


def recorded_source(module: str, entry: dict) -> str | None:
    """The module's source at its recorded run (under the path it had then); None if git lacks it."""
    path = entry.get("recorded_path", module)
    shown = subprocess.run(["git", "show", f"{entry['commit']}:{path}"], cwd=ROOT, capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else None


def record_base(module: str, recorded: dict) -> str | None:
    """The commit of ``module``'s recorded whole-module run (CI mutates the functions changed since it, so the recorded
    score stays a statement about the code as it is); None without a record or when this clone lacks that commit (a
    shallow clone: the caller says so)."""
    entry = recorded.get(module)
    if entry is None:
        return None
    known = subprocess.run(["git", "cat-file", "-e", f"{entry['commit']}^{{commit}}"], cwd=ROOT, capture_output=True)
    return entry["commit"] if known.returncode == 0 else None


def spread(mutants: list[Mutant], limit: int) -> list[Mutant]:
    """At most ``limit`` of ``mutants``: those with the smallest digests of what they are (module, function, the line
    and its mutation), in their order. The choice is the same on every run and, unlike every k-th mutant, stable
    under changes elsewhere: the unchanged mutants keep their order, so a change to one function can move the draw's
    share between that function and the rest, never swap a mutant elsewhere for another one."""
    if limit <= 0 or len(mutants) <= limit:
        return mutants
    seen: Counter[tuple[str, str, str, str]] = Counter()
    digests = []
    for m in mutants:
        identity = (m.module, m.function, m.original, m.mutated)
        seen[identity] += 1  # the same mutation twice in one function: told apart by its occurrence
        digests.append(hashlib.sha256("\0".join([*identity, str(seen[identity])]).encode()).hexdigest())
    chosen = set(sorted(range(len(mutants)), key=digests.__getitem__)[:limit])
    return [m for i, m in enumerate(mutants) if i in chosen]


# ------------------------------------------------------------------------------------------- survivors only
def recorded_survivors(module: str, recorded: dict, mutants: list[Mutant]) -> list[Mutant]:
    """The mutants of ``module`` that its recorded run lists as survivors; an error if there is no recorded run or
    the module's source changed since it (the recorded verdicts would be of other mutants)."""
    entry = recorded.get(module)
    if entry is None:
        raise MutationError(f"{module}: no recorded run to take the survivors from; run the whole module first")
    if recorded_source(module, entry) != (ROOT / module).read_text():
        raise MutationError(f"{module} changed since its recorded run ({entry['commit'][:10]}); run the whole module")
    wanted = {(s["line_number"], s["line"], s["mutant"]) for s in entry["survivors"]}
    return [m for m in mutants if (m.line_number, m.original, m.mutated) in wanted]


def merge_survivors(entry: dict, rerun: dict, stamp: dict) -> dict:
    """The recorded entry with its survivors' new verdicts (killed, timed out, equivalent or still surviving)."""
    merged = {**entry}
    for key in ("killed", "timeout", "equivalent"):
        merged[key] = entry[key] + rerun[key]
    merged["survived"] = rerun["survived"]
    merged["survivors"] = rerun["survivors"]
    merged["equivalents"] = entry.get("equivalents", []) + rerun["equivalents"]
    counted = merged["mutants"] - merged["equivalent"]
    merged["score"] = round(100.0 * (merged["killed"] + merged["timeout"]) / counted, 1) if counted else 100.0
    merged["survivors_rerun"] = {**stamp, "tests": rerun["tests"], "mutants": rerun["mutants"]}
    return merged


# ------------------------------------------------------------------------------------------- report
def table(results: dict[str, dict]) -> str:
    lines = [f"{'module':<38} {'killed':>7} {'timeout':>7} {'survived':>8} {'equiv.':>6} {'total':>6} {'score':>7}"]
    for module, r in results.items():
        lines.append(
            f"{module:<38} {r['killed']:>7} {r['timeout']:>7} {r['survived']:>8} {r['equivalent']:>6} "
            f"{r['mutants']:>6} {r['score']:>6.1f}%"
        )
    return "\n".join(lines)


def git_commit() -> str:
    result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return result.stdout.strip()


def git_dirty() -> bool:
    """Uncommitted changes in what the sandbox copies (the recorded commit then does not say what was mutated)."""
    paths = ["fedbench", "tests", "recipes", "docs", "pyproject.toml"]
    result = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=ROOT, capture_output=True, text=True)
    return bool(result.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: every module of the targets)")
    parser.add_argument("--changed-since", metavar="BASE", help="mutate only the functions changed since git BASE")
    parser.add_argument(
        "--changed-since-record",
        action="store_true",
        help="mutate only the functions changed since each module's recorded run in --out (CI; modules without a"
        " record are skipped)",
    )
    parser.add_argument(
        "--max-mutants",
        type=int,
        default=0,
        metavar="N",
        help="run at most N mutants, a stable sample of all the selected ones (CI's time budget; 0: no limit)",
    )
    parser.add_argument(
        "--functions", nargs="+", metavar="NAME", help="mutate only these functions (qualified: Class.method)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON results (merged: other modules' entries stay)")
    parser.add_argument("--fail-under", type=float, default=None, help="exit 1 if a module scores below this (%%)")
    parser.add_argument("--quiet", action="store_true", help="no line per mutant")
    parser.add_argument(
        "--all-tests",
        action="store_true",
        help="run every mapped test for every mutant (default: a mutant inside a function runs only the mapped tests"
        " that call that function in the unmutated run)",
    )
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="re-run only the survivors that --out records for these modules (after adding tests); the other mutants"
        " keep their recorded verdicts, so the module's source must be unchanged since the recorded run",
    )
    parser.add_argument("--list", action="store_true", help="print the mutants that would run, and run none")
    args = parser.parse_args(argv)
    log = (lambda _: None) if args.quiet else (lambda line: print(line, flush=True))
    recorded = json.loads(args.out.read_text()).get("modules", {}) if args.out.exists() else {}

    try:
        mapping, equivalents = load_map(), load_equivalents()
        known = target_files()
        modules = args.modules or known
        unknown = [m for m in modules if m not in known]
        if unknown:
            raise MutationError(f"not a mutation target: {', '.join(unknown)} (targets: {', '.join(TARGETS)})")
        if args.changed_since and args.changed_since_record:
            raise MutationError("--changed-since and --changed-since-record exclude each other")
        plan = {}
        unrecorded = []
        for module in modules:
            base = args.changed_since
            if args.changed_since_record:
                base = record_base(module, recorded)
                if base is None:
                    if mutants_of(module):  # (a package's empty __init__ has nothing to record)
                        unrecorded.append(module)
                    continue
            recorded_path = recorded.get(module, {}).get("recorded_path") if args.changed_since_record else None
            lines = touched_lines(module, base, recorded_path) if base else None
            if lines is not None and not lines:
                continue
            mutants = mutants_of(module, lines)
            if args.functions:
                mutants = [m for m in mutants if m.function in args.functions]
            if args.survivors:
                mutants = recorded_survivors(module, recorded, mutants)
            plan[module] = (tests_for(module, mapping), mutants)
    except (MutationError, subprocess.CalledProcessError, tomllib.TOMLDecodeError) as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    changed_only = bool(args.changed_since or args.changed_since_record)
    if unrecorded:
        print(f"mutation: no recorded run (or its commit is not in this clone) for: {', '.join(unrecorded)}")
    totals = {module: len(mutants) for module, (_, mutants) in plan.items()}
    if args.max_mutants:
        selected = spread([m for _, mutants in plan.values() for m in mutants], args.max_mutants)
        total = sum(len(mutants) for _, mutants in plan.values())
        if len(selected) < total:
            print(
                f"mutation: {len(selected)} of the {total} mutants, a stable sample (--max-mutants {args.max_mutants})"
            )
        keep = {id(m) for m in selected}
        plan = {module: (tests, [m for m in mutants if id(m) in keep]) for module, (tests, mutants) in plan.items()}
    if not any(mutants for _, mutants in plan.values()):
        print("mutation: no function of the targets changed" if changed_only else "mutation: no mutants")
        return 0
    if args.list:
        for module, (_, mutants) in plan.items():
            for m in mutants:
                print(f"{module}:{m.line_number} ({m.function}): {m.original} → {m.mutated}")
        return 0

    import importlib

    for name in PRELOAD:  # loaded once here, shared by every forked mutant process
        try:
            importlib.import_module(name)
        except ImportError:  # an optional one (hypothesis): the children import what they need
            pass
    signal.signal(signal.SIGTERM, _terminate)
    # the commit the sandbox copies (taken now: the worktree may move on while the mutants run)
    stamp = {"commit": git_commit(), "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if git_dirty():
        stamp["dirty"] = True
    sandbox = Sandbox()
    results: dict[str, dict] = {}
    try:
        for module, (tests, mutants) in plan.items():
            if not mutants:
                continue
            log(f"{module}: {len(mutants)} mutants, tests {' '.join(tests)}")
            results[module] = run_module(sandbox, module, tests, mutants, equivalents, log, select=not args.all_tests)
    except MutationError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    finally:
        sandbox.remove()

    if args.survivors:
        print(f"re-run of the recorded survivors (verdicts of the other mutants as recorded in {args.out.name}):")
    print(table(results))
    for module, r in results.items():
        for survivor in r["survivors"]:
            print(f"survived: {module}:{survivor['line_number']} ({survivor['function']}): {survivor['mutant']}")
        for entry in [] if args.survivors else r["unmatched_equivalents"]:  # a re-run sees the survivors only
            print(f"warning: {module}: equivalents entry matched no surviving mutant: {entry}")

    if not changed_only:  # the per-module record is of whole-module runs only (a --max-mutants sample says so)
        from importlib.metadata import version

        previous = json.loads(args.out.read_text()) if args.out.exists() else {}
        record = {
            "tool": f"mutmut {version('mutmut')} mutation operators, run by tools/mutation.py",
            "target_score": TARGET_SCORE,
            "modules": {**previous.get("modules", {})},
        }
        for module, r in results.items():
            if args.survivors:  # the recorded run, its survivors replaced by this run's verdicts on them
                record["modules"][module] = merge_survivors(recorded[module], r, stamp)
                continue
            scope = {"functions": sorted(args.functions)} if args.functions else {"functions": "all"}
            if r["mutants"] < totals[module]:  # a stable sample of the module (``spread``): the score is an estimate
                scope["sampled"] = {"of": totals[module], "by": f"--max-mutants {args.max_mutants}"}
            record["modules"][module] = {**scope, **r, **stamp}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        print(f"written to {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")

    failing = (
        [m for m, r in results.items() if r["survived"]]
        if changed_only or args.max_mutants
        else [m for m, r in results.items() if args.fail_under is not None and r["score"] < args.fail_under]
    )
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
