"""The drawers of the per-round diagnostics (``fedbench/report/diagnostics/``), read back through matplotlib's
objects: what each figure plots is the paper's quantity computed from the stored values by hand (FedImpro's
whole-model divergence, each per-layer line normalised by its maximum, the stages of a ResNet; LG-Mix's distances at
the last diagnosed round, the mixing weights on a log axis, the mean validation loss)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba

from fedbench.errors import ConfigError
from fedbench.recipes.views import TableView
from fedbench.report.diagnostics.divergence_plots import (
    CHOSEN_LAYERS,
    chosen_layers,
    normalised,
    stage_divergence,
    stage_of,
)
from fedbench.report.diagnostics.drawers import DRAWERS, draw
from fedbench.report.diagnostics.series import RunDiagnostics
from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES


def view(diagnostic: str, **fields) -> TableView:
    return TableView(name="v", kind="diagnostics", diagnostic=diagnostic, rows=["algorithm"], **fields)


def divergence(layers: list[str], distance: list[list[float]]) -> dict:
    """A stored weight_divergence value (its ``mean`` over clients as the engine writes it)."""
    return {
        "layers": layers,
        "clients": list(range(len(distance))),
        "distance": distance,
        "mean": [sum(column) / len(column) for column in zip(*distance)],
        "global_norm": [1.0] * len(layers),
    }


def run(algorithm: str, seed: int, rounds: dict, **labels) -> RunDiagnostics:
    return RunDiagnostics({"algorithm": algorithm, **labels}, seed, rounds)


def lines(fig) -> dict[str, tuple[list[float], list[float]]]:
    (ax,) = fig.axes
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


# ------------------------------------------------------------------------------------------- weight divergence
def test_whole_model_divergence_is_the_client_mean_of_the_root_sum_of_squares_averaged_over_seeds():
    """FedImpro Fig. 2(b): (1/|S|) Σ_i ‖θ̄ − θ_i‖ over the whole model, i.e. per client √(Σ_ℓ distance²), then the
    mean over clients; a line per method, the mean over seeds with a min–max band."""
    layers = ["conv", "fc"]
    seed0 = {1: divergence(layers, [[3.0, 4.0], [6.0, 8.0]]), 2: divergence(layers, [[1.0, 0.0], [0.0, 2.0]])}
    seed1 = {1: divergence(layers, [[0.0, 1.0], [5.0, 12.0]]), 2: divergence(layers, [[2.0, 0.0], [0.0, 2.0]])}
    other = {1: divergence(layers, [[1.0, 1.0]]), 2: divergence(layers, [[2.0, 2.0]])}
    runs = [run("fedavg", 0, seed0), run("fedavg", 1, seed1), run("fedprox", 0, other)]
    ((key, fig),) = draw(view("weight_divergence", layout="whole_model"), runs)
    assert key == "all"
    drawn = lines(fig)
    # seed 0: round 1 (5 + 10) / 2 = 7.5, round 2 (1 + 2) / 2 = 1.5; seed 1: round 1 (1 + 13) / 2 = 7, round 2 2
    assert drawn["fedavg (n=2)"] == ([1, 2], pytest.approx([7.25, 1.75]))
    assert drawn["fedprox (n=1)"] == ([1, 2], pytest.approx([math.sqrt(2), math.sqrt(8)]))
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(1.5) and band.max() == pytest.approx(7.5)  # min–max over the two seeds
    assert draw(view("weight_divergence"), runs)[0][1].axes[0].get_ylabel() == fig.axes[0].get_ylabel()  # default


def test_per_layer_lines_are_client_means_normalised_by_their_maximum():
    """FedImpro Fig. 3(a): a line per layer, the mean over clients per round divided by the line's own maximum,
    so every line peaks at exactly 1 (and its shape is kept)."""
    layers = ["a", "b"]
    rounds = {
        1: divergence(layers, [[2.0, 10.0], [4.0, 30.0]]),
        2: divergence(layers, [[6.0, 5.0], [6.0, 5.0]]),
        3: divergence(layers, [[1.0, 20.0], [1.0, 20.0]]),
    }
    ((_, fig),) = draw(view("weight_divergence", layout="per_layer"), [run("fedavg", 0, rounds, dataset="C")])
    drawn = lines(fig)
    assert drawn["a"] == ([1, 2, 3], pytest.approx([3 / 6, 1.0, 1 / 6]))
    assert drawn["b"] == ([1, 2, 3], pytest.approx([1.0, 5 / 20, 1.0]))
    assert all(max(y) == pytest.approx(1.0) for _, y in drawn.values())


def test_per_layer_draws_ten_layers_spread_over_the_model_or_the_named_ones():
    layers = [f"l{i}" for i in range(41)]  # ResNet-18's 41 layers
    picked = chosen_layers(layers, [])
    assert len(picked) == CHOSEN_LAYERS == 10 and picked[0] == "l0" and picked[-1] == "l40"
    assert picked == sorted(picked, key=layers.index)  # model order
    assert chosen_layers(layers[:4], []) == layers[:4]  # a small model: all of them
    assert chosen_layers(layers, ["l7", "l2"]) == ["l2", "l7"]
    with pytest.raises(ConfigError, match="layers: 'conv9' is not a layer of the model"):
        chosen_layers(layers, ["conv9"])
    rounds = {1: divergence(layers, [[1.0] * 41]), 2: divergence(layers, [[2.0] * 41])}
    ((_, fig),) = draw(view("weight_divergence", layout="per_layer", layers=["l3", "l1"]), [run("fedavg", 0, rounds)])
    assert list(lines(fig)) == ["l1", "l3"]


def test_per_stage_lines_group_a_resnets_layers_by_block():
    """FedImpro Fig. 3(b): a stage's distance per client is √(Σ_{ℓ∈stage} distance²) (its layers' parameters are
    one vector), then the mean over clients, normalised by its maximum."""
    layers = ["encoder.conv1", "encoder.bn1", "encoder.layer1.0.conv1", "encoder.layer1.1.conv2", "classifier"]
    assert [stage_of(layer) for layer in layers] == ["conv1", "bn1", "layer1", "layer1", "classifier"]
    rounds = {
        1: divergence(layers, [[1.0, 1.0, 3.0, 4.0, 2.0], [1.0, 1.0, 6.0, 8.0, 2.0]]),
        2: divergence(layers, [[2.0, 1.0, 0.0, 1.0, 1.0], [2.0, 1.0, 0.0, 1.0, 1.0]]),
    }
    ((_, fig),) = draw(view("weight_divergence", layout="per_stage"), [run("fedavg", 0, rounds)])
    drawn = lines(fig)
    assert list(drawn) == ["conv1", "bn1", "layer1", "classifier"]
    assert drawn["layer1"] == ([1, 2], pytest.approx([1.0, 1 / 7.5]))  # round 1: (5 + 10) / 2 = 7.5; round 2: 1
    assert drawn["conv1"] == ([1, 2], pytest.approx([0.5, 1.0]))


# ------------------------------------------------------------------------------------------- LG-Mix
def personal(distance: list[list[float]]) -> dict:
    return divergence([f"layer{i}" for i in range(len(distance[0]))], distance)


def test_personal_divergence_draws_each_clients_distances_at_the_last_diagnosed_round():
    """LG-Mix Fig. 3 shows the end of training: each run's last diagnosed round (not the last the view's runs
    share), bars per layer and client, the mean over seeds, clients named by the view."""
    early = personal([[9.0, 9.0, 9.0], [9.0, 9.0, 9.0]])
    seed0 = {10: early, 100: personal([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])}
    seed1 = {50: early, 90: personal([[3.0, 2.0, 1.0], [6.0, 5.0, 4.0]])}
    v = view("personal_divergence", clients=["A", "B"])
    ((key, fig),) = draw(v, [run("lgmix", 0, seed0, task="cls"), run("lgmix", 1, seed1, task="cls")])
    (ax,) = fig.axes
    assert key == "lgmix" and "round 90, 100 (last diagnosed)" in ax.get_title()
    heights = {
        label: [bar.get_height() for bar in container]
        for label, container in zip([t.get_text() for t in ax.get_legend().get_texts()], ax.containers)
    }
    assert heights == {"A": pytest.approx([2.0, 2.0, 2.0]), "B": pytest.approx([5.0, 5.0, 5.0])}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]  # layers numbered from 1, as the paper


def test_mixing_weights_are_a_line_per_method_and_client_on_a_log_axis():
    lgmix = {r: {"clients": [0, 1], "weight": [0.9 / r, 0.8 / r], "symbol": "λ"} for r in (1, 2, 3)}
    apfl = {r: {"clients": [1, 0], "weight": [0.5, 0.6], "symbol": "α"} for r in (1, 2, 3)}
    v = view("mixing_weights", clients=["A", "B"])
    ((_, fig),) = draw(v, [run("lgmix", 0, lgmix), run("apfl", 0, apfl)])
    drawn = lines(fig)
    assert drawn["lgmix λ A"] == ([1, 2, 3], pytest.approx([0.9, 0.45, 0.3]))
    assert drawn["lgmix λ B"][1] == pytest.approx([0.8, 0.4, 0.8 / 3])
    assert drawn["apfl α A"][1] == pytest.approx([0.6] * 3)  # read by client id, not position
    assert drawn["apfl α B"][1] == pytest.approx([0.5] * 3)
    assert fig.axes[0].get_yscale() == "log"


def test_validation_loss_is_the_mean_over_clients_per_round_methods_overlaid():
    def loss(values):
        return {"clients": list(range(len(values))), "loss": values, "mean": sum(values) / len(values)}

    runs = [
        run("fedavg", 0, {1: loss([1.0, 3.0]), 2: loss([0.5, 0.5])}),
        run("fedavg", 1, {1: loss([3.0, 3.0]), 2: loss([1.5, 0.5])}),
        run("lgmix", 0, {1: loss([1.0, 1.0]), 2: loss([0.2, 0.2])}),
    ]
    ((_, fig),) = draw(view("val_loss"), runs)
    drawn = lines(fig)
    assert drawn["fedavg (n=2)"] == ([1, 2], pytest.approx([2.5, 0.75]))
    assert drawn["lgmix (n=1)"] == ([1, 2], pytest.approx([1.0, 0.2]))


# ------------------------------------------------------------------------------------------- dispatch
def test_the_drawers_are_keyed_exactly_by_the_catalogue_and_a_missing_one_is_named():
    assert list(DRAWERS) == list(DIAGNOSTIC_NAMES)  # one drawer per catalogue entry, none of another name
    with pytest.raises(ConfigError, match=r"no figure is drawn for diagnostic 'val_loss' yet \(drawn: a, b\)"):
        draw(view("val_loss"), [run("x", 0, {1: {}})], drawers={"a": DRAWERS["val_loss"], "b": DRAWERS["val_loss"]})
    assert draw(view("val_loss"), []) == []  # no run recorded it yet: no figure


def test_figures_follow_the_views_keys_one_per_value_of_the_other_keys():
    """A view with rows = [dataset, algorithm] draws one overlay per data set (FedImpro: one per setting)."""
    rounds = {1: divergence(["a"], [[1.0]]), 2: divergence(["a"], [[2.0]])}
    runs = [run(m, 0, rounds, dataset=d) for d in ("C10", "SVHN") for m in ("fedavg", "fedprox")]
    made = draw(
        TableView(name="v", kind="diagnostics", diagnostic="weight_divergence", rows=["dataset", "algorithm"]), runs
    )
    assert [key for key, _ in made] == ["C10", "SVHN"]
    assert all(len(fig.axes[0].get_lines()) == 2 for _, fig in made)
    assert np.isclose(lines(made[0][1])["fedavg (n=1)"][1], [1.0, 2.0]).all()


# ------------------------------------------------------------------------------------------- what a figure says
def legend_title(fig) -> str:
    return fig.axes[0].get_legend().get_title().get_text()


def test_each_figure_names_its_quantity_its_band_and_its_normalisation():
    """A reader can tell from the figure alone what its axis, its lines and its band are."""
    layers = ["encoder.conv1", "encoder.layer1.0.conv1", "classifier"]
    rounds = {1: divergence(layers, [[1.0, 2.0, 3.0]]), 2: divergence(layers, [[2.0, 1.0, 1.0]])}
    runs = [run("fedavg", 0, rounds), run("fedavg", 1, rounds)]
    ((_, whole),) = draw(view("weight_divergence"), runs)
    assert whole.axes[0].get_ylabel() == "weight divergence (1/|S|) Σ_i ‖θ̄ − θ_i‖"
    assert whole.axes[0].get_yscale() == "linear"  # only the mixing weights are drawn on a log axis
    assert legend_title(whole) == "mean; band: min–max over seeds"
    for layout, part in (("per_layer", "layer"), ("per_stage", "stage")):
        ((_, fig),) = draw(view("weight_divergence", layout=layout), runs)
        assert fig.axes[0].get_ylabel() == "weight divergence / its maximum"
        assert legend_title(fig) == f"{part}; mean over clients, 2 seed(s)"
    mixing = {r: {"clients": [0], "weight": [0.5], "symbol": "λ"} for r in (1, 2)}
    ((_, fig),) = draw(view("mixing_weights"), [run("lgmix", 0, mixing)])
    assert fig.axes[0].get_ylabel() == "mixing weight (log scale)"
    assert legend_title(fig) == "mean; band: min–max over seeds"
    ((_, fig),) = draw(view("personal_divergence"), [run("lgmix", 0, {3: personal([[1.0, 2.0]])})])
    assert legend_title(fig) == "client; mean over 1 seed(s)"
    assert (fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()) == ("layer", "‖w_c − u‖ per layer")
    loss = {r: {"clients": [0], "loss": [1.0], "mean": 1.0} for r in (1, 2)}
    ((_, fig),) = draw(view("val_loss"), [run("lgmix", 0, loss)])
    assert fig.axes[0].get_ylabel() == "validation loss (mean over clients)"
    # every figure drawn against the round says so
    for v, value in (
        (view("weight_divergence"), rounds),
        (view("weight_divergence", layout="per_layer"), rounds),
        (view("mixing_weights"), mixing),
        (view("val_loss"), loss),
    ):
        ((_, fig),) = draw(v, [run("fedavg", 0, value)])
        assert fig.axes[0].get_xlabel() == "round", v.layout


def test_titles_name_the_reproduced_items_and_the_figures_key():
    rounds = {1: divergence(["a"], [[1.0]]), 2: divergence(["a"], [[2.0]])}
    both = view("weight_divergence", reproduces=["Fig. 3(a)", "Fig. 9"], layout="per_layer")
    ((name, fig),) = draw(both, [run("fedavg", 0, rounds)])
    assert name == "fedavg" and fig.axes[0].get_title() == "Fig. 3(a), Fig. 9 · fedavg"
    # a key that tells the figure alone: the method is not added (one method per key)
    keyed = TableView(
        name="v", kind="diagnostics", diagnostic="weight_divergence", layout="per_layer", rows=["dataset", "algorithm"]
    )
    ((name, fig),) = draw(keyed, [run("fedavg", 0, rounds, dataset="C10")])
    assert name == "C10" and fig.axes[0].get_title() == "v · C10"
    # a view without keys: one figure, titled by the view alone
    bare = TableView(name="v", kind="diagnostics", diagnostic="val_loss")
    loss = {1: {"clients": [0], "loss": [1.0], "mean": 1.0}, 2: {"clients": [0], "loss": [0.5], "mean": 0.5}}
    ((_, fig),) = draw(bare, [run("fedavg", 0, loss)])
    assert fig.axes[0].get_title() == "v"


def test_personal_divergence_of_one_seed_and_its_bars_sit_on_their_layer_without_overlapping():
    clients = ["A", "B", "C", "D", "E"]
    value = personal([[float(c + layer) for layer in range(41)] for c in range(5)])  # U-Net: 41 layers
    ((_, fig),) = draw(view("personal_divergence", clients=clients), [run("lgmix", 0, {7: value})])
    (ax,) = fig.axes
    for layer in range(41):
        bars = sorted((container[layer] for container in ax.containers), key=lambda bar: bar.get_x())
        assert [bar.get_height() for bar in bars] == [float(c + layer) for c in range(5)]  # clients in order
        left, right = bars[0].get_x(), bars[-1].get_x() + bars[-1].get_width()
        assert layer + 1 - 0.4 == pytest.approx(left) and right == pytest.approx(layer + 1 + 0.4)  # on tick layer+1
        assert all(a.get_x() + a.get_width() <= b.get_x() + 1e-9 for a, b in zip(bars, bars[1:]))
    small = draw(view("personal_divergence"), [run("lgmix", 0, {7: personal([[1.0, 2.0]])})])[0][1]
    assert small.get_figwidth() < fig.get_figwidth() <= 16  # wider with more layers and clients, bounded


def test_the_mixing_weights_band_is_the_min_and_max_over_seeds_per_round():
    def weights(values):
        return {r: {"clients": [0], "weight": [w], "symbol": "λ"} for r, w in zip((1, 2, 3), values)}

    runs = [run("lgmix", 0, weights([0.9, 0.2, 0.5])), run("lgmix", 1, weights([0.3, 0.6, 0.1]))]
    ((_, fig),) = draw(view("mixing_weights"), runs)
    band = fig.axes[0].collections[0].get_paths()[0].vertices
    top = {x: y for x, y in band if x in (1, 2, 3) and y == max(yy for xx, yy in band if xx == x)}
    bottom = {x: y for x, y in band if x in (1, 2, 3) and y == min(yy for xx, yy in band if xx == x)}
    assert top == pytest.approx({1: 0.9, 2: 0.6, 3: 0.5}) and bottom == pytest.approx({1: 0.3, 2: 0.2, 3: 0.1})


def test_a_stage_is_the_block_below_the_top_level_part_and_its_distance_the_client_mean():
    assert stage_of("encoder.layer2.conv") == "layer2" and stage_of("encoder.layer2") == "layer2"
    value = {"layers": ["encoder.layer1.0.conv1", "encoder.layer1.1.conv2", "classifier"]}
    value["distance"] = [[3.0, 4.0, 1.0], [6.0, 8.0, 3.0]]  # two clients: layer1 √(3² + 4²) = 5 and 10
    assert stage_divergence(value) == pytest.approx({"layer1": 7.5, "classifier": 2.0})


def test_an_unknown_layer_is_one_line_naming_the_models_layers():
    with pytest.raises(ConfigError) as raised:
        chosen_layers(["a", "b", "c"], ["b", "conv9"])
    assert str(raised.value) == "layers: 'conv9' is not a layer of the model (layers: a, b, c)"


def test_a_line_is_divided_by_its_maximum_whatever_its_size_and_an_all_zero_line_stays_zero():
    assert normalised(np.array([0.1, 0.5, 0.25])) == pytest.approx([0.2, 1.0, 0.5])
    assert normalised(np.array([4.0, 8.0])) == pytest.approx([0.5, 1.0])
    zero = normalised(np.zeros(3))
    assert not np.isnan(zero).any() and (zero == 0).all()


def test_each_method_of_a_setting_gets_its_own_per_layer_figure_and_a_view_without_keys_one_named_all():
    rounds = {1: divergence(["a"], [[1.0]]), 2: divergence(["a"], [[2.0]])}
    keyed = TableView(
        name="v", kind="diagnostics", diagnostic="weight_divergence", layout="per_layer", rows=["dataset", "algorithm"]
    )
    made = draw(keyed, [run(m, 0, rounds, dataset="C10") for m in ("fedavg", "fedprox")])
    assert [name for name, _ in made] == ["C10 / fedavg", "C10 / fedprox"]
    assert [fig.axes[0].get_title() for _, fig in made] == ["v · C10 / fedavg", "v · C10 / fedprox"]
    bare = TableView(name="v", kind="diagnostics", diagnostic="weight_divergence", layout="per_layer")
    assert [name for name, _ in draw(bare, [run("fedavg", 0, rounds)])] == ["all"]
    # the whole-model overlay of every method: one figure, titled by the view alone
    ((key, fig),) = draw(view("weight_divergence"), [run("fedavg", 0, rounds)])
    assert key == "all" and fig.axes[0].get_title() == "v"


def test_the_overlays_band_is_the_min_and_max_over_seeds_per_round():
    def loss(means):
        return {r: {"clients": [0], "loss": [m], "mean": m} for r, m in zip((1, 2), means)}

    runs = [run("fedavg", s, loss(means)) for s, means in enumerate(([1.0, 0.5], [3.0, 0.2], [2.0, 0.9]))]
    ((_, fig),) = draw(view("val_loss"), runs)  # 3 seeds, 2 rounds
    band = fig.axes[0].collections[0].get_paths()[0].vertices
    top = {x: max(y for xx, y in band if xx == x) for x in (1, 2)}
    bottom = {x: min(y for xx, y in band if xx == x) for x in (1, 2)}
    assert top == pytest.approx({1: 3.0, 2: 0.9}) and bottom == pytest.approx({1: 1.0, 2: 0.2})


def test_up_to_four_methods_of_mixing_weights_have_a_line_style_each_and_a_client_one_colour():
    """Colour: the client, the same in every method, its band too; line style: the method (LG-Mix Fig. 2(a))."""
    methods = ("lgmix", "apfl", "ditto", "local")
    runs = [run(m, 0, {r: {"clients": [0, 1], "weight": [0.5, 0.25], "symbol": "λ"} for r in (1, 2)}) for m in methods]
    ((_, fig),) = draw(view("mixing_weights", clients=["A", "B"]), runs)
    FigureCanvasAgg(fig).draw()  # renders: every style given is one matplotlib knows
    (ax,) = fig.axes
    drawn = {line.get_label(): line for line in ax.get_lines()}
    assert len({drawn[f"{m} λ A"].get_linestyle() for m in methods}) == 4
    for client in ("A", "B"):
        assert len({to_rgba(drawn[f"{m} λ {client}"].get_color()) for m in methods}) == 1
    assert to_rgba(drawn["lgmix λ A"].get_color()) != to_rgba(drawn["lgmix λ B"].get_color())
    for line, band in zip(ax.get_lines(), ax.collections, strict=True):  # each line, then its band
        assert to_rgba(band.get_facecolor()[0])[:3] == to_rgba(line.get_color())[:3]


def test_one_clients_bars_are_centred_on_their_layers_and_the_title_says_the_round():
    ((_, fig),) = draw(view("personal_divergence", clients=["A"]), [run("lgmix", 0, {7: personal([[1.0, 2.0]])})])
    (ax,) = fig.axes
    ((first, second),) = ax.containers
    for layer, bar in ((1, first), (2, second)):
        assert bar.get_x() == pytest.approx(layer - 0.4) and bar.get_width() == pytest.approx(0.8)
    assert ax.get_title() == "v · lgmix · round 7 (last diagnosed)"
