"""Projections of recorded feature snapshots (``fedbench.report.diagnostics.projection_plots``): FedTrip Fig. 2's
panels, one figure each; a t-SNE whose random_state comes from the run's seed and is shown, so that it can be redone;
and a stored value that is malformed gives one line, never a crash."""

from __future__ import annotations

import base64
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fedbench.errors import FedbenchError, RegistryError
from fedbench.recipes.views import TableView
from fedbench.report.diagnostics.projection_plots import (
    decode_snapshot,
    draw_feature_snapshots,
    panels,
    project,
    projection_seed,
)
from fedbench.report.diagnostics.series import RunDiagnostics
from fedbench.seeding import derive_seed

VIEW = TableView(name="tsne", kind="diagnostics", diagnostic="feature_snapshot", at_rounds=[30, 50])
N, D = 40, 6


def features(offset: float = 0.0) -> np.ndarray:
    """Two well-separated classes in D dimensions."""
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(offset, 0.1, (N // 2, D)), rng.normal(offset + 5, 0.1, (N // 2, D))])


def encoded(x: np.ndarray) -> str:
    return base64.b64encode(np.asarray(x, "<f2").tobytes()).decode()


def snapshot(local: bool = True, **changes) -> dict:
    value = {
        "points": list(range(N)),
        "labels": [0] * (N // 2) + [1] * (N // 2),
        "shape": [N, D],
        "dtype": "float16",
        "global": encoded(features()),
        "client": 0,
        "local": encoded(features(1.0)) if local else None,
    }
    if not local:
        value["note"] = "client 0 did not train in this round"
    return {**value, **changes}


def titles(fig: Figure) -> str:
    return fig._suptitle.get_text() if fig._suptitle else ""


def test_a_snapshot_decodes_to_its_features_within_float16_precision():
    x, labels = decode_snapshot(snapshot(), "global", "here")
    assert x.dtype == np.float32 and x.shape == (N, D)
    assert np.allclose(x, features(), rtol=2**-11, atol=1e-7)
    assert labels.tolist() == snapshot()["labels"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not an object", "is not a JSON object"),
        (snapshot(shape=[N]), "has shape [40], not [points, features]"),
        (snapshot(shape=[N, 0]), "has shape [40, 0], not [points, features]"),
        (snapshot(dtype="float32"), "has dtype 'float32', not 'float16'"),
        (snapshot(labels=[0, 1]), "does not hold 40 integer labels"),
        (snapshot(**{"global": None}), "has no global features"),
        (snapshot(**{"global": "@@not base64@@"}), "global features are not base64"),
        # a character outside base64's alphabet is a damaged value, not one to skip
        (
            snapshot(**{"global": encoded(features())[:8] + "!" + encoded(features())[8:]}),
            "global features are not base64",
        ),
        (snapshot(**{"global": encoded(features())[:-8]}), "global features hold 474 bytes, not the 480 of 40×6"),
        (snapshot(**{"global": encoded(np.full((N, D), np.inf))}), "global features are not all finite"),
    ],
)
def test_a_malformed_snapshot_is_a_one_line_registry_error(value, message):
    with pytest.raises(RegistryError) as raised:
        decode_snapshot(value, "global", "run seed 1, round 50")
    text = str(raised.value)
    assert text == f"run seed 1, round 50: the stored feature_snapshot {message}; record the run again or re-import it"
    assert isinstance(raised.value, FedbenchError)  # the CLI prints it on one line and exits 2


@pytest.mark.parametrize("shape", [[N, 1], [1, D], [1, 1]])
def test_a_snapshot_of_one_point_or_one_feature_decodes(shape):
    x = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
    value = snapshot(shape=shape, labels=[0] * shape[0], **{"global": encoded(x)})
    decoded, labels = decode_snapshot(value, "global", "here")
    assert np.array_equal(decoded, x) and labels.tolist() == [0] * shape[0]


def test_a_truncated_snapshot_stops_the_drawer_with_that_line():
    run = RunDiagnostics({"algorithm": "fedavg"}, 1, {30: snapshot(), 50: snapshot(local=False) | {"global": "AAAA"}})
    with pytest.raises(RegistryError, match="run seed 1, round 50: the stored feature_snapshot global features hold 3"):
        draw_feature_snapshots(VIEW, [run])


def test_panels_follow_the_papers_layout():
    """FedTrip Fig. 2: (a) global at 50, (b) client 1 at 50, (c) client 1 at 30."""
    assert panels([30, 50], [30, 50, 100]) == [("global", 50), ("local", 50), ("local", 30)]
    assert panels([], [30, 50, 100]) == [("global", 100), ("local", 100)]
    assert panels([], []) == []


def test_one_figure_per_panel_with_its_random_state_from_the_seed_shown_so_it_can_be_redone():
    run = RunDiagnostics({"algorithm": "fedavg"}, 10, {30: snapshot(), 50: snapshot(), 100: snapshot()})
    drawn = draw_feature_snapshots(VIEW, [run])
    assert [stem for stem, _ in drawn] == ["global_r50", "client1_r50", "client1_r30"]
    random_state = projection_seed(10)
    assert random_state != projection_seed(11) and 0 <= random_state < 2**32
    for (stem, fig), letter in zip(drawn, "abc", strict=True):
        title = titles(fig)
        assert title.startswith(f"({letter}) ") and f"random_state {random_state}" in title and "seed 10" in title
        assert "init='pca'" in title and "perplexity 13, " in title  # (40 − 1) / 3: fewer points than 91
        assert ("global model" in title) == (stem == "global_r50")
        if stem != "global_r50":  # the paper's client 1 is our client 0
            assert "client 1's local model (client 0)" in title
    # the whole titles: the panel, whose model, the round and the run; then how to redo the projection
    redo = f"40 test points; t-SNE (scikit-learn): init='pca', perplexity 13, random_state {random_state}"
    assert [titles(fig) for _, fig in drawn] == [
        f"(a) global model, round 50 (fedavg, seed 10)\n{redo}",
        f"(b) client 1's local model (client 0), round 50 (fedavg, seed 10)\n{redo}",
        f"(c) client 1's local model (client 0), round 30 (fedavg, seed 10)\n{redo}",
    ]
    two_labels = RunDiagnostics({"algorithm": "fedavg", "dataset": "cifar10"}, 10, {50: snapshot()})
    first = draw_feature_snapshots(VIEW.model_copy(update={"at_rounds": [50]}), [two_labels])[0][1]
    assert titles(first).startswith("(a) global model, round 50 (fedavg, cifar10, seed 10)\n")
    # redone from what the figure says: the same coordinates as plotted
    points, _ = project(decode_snapshot(snapshot(), "global", "here")[0], random_state)
    labels = np.array(snapshot()["labels"])
    (ax,) = drawn[0][1].axes
    for collection in ax.collections:  # a scatter per class, holding that class's points
        mine = points[labels == int(collection.get_label())]
        assert np.allclose(np.sort(collection.get_offsets(), axis=0), np.sort(mine, axis=0))
    assert ax.get_legend().get_title().get_text() == "class"
    # the classes separate: every point is nearer its own class's centre than the other's
    centres = np.stack([points[labels == c].mean(0) for c in (0, 1)])
    nearest = np.linalg.norm(points[:, None] - centres[None], axis=2).argmin(1)
    assert (nearest == labels).all()


def test_a_panel_the_run_cannot_fill_is_a_figure_saying_why():
    run = RunDiagnostics({"algorithm": "fedavg"}, 1, {50: snapshot(local=False)})
    drawn = dict(draw_feature_snapshots(VIEW, [run]))
    assert list(drawn) == ["global_r50", "client1_r50", "client1_r30"]
    texts = {stem: " ".join(t.get_text() for t in fig.axes[0].texts) for stem, fig in drawn.items()}
    assert texts["global_r50"] == ""  # drawn
    assert texts["client1_r50"] == "client 0 did not train in this round"
    assert texts["client1_r30"] == "round 30 not recorded (recorded: 50)"
    # the stored note, or the reason itself where an older value has none; in the middle of the figure
    other = snapshot(local=False) | {"note": "client 0 held no data"}
    bare = {key: value for key, value in snapshot(local=False).items() if key != "note"}
    view = VIEW.model_copy(update={"at_rounds": [50]})
    for value, expected in ((other, "client 0 held no data"), (bare, "client 0 did not train in this round")):
        fig = dict(draw_feature_snapshots(view, [RunDiagnostics({}, 1, {50: value})]))["client1_r50"]
        (text,) = fig.axes[0].texts
        assert text.get_text() == expected
        FigureCanvasAgg(fig).draw()
        box, page = text.get_window_extent(), fig.bbox
        assert page.x0 <= box.x0 < box.x1 <= page.x1 and page.y0 <= box.y0 < box.y1 <= page.y1


@pytest.mark.parametrize("client", [3, None])
def test_the_local_panels_name_the_client_the_snapshot_records(client):
    """The paper counts clients from 1: client c's model is "client c + 1" (FedTrip Fig. 2's client 1 is client 0);
    a value that names no client is client 0's, the one the engine records (``SNAPSHOT_CLIENT``)."""
    value = {key: v for key, v in snapshot(client=client).items() if v is not None}
    client = 0 if client is None else client
    view = VIEW.model_copy(update={"at_rounds": [50]})
    drawn = draw_feature_snapshots(view, [RunDiagnostics({}, 1, {50: value})])
    assert [stem for stem, _ in drawn] == ["global_r50", f"client{client + 1}_r50"]
    assert titles(drawn[1][1]).startswith(f"(b) client {client + 1}'s local model (client {client}), round 50 ")


def test_a_missing_round_does_not_stop_the_panels_after_it():
    view = VIEW.model_copy(update={"at_rounds": [50, 100]})
    run = RunDiagnostics({}, 1, {30: snapshot(), 50: snapshot()})
    drawn = dict(draw_feature_snapshots(view, [run]))
    assert list(drawn) == ["global_r100", "client1_r100", "client1_r50"]
    assert drawn["global_r100"].axes[0].texts[0].get_text() == "round 100 not recorded (recorded: 30, 50)"
    assert not drawn["client1_r50"].axes[0].texts  # drawn: a scatter, no note


def test_a_long_note_wraps_within_the_figure_around_its_middle():
    rounds = {r: snapshot() for r in range(1, 200)}
    view = VIEW.model_copy(update={"at_rounds": [500]})
    fig = dict(draw_feature_snapshots(view, [RunDiagnostics({}, 1, rounds)]))["global_r500"]
    (text,) = fig.axes[0].texts
    assert text.get_text().startswith("round 500 not recorded (recorded: 1, 2, 3, ")
    FigureCanvasAgg(fig).draw()
    box, page = text.get_window_extent(), fig.bbox
    assert page.x0 <= box.x0 < box.x1 <= page.x1 and page.y0 <= box.y0 < box.y1 <= page.y1
    assert abs((box.x0 + box.x1) / 2 - (page.x0 + page.x1) / 2) < 0.05 * page.width


def scatter_of(classes: int) -> Figure:
    value = snapshot(labels=[i % classes for i in range(N)])
    view = VIEW.model_copy(update={"at_rounds": [50]})
    drawn = dict(draw_feature_snapshots(view, [RunDiagnostics({}, 1, {50: value})]))
    return drawn["global_r50"]


@pytest.mark.parametrize("classes", [2, 10, 11, 12, 20, 21, 25])
def test_every_class_has_a_colour_of_its_own_and_a_legend_up_to_twenty(classes):
    fig = scatter_of(classes)
    (ax,) = fig.axes
    colours = {tuple(np.round(c.get_facecolor()[0], 6)) for c in ax.collections}
    assert len(ax.collections) == classes and len(colours) == classes
    if classes <= 20:  # a legend tells them apart: every two colours visibly different (tab20's nearest: 0.098)
        rgb = np.array([c.get_facecolor()[0][:3] for c in ax.collections])
        assert min(np.linalg.norm(a - b) for i, a in enumerate(rgb) for b in rgb[i + 1 :]) > 0.05
    legend = ax.get_legend()
    assert (legend is not None) == (classes <= 20)
    if legend is not None:  # right next to the axes, centred on them, on the page
        FigureCanvasAgg(fig).draw()
        box, axes, page = legend.get_window_extent(), ax.get_window_extent(), fig.bbox
        assert axes.x1 - 1 <= box.x0 < axes.x1 + 0.05 * page.width and box.y0 < (axes.y0 + axes.y1) / 2 < box.y1
        assert page.x0 <= box.x0 < box.x1 <= page.x1


def test_up_to_ten_classes_take_ten_distinct_hues_and_more_than_twenty_span_a_continuous_map():
    """Ten classes or fewer: tab10, a hue each (tab20 pairs a dark and a light shade of one hue); more than twenty:
    evenly spaced from one end of viridis to the other, so the first and last classes are as far apart as it goes."""
    import matplotlib

    def colours(classes: int) -> list[tuple[float, ...]]:
        return [tuple(c.get_facecolor()[0]) for c in scatter_of(classes).axes[0].collections]

    tab10, viridis = matplotlib.colormaps["tab10"], matplotlib.colormaps["viridis"]
    assert colours(10) == [tuple(tab10(i)) for i in range(10)]
    for classes in (21, 25):
        drawn = colours(classes)
        assert drawn[0] == tuple(viridis(0.0)) and drawn[-1] == tuple(viridis(1.0))


def test_the_random_state_is_the_run_seeds_tsne_stream_in_every_version():
    """The random_state is derived from the run's seed by its documented key "tsne" (``fedbench.seeding``): a figure
    redrawn by a later version, or by anyone from the seed, is the same projection."""
    assert [projection_seed(s) for s in (0, 1, 10)] == [derive_seed(s, "tsne") % 2**32 for s in (0, 1, 10)]


@pytest.mark.parametrize(("points", "expected"), [(2, 1.0), (4, 1.0), (7, 2.0), (31, 10.0)])
def test_fewer_points_than_91_take_a_perplexity_of_a_third_of_the_others_at_least_one(points, expected):
    rng = np.random.default_rng(1)
    _, perplexity = project(rng.normal(size=(points, 3)).astype(np.float32), 0)
    assert perplexity == expected


def test_the_projection_runs_on_one_thread(monkeypatch):
    """One thread: the same coordinates whatever the machine's thread count (its BLAS and OpenMP pools)."""
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_info

    threads = []
    fit = TSNE.fit_transform

    def counted(self, x, *args, **kwargs):
        threads.extend(pool["num_threads"] for pool in threadpool_info())
        return fit(self, x, *args, **kwargs)

    monkeypatch.setattr(TSNE, "fit_transform", counted)
    project(np.random.default_rng(1).normal(size=(20, 3)).astype(np.float32), 0)
    assert threads and set(threads) == {1}


def test_the_perplexity_is_scikit_learns_default_once_there_are_enough_points():
    from sklearn.manifold import TSNE

    rng = np.random.default_rng(1)
    _, perplexity = project(rng.normal(size=(92, 2)).astype(np.float32), 0)
    assert perplexity == TSNE().perplexity == 30.0


def test_several_runs_each_get_their_panels_named_by_labels_and_seed():
    runs = [
        RunDiagnostics({"algorithm": name}, seed, {30: snapshot(), 50: snapshot()})
        for name in ("fedtrip", "fedavg")
        for seed in (2, 1)
    ]
    view = VIEW.model_copy(update={"at_rounds": [50]})
    stems = [stem for stem, _ in draw_feature_snapshots(view, runs)]
    assert stems == [
        f"{name}_s{seed}_{panel}"
        for name in ("fedavg", "fedtrip")
        for seed in (1, 2)
        for panel in ("global_r50", "client1_r50")
    ]
    # every label, joined, in a file name's characters
    named = [RunDiagnostics({"algorithm": "fed avg", "dataset": "C/10"}, seed, {50: snapshot()}) for seed in (1, 2)]
    assert [stem for stem, _ in draw_feature_snapshots(view, named)][0] == "fed-avg_C-10_s1_global_r50"


def test_the_module_imports_neither_torch_nor_scikit_learn():
    """Drawing reports trains nothing: projections seed without torch and import scikit-learn only to project."""
    code = "import sys, fedbench.report.diagnostics.projection_plots; print(sorted({'torch', 'sklearn'} & set(sys.modules)))"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"
