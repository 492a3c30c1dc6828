"""The README's table of methods lists every built-in method once, with the kind the catalogue gives it."""

from __future__ import annotations

import re
from pathlib import Path

from fedbench.algorithms import ALGORITHMS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_every_built_in_method_with_its_kind():
    text = README.read_text()
    table = text[text.index("| method | kind |") :].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (global|personal) \|", table, flags=re.MULTILINE)
    assert len(rows) == len(dict(rows)), "a method listed twice"
    built_in = {name: ALGORITHMS.info(name).get("kind", "global") for name in ALGORITHMS.names()}
    assert dict(rows) == built_in
