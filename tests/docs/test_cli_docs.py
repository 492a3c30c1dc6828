"""docs/cli.md says what the engine does: the `--packing` row names exactly the built-in methods that opt into the
packed training path (``Algorithm.packed_step``)."""

from __future__ import annotations

import re
from pathlib import Path

from fedbench.algorithms import ALGORITHMS

CLI_DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_packing_row_names_every_method_that_opts_into_the_packed_path():
    row = next(line for line in CLI_DOCS.read_text().splitlines() if line.startswith("| `--packing"))
    listed = re.search(r"stacked parameters \(([^)]*?) on models", row)
    assert listed, "the --packing row no longer lists the packed methods where this test looks for them"
    named = {name.strip().lower() for name in listed.group(1).split(",")}
    packed = {name for name in ALGORITHMS.names() if ALGORITHMS.get(name).packed_step}
    assert named == packed
