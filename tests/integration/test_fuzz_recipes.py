"""Property-based fuzzing of the recipe loader and of ``run --set/--only/--seeds`` through the CLI.

Every generated input either compiles (exit 0) or is a user error: exit 2, exactly one line on stderr that names
the key or the value at fault, no traceback, and no registry file created (``run --dry-run`` never writes one).

Generated inputs are valid recipes (tests/conftest.py's TINY_RECIPE) mutated: a value replaced by one of another
type or out of range, an unknown key added at any depth, a key deleted, a plug-in name replaced, weird unicode in
keys and values, nested junk; and command lines with junk ``--set``/``--only``/``--seeds``.

Examples per run come from a settings profile: ``default`` (the normal suite: 200 examples in all, derandomized so a
failure reproduces), ``fuzz`` (``make fuzz``: HYPOTHESIS_PROFILE=fuzz, 5,000 in all, also derandomized; set
HYPOTHESIS_PROFILE=fuzz-random to explore new examples on each run).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.recipes.assignments import parse_value
from fedbench.spec import SETUP_KEYS

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
# share of each test in the profile's total (default 200 examples, fuzz 5,000)
TOTAL = {"default": 200, "fuzz": 5000, "fuzz-random": 5000}.get(PROFILE, 200)


def fuzz_settings(share: float) -> settings:
    return settings(
        max_examples=max(1, int(TOTAL * share)),
        deadline=None,
        derandomize=PROFILE != "fuzz-random",
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        database=None,
    )


runner = CliRunner()

BASE_RECIPE = """
paper = "testpaper"
name = "tiny"
title = "Tiny digits recipe"
seeds = [0, 1]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 32 }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 2
rounds = 3
batch_size = 64
optimizer = { lr = 0.1, momentum = 0.5 }
lr_schedule = { name = "step", milestones = [2], gamma = 0.5 }
augmentation = { crop_padding = 1 }
targets = [50]

[matrix]
algorithm = ["fedavg", "fedprox"]
local_epochs = [1, 2]

[overrides.algorithm.fedprox]
algorithm_params = { mu = 0.01 }

[[combination]]
match = { algorithm = "fedavg", local_epochs = "2" }
set = { batch_size = 32 }

[scale.smoke]
rounds = 2
seeds = [0]

[[tables]]
name = "acc"
title = "Best accuracy"
rows = ["algorithm"]
columns = ["local_epochs"]
figure = "best"

[tables.published.fedavg]
1 = 50.0
2 = 51.0
"""
BASE = tomllib.loads(BASE_RECIPE)


# ----------------------------------------------------------------------------------------- TOML writing
def toml_string(text: str) -> str:
    # JSON escapes are TOML basic-string escapes; TOML also forbids a literal DEL
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def to_toml(document: dict[str, Any]) -> str:
    """One ``key = value`` line per top-level key (tables inline): parses back to ``document``."""
    return "".join(f"{toml_string(key)} = {toml_value(value)}\n" for key, value in document.items())


def test_toml_writer_round_trips():
    text = to_toml(BASE)
    assert tomllib.loads(text) == BASE
    odd = {"k\x7f\n:smile:[b]": [1.5, -0.0, "é\u2028", {"": True}], "n": float("inf")}
    assert tomllib.loads(to_toml(odd)) == odd


# ----------------------------------------------------------------------------------------- strategies
# Text that stresses the one-line printing: newlines, line/paragraph separators, rich markup and emoji codes,
# quotes, backslashes, right-to-left marks, NUL, combining marks, astral characters.
NASTY = ["\n", "\r", "\u2028", "\u2029", "[red]", "[/]", ":smile:", "'", '"', "\\", "\u202e", "\x00", "e\u0301", "😀"]
names = st.one_of(
    st.text(min_size=0, max_size=12),
    st.sampled_from(["fedavg", "fedavgg", "FedAvg", "digits", "mnist", "cnn", "", " ", "ä", "dirichlet"]),
    st.lists(st.sampled_from(NASTY + ["a", "b", "_", "."]), min_size=1, max_size=6).map("".join),
)
finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, 1, 2**31, 10**12]),
    finite,
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e-300, -0.0, 0.5, 1.0]),
    names,
)
junk = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(names, inner, max_size=4),
    ),
    max_leaves=8,
)


def leaf_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into the document (dict keys and list indices), leaves and inner nodes alike."""
    paths = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            paths += leaf_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            paths += leaf_paths(value, (*prefix, index))
    return paths


def leaf_values(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [v for value in node.values() for v in leaf_values(value)] + list(node)
    if isinstance(node, list):
        return [v for value in node for v in leaf_values(value)]
    return [node]


def table_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths of the document's tables (where a key can be added)."""
    paths = []
    if isinstance(node, dict):
        paths.append(prefix)
        for key, value in node.items():
            paths += table_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            paths += table_paths(value, (*prefix, index))
    return paths


PATHS = leaf_paths(BASE)
TABLES = table_paths(BASE)


def parent_of(document: Any, path: tuple) -> Any:
    node = document
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def mutated_recipes(draw) -> tuple[dict[str, Any], list[str]]:
    """A mutated copy of BASE and the words (keys, values) a message about the mutations could name."""
    document = json.loads(json.dumps(BASE))  # deep copy
    words: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["replace", "add", "delete", "rename_plugin", "range"]))
        if kind == "replace":
            path = draw(st.sampled_from([p for p in leaf_paths(document)] or [("setup",)]))
            value = draw(junk)
            try:
                parent = parent_of(document, path)
                words += [str(v) for v in leaf_values(parent[path[-1]])]  # what referred to the old value may name it
                parent[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                continue
            words += [str(p) for p in path] + [str(v) for v in (value, *leaf_values(value))]
        elif kind == "add":
            path = draw(st.sampled_from(table_paths(document)))
            key = draw(names)
            try:
                node = document
                for part in path:
                    node = node[part]
                value = draw(junk)
                node[key] = value
            except (KeyError, IndexError, TypeError):
                continue
            words += [str(p) for p in path] + [key] + [str(v) for v in leaf_values(value)]
        elif kind == "delete":
            path = draw(st.sampled_from(leaf_paths(document) or [("setup",)]))
            try:
                parent = parent_of(document, path)
                words += [str(v) for v in leaf_values(parent[path[-1]])]  # what referred to it may name it
                if isinstance(parent, dict):
                    del parent[path[-1]]
                else:
                    parent.pop(path[-1])
            except (KeyError, IndexError, TypeError):
                continue
            words += [str(p) for p in path]
        elif kind == "rename_plugin":
            key = draw(st.sampled_from(["algorithm", "dataset", "model", "partition"]))
            name = draw(names)
            table = document.setdefault("matrix" if key == "algorithm" else "setup", {})
            if not isinstance(table, dict):
                continue
            table[key] = ["fedavg", name] if key == "algorithm" else name
            words += [key, name]
        else:
            key = draw(
                st.sampled_from(
                    ["num_clients", "clients_per_round", "rounds", "batch_size", "local_epochs", "eval_every"]
                )
            )
            value = draw(st.one_of(st.integers(-(10**6), 0), st.sampled_from([10**9, 2**62, 3, 5])))
            setup = document.setdefault("setup", {})
            if not isinstance(setup, dict):
                continue
            setup[key] = value
            words += [key, str(value)]
    return document, words


# ----------------------------------------------------------------------------------------- the property
def run_cli(args: list[str]) -> Any:
    return runner.invoke(app, args)


def check_outcome(result: Any, registry: Path, words: list[str]) -> None:
    """Exit 0, or exit 2 with one line naming one of ``words``; never a traceback, never a registry."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    assert not registry.exists(), "a dry run or a bad input created the registry"
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert "Traceback" not in result.stderr
        message = lines[0]
        # the message names the key or the value it is about (in any of the forms messages use: plain, repr)
        assert not words or any(named(message, word) for word in words), (message, words)


def named(message: str, word: str) -> bool:
    forms = {form for w in (word, word.strip()) for form in (w, repr(w), repr(w)[1:-1], json.dumps(w)[1:-1])}
    return any(form and form in message for form in forms)


@fuzz_settings(0.6)
@given(mutated_recipes(), st.sampled_from(["full", "smoke"]))
def test_mutated_recipes_compile_or_exit_2_naming_the_key(case, scale):
    document, words = case
    with tempfile.TemporaryDirectory() as tmp:
        recipe = Path(tmp) / "fuzz.toml"
        recipe.write_text(to_toml(document))
        registry = Path(tmp) / "reg" / "fedbench.db"
        result = run_cli(["run", str(recipe), "--dry-run", "--scale", scale, "--registry", f"sqlite:///{registry}"])
        check_outcome(result, registry, words)


@fuzz_settings(0.1)
@given(st.text(max_size=200))
def test_arbitrary_text_is_valid_toml_or_says_where_it_is_not(text):
    with tempfile.TemporaryDirectory() as tmp:
        recipe = Path(tmp) / "junk.toml"
        try:
            recipe.write_text(text)
        except UnicodeEncodeError:
            assume(False)
        registry = Path(tmp) / "reg" / "fedbench.db"
        result = run_cli(["run", str(recipe), "--dry-run", "--registry", f"sqlite:///{registry}"])
        check_outcome(result, registry, [str(recipe)])


SET_KEYS = st.one_of(
    st.sampled_from(list(SETUP_KEYS) + ["targets", "optimizer.lr", "algorithm_params.mu", "model_params.hidden"]),
    names,
    st.lists(st.sampled_from(["optimizer", "lr", "model_params", "x", "", "seed"]), min_size=1, max_size=4).map(
        ".".join
    ),
)
SET_VALUES = st.one_of(
    scalars.map(toml_value),
    junk.map(toml_value),
    st.text(max_size=10),
    st.sampled_from(["", "[", "{", "'", '"', "1,2", "fedavg", "1e999", "0x10", "[1, 'a']"]),
)


@st.composite
def command_lines(draw) -> tuple[list[str], list[str]]:
    args: list[str] = []
    words: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        key, value = draw(SET_KEYS), draw(SET_VALUES)
        separator = draw(st.sampled_from(["=", "=", "", " = "]))
        args += ["--set", f"{key}{separator}{value}"]
        parsed = args[-1].partition("=")[0]  # the key as KEY=VALUE splits it (at the first "=")
        words += [key, value, *key.split("."), args[-1], parsed, *parsed.split(".")]
        words += [str(v) for v in leaf_values(parse_value(value))]
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.one_of(st.sampled_from(["algorithm", "local_epochs", "seed"]), names))
        value = draw(st.one_of(st.sampled_from(["fedavg", "fedprox", "1", "2", "0", "1.0", "[1]"]), names))
        args += ["--only", f"{key}={value}"]
        words += [key, value, args[-1], args[-1].partition("=")[0]]
    if draw(st.booleans()):
        seeds = draw(
            st.one_of(
                st.lists(st.integers(-5, 10**12), max_size=4).map(lambda s: ",".join(map(str, s))),
                st.text(max_size=10),
                st.sampled_from(["0,,1", " 1 , 2", "1;2", "0x1", "1e3", "-1", "0,0"]),
            )
        )
        args += ["--seeds", seeds]
        words += [seeds, "--seeds"]
    return args, words


@fuzz_settings(0.3)
@given(command_lines())
def test_set_only_seeds_compile_or_exit_2_naming_the_option(case):
    args, words = case
    with tempfile.TemporaryDirectory() as tmp:
        recipe = Path(tmp) / "base.toml"
        recipe.write_text(BASE_RECIPE)
        registry = Path(tmp) / "reg" / "fedbench.db"
        result = run_cli(["run", str(recipe), "--dry-run", "--registry", f"sqlite:///{registry}", *args])
        check_outcome(result, registry, words)


# ----------------------------------------------------------------------------------------- regressions
# Bugs the fuzzer found, each pinned by one example.
def invoke_dry_run(tmp_path: Path, text: str, *args: str) -> Any:
    recipe = tmp_path / "r.toml"
    recipe.write_text(text)
    registry = tmp_path / "reg" / "fedbench.db"
    result = run_cli(["run", str(recipe), "--dry-run", "--registry", f"sqlite:///{registry}", *args])
    assert not registry.exists()
    return result


def test_regression_scale_seeds_not_a_list_is_a_recipe_error_not_a_traceback(tmp_path):
    result = invoke_dry_run(tmp_path, BASE_RECIPE.replace("seeds = [0]", "seeds = false"), "--scale", "smoke")
    assert result.exit_code == 2 and "scale.smoke.seeds = False: expected a non-empty list" in result.stderr


def test_regression_empty_seed_lists_are_errors_not_an_empty_batch(tmp_path):
    result = invoke_dry_run(tmp_path, BASE_RECIPE.replace("seeds = [0, 1]", "seeds = []"))
    assert result.exit_code == 2 and "seeds = []: expected a non-empty list" in result.stderr
    result = invoke_dry_run(tmp_path, BASE_RECIPE, "--seeds", ",", "--only", "algorithm=fedavg")
    assert result.exit_code == 2 and "--seeds ','" in result.stderr  # was: "no runs match: check --only filters"


def test_regression_an_empty_parameter_name_is_quoted(tmp_path):
    text = BASE_RECIPE.replace("model_params = { hidden = 32 }", 'model_params = { hidden = 32, "" = 1 }')
    result = invoke_dry_run(tmp_path, text)
    assert result.exit_code == 2 and "has no parameter(s) ''" in result.stderr


def test_regression_keys_with_emoji_codes_and_newlines_print_as_written_on_one_line(tmp_path):
    result = invoke_dry_run(tmp_path, '":SMILE:" = 1\n' + BASE_RECIPE)
    assert result.exit_code == 2 and "unknown key ':SMILE:'" in result.stderr  # rich made it 😄
    text = BASE_RECIPE.replace("optimizer = { lr = 0.1,", 'optimizer = { "m\\nx" = 1, lr = 0.1,')
    result = invoke_dry_run(tmp_path, text)  # pydantic's error location joined the key in as written
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and "optimizer.m\\nx" in result.stderr
