"""FedTrip Fig. 2's projections end to end through the command line: `fedbench run` records the feature snapshots a
tiny recipe asks for, `fedbench report --plots` draws one t-SNE per panel from them, and the HTML page embeds the
same figures (a headless Chromium, when installed, decodes them)."""

from __future__ import annotations

import base64
import re
import textwrap

import pytest
from typer.testing import CliRunner

from browser_fixtures import CHROMIUM, probe_in_chromium
from fedbench.cli import app

pytestmark = pytest.mark.slow  # trains 1 tiny run and projects 3 panels twice (about 30 s on a loaded 2-core machine)

RECIPE = """
paper = "diag"
name = "tsne"
seeds = [0]

[setup]
algorithm = "fedavg"
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 16 }
partition = "iid"
num_clients = 3
clients_per_round = 3
rounds = 3
batch_size = 32
local_steps = 2
optimizer = { lr = 0.1 }
diagnostics = ["feature_snapshot"]

[matrix]
algorithm = ["fedavg"]

[[tables]]
name = "fig2"
kind = "diagnostics"
diagnostic = "feature_snapshot"
rows = ["algorithm"]
at_rounds = [2, 3]
"""
PANELS = ["client1_r2", "client1_r3", "global_r3"]


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """(folder, registry url, recipe path) after `fedbench run` of the recipe."""
    folder = tmp_path_factory.mktemp("projections")
    path = folder / "tsne.toml"
    path.write_text(textwrap.dedent(RECIPE))
    url = f"sqlite:///{folder / 'registry.db'}"
    result = CliRunner().invoke(app, ["run", str(path), "--registry", url])
    assert result.exit_code == 0, result.output
    return folder, url, path


def invoke(*args) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_plots_and_the_html_page_draw_one_projection_per_panel(reported, tmp_path):
    folder, url, path = reported
    invoke("report", "--recipe", path, "--registry", url, "--plots", folder / "plots")
    made = sorted(p.name for p in (folder / "plots").glob("*.png"))
    assert made == [f"tsne_fig2_{panel}.png" for panel in PANELS]
    page = folder / "site" / "index.html"
    invoke("report", "--recipe", path, "--registry", url, "--format", "html", "--out", page)
    text = page.read_text()
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', text)
    assert sorted(alt for alt, _ in images) == [f"tsne_fig2_{panel}" for panel in PANELS]
    assert all(base64.b64decode(data).startswith(b"\x89PNG") for _, data in images)
    if CHROMIUM is not None:  # a browser decodes every figure
        probe, _ = probe_in_chromium(page, tmp_path)
        assert probe["images"] == probe["decoded"] == len(PANELS)
