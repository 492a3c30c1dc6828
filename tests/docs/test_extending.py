"""docs/extending.md cannot drift from the code it shows. Every fenced block whose first line is a comment naming a
file of the repository (``# examples/my-fl-method/…``) is a verbatim excerpt of that file; a Python block whose first
line names a bare ``.py`` file is that file of the reader's, written into a scratch folder; every other Python block
runs there, in the guide's order, in one fresh process (the ``test_*`` functions it defines are called); and every
``fedbench`` command line names a command and options the command line has."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from fedbench.cli import app
from fedbench.execution.contract.properties import PROPERTIES

REPOSITORY = Path(__file__).resolve().parents[2]
GUIDE = REPOSITORY / "docs" / "extending.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NAMED = re.compile(r"# (\S+\.(?:py|toml))")


def fenced() -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced block of the guide, in order."""
    return [(language, body.splitlines()) for language, body in FENCE.findall(GUIDE.read_text(encoding="utf-8"))]


def named(lines: list[str]) -> str | None:
    """The file a block's first line names (``# path/to/file.py``), if it names one."""
    match = NAMED.fullmatch(lines[0]) if lines else None
    return match.group(1) if match else None


EXCERPTS = [(name, lines[1:]) for _, lines in fenced() if (name := named(lines)) and "/" in name]


@pytest.mark.parametrize(("path", "lines"), EXCERPTS, ids=[f"{path}:{lines[0].strip()}" for path, lines in EXCERPTS])
def test_a_block_naming_a_file_is_an_excerpt_of_it(path, lines):
    text = (REPOSITORY / path).read_text(encoding="utf-8").splitlines()
    starts = range(len(text) - len(lines) + 1)
    assert any(text[start : start + len(lines)] == lines for start in starts), (
        f"docs/extending.md shows lines of {path} that are not in it; copy them from the file again"
    )


def test_the_guide_shows_every_part_of_the_example():
    shown = {Path(path).name for path, _ in EXCERPTS}
    assert shown >= {"params.py", "method.py", "__init__.py", "nets.py", "models.py", "data.py", "recipe.toml"}


# Runs each block in a namespace of its own, then the test functions it defines; a failure names the block.
RUNNER = """
import json, sys
for index, block in enumerate(json.load(open(sys.argv[1]))):
    namespace = {"__name__": "guide_block_%d" % index}
    exec(compile(block, "<docs/extending.md, python block %d>" % index, "exec"), namespace)
    for name, test in list(namespace.items()):
        if name.startswith("test_") and callable(test):
            test()
"""


@pytest.mark.slow
def test_the_guides_python_runs(tmp_path):
    import json

    blocks = []
    for language, lines in fenced():
        name = named(lines)
        if language != "python" or (name and "/" in name):
            continue
        if name:  # a file of the reader's: what the blocks after it load
            (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            blocks.append("\n".join(lines) + "\n")
    assert blocks, "the guide has Python blocks that run"
    (tmp_path / "blocks.json").write_text(json.dumps(blocks), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "blocks.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "FEDBENCH_DATA": str(tmp_path / "data")},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def command_lines() -> list[list[str]]:
    """The words of every ``fedbench …`` line of the guide's shell blocks, comments left out."""
    return [
        words
        for language, lines in fenced()
        if language == "bash"
        for line in lines
        if (words := shlex.split(line, comments=True))[:1] == ["fedbench"]
    ]


@pytest.mark.parametrize("words", command_lines(), ids=lambda words: " ".join(words[:3]))
def test_every_command_line_names_a_command_and_its_options(words):
    command = typer.main.get_command(app)  # a group's subcommands are in ``commands`` (typer's own click)
    rest = words[1:]
    while rest and rest[0] in getattr(command, "commands", {}):
        command, rest = command.commands[rest[0]], rest[1:]
    assert not hasattr(command, "commands"), f"`{' '.join(words)}` names no command"
    options = {option for param in command.params for option in (*param.opts, *param.secondary_opts)}
    unknown = [word.split("=")[0] for word in rest if word.startswith("--") and word.split("=")[0] not in options]
    assert not unknown, f"`{' '.join(words)}`: {command.name} has no option {', '.join(unknown)}"


def test_the_guide_states_the_engines_rule_on_torchs_global_generator():
    """The engine seeds torch's global generator per client (engine/state.py) and the contract's keyed-streams
    property refuses it in server hooks only: the guide says the same, and no longer forbids it in client hooks."""
    text = " ".join(GUIDE.read_text(encoding="utf-8").split())
    assert "Never numpy's, Python's or torch's global generator" not in text
    assert "a client hook may draw from it too and `check-method` passes it" in text
    assert (
        "in a server hook (`payload`, `aggregate`, `after_aggregation`) it holds whatever the last client left" in text
    )
    assert (
        "torch's in a server hook (`payload`, `aggregate`, `after_aggregation`)" in PROPERTIES["keyed-streams"].breaks
    )
    state = (REPOSITORY / "fedbench" / "engine" / "state.py").read_text(encoding="utf-8")
    assert "torch.manual_seed(derive_seed(self.spec.seed, dropout_stream, *keys))" in state
