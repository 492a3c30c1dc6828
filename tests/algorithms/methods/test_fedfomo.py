"""FedFomo (Zhang et al., ICLR 2021) against hand computations: the validation split, the choice of the
M peers by affinity, the first-order weights of Eq. 6, the mixing of Eq. 7, and the server's affinity matrix.

A 2-layer MLP on 8 samples in float64 (``tests/pfl_formula_fixtures.py``'s set-up); the peers' validation losses and the
weights are written out in plain torch arithmetic. (``test_fedfomo_scores_and_mixes_peers_with_their_own_batchnorm_statistics`` checks the BatchNorm
statistics in a whole run.)
"""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import make_spec
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm, validate_algorithm_params
from fedbench.algorithms.base import ClientUpdate
from fedbench.algorithms.context import load_weights
from fedbench.algorithms.params import FedFomoParams
from fedbench.data.federated import prepare_data
from fedbench.engine.loop import init_model
from fedbench.errors import ConfigError
from fedbench.seeding import torch_generator
from fedbench.spec import RunSpec
from personal_run_fixtures import BASE, BN, DEVICE
from pfl_formula_fixtures import N, flat, gd, loss_and_grad, setup


def test_defaults_and_bounds():
    params = build_algorithm("fedfomo", {}).params
    assert (params.m, params.val_fraction) == (5, 0.2)
    validate_algorithm_params("fedfomo", {"m": 1, "val_fraction": 1e-9})
    validate_algorithm_params("fedfomo", {"val_fraction": 1 - 1e-9})
    for rejected in ({"m": 0}, {"val_fraction": 0.0}, {"val_fraction": 1.0}):
        with pytest.raises(ConfigError, match=next(iter(rejected))):
            validate_algorithm_params("fedfomo", rejected)


@pytest.mark.parametrize("size, fraction, n_val", [(10, 0.2, 2), (10, 0.25, 2), (7, 0.5, 4), (3, 0.1, 1)])
def test_validation_split_is_a_fixed_fraction_of_the_clients_data(size, fraction, n_val):
    """D_i^val: the first max(1, round(f·n)) samples of the client's permutation from the run seed's
    ``fedfomo-val`` stream; training keeps the rest, in index order."""
    algorithm = build_algorithm("fedfomo", {"val_fraction": fraction})
    spec = make_spec("fedfomo", {"val_fraction": fraction})
    indices = torch.arange(100, 100 + 3 * size, 3)
    train, held = algorithm.local_split(spec, 2, indices)
    order = torch.randperm(size, generator=torch_generator(spec.seed, "fedfomo-val", 2))
    assert torch.equal(held, indices[order[:n_val]])
    assert torch.equal(train, indices[order[n_val:]].sort().values)
    again = algorithm.local_split(spec, 2, indices)
    assert torch.equal(again[0], train) and torch.equal(again[1], held)  # the same split every round


def test_result_revision_is_two_for_batchnorm_models_only():
    assert FedFomoParams.result_revision(make_spec("fedfomo")) == 1
    bn = make_spec("fedfomo", model="fedbn_digit_cnn")
    assert FedFomoParams.result_revision(bn) == 2


def fomo_client(params, own, peers, affinity, client_id=0):
    """Client 0 (own θ_i in its state, or none) with the peers' models and affinities in the payload; its
    validation split is the 8 samples, no local epochs (the upload is the mixed model)."""
    state = {} if own is None else {"personal_params": own.clone(), "personal_buffers": {}}
    algorithm, ctx, server, _, x, y = setup("fedfomo", params, state, local_epochs=0)
    server.state["client_models"].update({j: (theta, {}) for j, theta in peers.items()})
    server.state["affinity"].update(affinity)
    ctx.payload = algorithm.payload(server, 1)
    ctx.holdout = torch.arange(N)
    return algorithm, ctx, server, x, y


def peer_models(model_seed_params: torch.Tensor, x, y, model):
    """Peer 2 is θ_i after three gradient steps on the validation data (better, ‖θ_2 − θ_i‖ < 1), peer 3 a
    second improvement, the others noise (worse): some weights are positive, some 0."""
    g = torch.Generator().manual_seed(21)
    own = model_seed_params
    return {
        0: own + 5.0,  # the client's own upload of an earlier round is not a peer
        1: own + 0.8 * torch.randn(own.shape, generator=g, dtype=own.dtype),
        2: gd(model, own, x, y, 0.2, 3),
        3: gd(model, own, x, y, 0.5, 1) + 0.01 * torch.randn(own.shape, generator=g, dtype=own.dtype),
        4: own + 0.8 * torch.randn(own.shape, generator=g, dtype=own.dtype),
    }


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "m, chosen",
    [
        (3, {1, 2, 3}),  # the highest affinities P_0j; client 1's row does not count; 4 has none (0)
        (1, {2}),  # a tie (P_02 = P_03) goes to the lower index
        (None, {1, 2, 3, 4}),  # M = 5 > 4 peers: all
    ],
)
@pytest.mark.parametrize("first_participation", [False, True])
def test_eq6_weights_and_eq7_mixing_by_hand(m, chosen, first_participation):
    """w_ij = max(0, (L_i(θ_i) − L_i(θ_j)) / ‖θ_j − θ_i‖) over the M peers of highest affinity, normalised to
    sum 1; θ_i ← θ_i + Σ_j w_ij (θ_j − θ_i). θ_i is the client's model, or w^t before it first trains."""
    params = {} if m is None else {"m": m}
    _, probe, server, _, x, y = setup("fedfomo", params)  # the same w^t and data as the client's below
    model = probe.model
    own = None if first_participation else server.params + 0.1
    theta_i = server.params.clone() if first_participation else own
    peers = peer_models(theta_i, x, y, model)
    affinity = {(0, 1): 0.5, (0, 2): 0.9, (0, 3): 0.9, (1, 4): 3.0, (0, 0): 9.0}
    algorithm, ctx, _, x, y = fomo_client(params, own, peers, affinity)
    update = algorithm.local_train(ctx)

    def val_loss(theta):
        return float(loss_and_grad(model, theta, x, y)[0])

    raw = {j: max(0.0, (val_loss(theta_i) - val_loss(peers[j])) / float((peers[j] - theta_i).norm())) for j in chosen}
    assert set(update.extra["fomo_weights"]) == chosen
    total = sum(raw.values())
    assert total > 0 and any(w == 0 for j, w in raw.items() if j != 2) == (chosen != {2})
    weights = {j: w / total for j, w in raw.items()}
    assert update.extra["fomo_weights"] == pytest.approx(weights, abs=F64_ATOL)
    expected = theta_i + sum(w * (peers[j] - theta_i) for j, w in weights.items())
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.equal(ctx.state["personal_params"], update.params)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_no_improving_peer_leaves_the_model_unmixed_and_a_peer_equal_to_it_weighs_zero():
    """All w_ij = 0 (no peer lowers L_i; a peer at distance 0 gets 0, not a division by zero): θ_i is trained
    unmixed."""
    _, probe, server, _, x, y = setup("fedfomo")
    own = gd(probe.model, server.params, x, y, 0.5, 3)  # a good model: the noisy peers are worse
    g = torch.Generator().manual_seed(3)
    peers = {1: own.clone(), 2: own + torch.randn(own.shape, generator=g, dtype=own.dtype)}
    algorithm, ctx, _, _, _ = fomo_client({}, own, peers, {})
    update = algorithm.local_train(ctx)
    assert update.extra["fomo_weights"] == {1: 0.0, 2: 0.0}
    assert torch.equal(update.params, own)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_server_stores_each_upload_and_adds_the_weights_to_the_affinity_matrix():
    """The server keeps every client's latest θ_j and P_ij += w_ij; the global model is FedAvg of the uploads."""
    algorithm, _, server, _, _, _ = setup("fedfomo")
    server.state["affinity"].update({(0, 1): 0.5, (2, 0): 0.25})
    server.state["client_models"][2] = (torch.zeros_like(server.params), {})
    p0, p2 = server.params + 1.0, server.params - 2.0
    updates = [
        ClientUpdate(0, p0, {}, 1, 1, 0.0, {"fomo_weights": {1: 0.3, 2: 0.7}}),
        ClientUpdate(2, p2, {}, 3, 1, 0.0, {"fomo_weights": {0: 1.0}}),
    ]
    algorithm.aggregate(server, updates, 1)
    assert server.state["affinity"] == pytest.approx({(0, 1): 0.8, (0, 2): 0.7, (2, 0): 1.25})
    assert torch.equal(server.state["client_models"][0][0], p0)
    assert torch.equal(server.state["client_models"][2][0], p2)
    assert torch.allclose(server.params, 0.25 * p0 + 0.75 * p2, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_evaluation_uses_the_clients_own_model_or_the_global_one():
    algorithm, ctx, server, _, _, _ = setup("fedfomo")
    assert torch.equal(flat(algorithm.eval_model(ctx)), server.params)
    own = server.params + 0.5
    ctx.state.update(personal_params=own.clone(), personal_buffers={})
    assert torch.equal(flat(algorithm.eval_model(ctx)), own)


@pytest.mark.usefixtures("float64")  # the mix is compared with Eq. 7 summed in another order: in float64
def test_fedfomo_scores_and_mixes_peers_with_their_own_batchnorm_statistics():
    """FedFomo Eq. 6–7 on a BatchNorm model: each peer θ_j is scored on client i's validation split with its own
    running statistics, and they are mixed with the same weights as the parameters (FL-bench [code] loads and
    mixes every state_dict entry); num_batches_tracked stays the client's own. (Result revision 1 scored peers
    with client i's statistics and mixed only the weights.)"""
    import copy

    from fedbench.algorithms import build_algorithm
    from fedbench.algorithms.context import ServerState, SpareModels
    from fedbench.algorithms.losses import task_loss
    from fedbench.engine.state import RunState

    spec = RunSpec(**{**BASE, **BN, "algorithm": "fedfomo", "rounds": 1})
    data = prepare_data(spec, DEVICE)
    model = init_model(spec, data.num_classes, data.input_shape, DEVICE)
    algorithm = build_algorithm("fedfomo", {})
    algorithm.bind_model(spec, model, data.input_shape, data.num_classes)
    base = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    generator = torch.Generator().manual_seed(0)

    def variant(scale, mean_shift, var):
        params = base + scale * torch.randn(base.shape, generator=generator)
        state = {
            n: (
                b + mean_shift
                if n.endswith("running_mean")
                else torch.full_like(b, var)
                if n.endswith("running_var")
                else b + 3
            )
            for n, b in buffers.items()
        }
        return params, state

    own = variant(0.02, 0.0, 1e-4)  # running variances far too small: a poor model on its own data
    peers = {1: variant(0.02, 0.0, 1.0), 2: variant(0.02, 0.3, 2.0)}
    server = ServerState(params=base.clone(), buffers=copy.deepcopy(buffers))
    algorithm.init_server(server)
    server.state["client_models"].update(peers)
    run = RunState(
        spec=spec,
        data=data,
        model=model,
        server=server,
        device=DEVICE,
        spare_models=SpareModels(model),
        client_states={0: {"personal_params": own[0].clone(), "personal_buffers": copy.deepcopy(own[1])}},
    )
    ctx = run.client_context(algorithm, 0, 1, lr=0.1, payload=algorithm.payload(server, 1))
    algorithm.begin_local(ctx)

    scorer = copy.deepcopy(model).eval()
    x, y = data.tensors.train_x[ctx.holdout], data.tensors.train_y[ctx.holdout]

    def loss(params, state):
        load_weights(scorer, params, state)
        with torch.no_grad():
            return task_loss("classification", scorer(x), y).item()

    own_loss = loss(*own)
    raw = {j: max(0.0, (own_loss - loss(*peer)) / float((peer[0] - own[0]).norm())) for j, peer in peers.items()}
    assert all(w > 0 for w in raw.values()) and len(ctx.holdout) > 0
    weights = {j: w / sum(raw.values()) for j, w in raw.items()}  # Eq. 7, normalised
    expected = own[0] + sum(w * (peers[j][0] - own[0]) for j, w in weights.items())
    assert torch.allclose(ctx.current_params(), expected, rtol=0, atol=F64_ATOL)
    assert ctx.scratch["fomo_weights"] == pytest.approx(weights)
    mixed = ctx.current_buffers()
    for name, b in own[1].items():
        if b.is_floating_point():
            expected_b = b + sum(w * (peers[j][1][name] - b) for j, w in weights.items())
            assert torch.allclose(mixed[name], expected_b, rtol=0, atol=F64_ATOL), name
        else:
            assert torch.equal(mixed[name], b), name
