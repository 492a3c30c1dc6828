"""Diagnostics views end to end through the command line: `fedbench run` records the per-round diagnostics a tiny
recipe asks for, `fedbench report --plots` draws every view's figure from them, the text report says in one line
what each view draws and how many runs recorded it, and the HTML page embeds the figures (a headless Chromium,
when installed, decodes them all)."""

from __future__ import annotations

import base64
import json
import re
import textwrap

import pytest
from typer.testing import CliRunner

from browser_fixtures import CHROMIUM, probe_in_chromium
from fedbench.cli import app

pytestmark = pytest.mark.slow  # trains 2 tiny runs and draws 12 figures (about 25 s on a loaded 2-core machine)

VIEWS = {
    "fig2b": ("weight_divergence", 'layout = "whole_model"'),
    "fig3a": ("weight_divergence", 'layout = "per_layer"'),
    "fig3b": ("weight_divergence", 'layout = "per_stage"'),
    "personal": ("personal_divergence", 'clients = ["A", "B", "C"]'),
    "mixing": ("mixing_weights", 'clients = ["A", "B", "C"]'),
    "val_loss": ("val_loss", ""),
    # FedDr+'s observed/unobserved-class statistics: the panels the view declares (two of Figs. 2–5's)
    "features": ("feature_stats", 'reproduces = ["Fig. 2(a)", "Fig. 4(b)"]'),
    "activations": ("activations", 'clients = ["A", "B", "C"]'),
}

RECIPE = """
paper = "diag"
name = "diag"
seeds = [0]

[setup]
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
eval_mode = "personal"
client_test_fraction = 0.2
client_val_fraction = 0.2
diagnostics = ["weight_divergence", "val_loss", "personal_divergence", "mixing_weights", "feature_stats", "activations"]

[matrix]
algorithm = ["lgmix", "apfl"]
""" + "".join(
    f"""
[[tables]]
name = "{name}"
title = "{name}"
kind = "diagnostics"
diagnostic = "{diagnostic}"
rows = ["algorithm"]
{extra}
"""
    for name, (diagnostic, extra) in VIEWS.items()
)


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """(folder, registry url, recipe path) after `fedbench run` of the recipe."""
    folder = tmp_path_factory.mktemp("diagnostics")
    path = folder / "diag.toml"
    path.write_text(textwrap.dedent(RECIPE))
    url = f"sqlite:///{folder / 'registry.db'}"
    result = CliRunner().invoke(app, ["run", str(path), "--registry", url])
    assert result.exit_code == 0, result.output
    return folder, url, path


def invoke(*args) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_plots_draw_every_diagnostics_view_from_the_recorded_values(reported):
    folder, url, path = reported
    invoke("report", "--recipe", path, "--registry", url, "--plots", folder / "plots")
    made = sorted(p.name for p in (folder / "plots").glob("*.png"))
    # one figure per view, except the per-layer ones (a figure per method: lgmix, apfl) and the feature statistics
    # (one per declared panel)
    expected = {"fig2b": 1, "fig3a": 2, "fig3b": 2, "personal": 2, "mixing": 1, "val_loss": 1, "features": 2}
    expected["activations"] = 1
    for view, count in expected.items():
        assert len([name for name in made if name.startswith(f"diag_{view}_")]) == count, made
    assert all((folder / "plots" / name).read_bytes().startswith(b"\x89PNG") for name in made)


def test_text_and_json_reports_say_what_each_view_draws_and_how_many_runs_recorded_it(reported):
    _, url, path = reported
    document = json.loads(invoke("report", "--recipe", path, "--registry", url, "--format", "json"))
    for table in document["tables"]:
        diagnostic = VIEWS[table["table"]][0]
        assert table["cells"] == [] and table["rows"] == []  # no numbers: the paper publishes none
        (line,) = [note for note in table["notes"] if "recorded it" in note]
        assert f"per-round diagnostic {diagnostic!r}" in line and "2 of 2 runs recorded it" in line
    for fmt in ("rich", "markdown", "latex"):  # words as written, whatever the terminal's wrapping
        text = " ".join(invoke("report", "--recipe", path, "--registry", url, "--format", fmt).split())
        assert text.count("2 of 2 runs recorded it") == len(VIEWS), fmt


def drawn_views(alts) -> set[str]:
    """The views an image of the page belongs to (its alt text is the file stem: diag_<view>_<panel>)."""
    alts = list(alts)
    return {view for view in VIEWS if any(alt.startswith(f"diag_{view}_") for alt in alts)}


def html_page(reported):
    folder, url, path = reported
    page = folder / "site" / "index.html"
    invoke("report", "--recipe", path, "--registry", url, "--format", "html", "--out", page)
    return page


def test_the_html_page_embeds_every_diagnostic_figure(reported):
    page = html_page(reported).read_text()
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 12  # the PNGs --plots writes
    assert drawn_views(alt for alt, _ in images) == set(VIEWS)
    assert all(base64.b64decode(data).startswith(b"\x89PNG") for _, data in images)
    assert "2 of 2 runs recorded it" in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium): no browser test")
def test_a_browser_decodes_the_diagnostic_figures(reported, tmp_path):
    probe, dom = probe_in_chromium(html_page(reported), tmp_path)
    assert probe["images"] == 12 and probe["decoded"] == 12
    assert drawn_views(probe["alts"]) == set(VIEWS)
    assert probe["scrollWidth"] <= probe["innerWidth"], "the page overflows horizontally"
    assert "runs recorded it" in dom
