"""LG-Mix: defining properties of the method (Eq. 1-2 and 4-6, history averaging) and one CLI run (its recipes:
tests/papers/test_lgmix_tables.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from algorithm_fixtures import (
    MLP,
    HeadMLP,
    check_reference_run,
    client_context,
    fresh_server,
    make_spec,
    run_until,
)
from conftest import F64_ATOL, ListSink
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.methods.lgmix import feature_moments, gram_trace, mixing_ratio
from fedbench.algorithms.params import LGMixParams
from fedbench.checkpoint.format import load_checkpoint, read_checkpoint, save_checkpoint
from fedbench.checkpoint.location import client_state_folder
from fedbench.cli import app
from fedbench.data.store import TensorData
from fedbench.engine import EngineOptions, run
from fedbench.registry import Registry
from fedbench.spec import RunSpec
from personal_run_fixtures import BASE as PERSONAL_BASE
from personal_run_fixtures import BN
from pfl_formula_fixtures import CLASSES, DIM

DEVICE = torch.device("cpu")


# The personal methods' four-client setting, three rounds; and BN (LG-Mix's Digits model on the 8×8 digits, a few
# steps, two rounds) as they have it: BatchNorm buffers are mixed too.
BASE = {**PERSONAL_BASE, "rounds": 3}


def train(tmp_path, algorithm, params=None, stop_after_round=None, **overrides):
    """The run's records and final checkpoint; ``stop_after_round``: stopped after that round (``run_until``)."""
    spec = RunSpec(algorithm=algorithm, algorithm_params=params or {}, **{**BASE, **overrides})
    path = tmp_path / f"{spec.spec_hash}.pt"
    sink = ListSink()
    if stop_after_round is not None:
        run_until(spec, sink, stop_after_round, EngineOptions(checkpoint_path=path))
    else:
        result = run(spec, sink, EngineOptions(checkpoint_path=path))
        assert result.status == "done", result.message
    return sink.records, load_checkpoint(path, spec.spec_hash, DEVICE)


def personal(state):
    """A client's personal model, complete when its round ends (``after_aggregation``)."""
    assert "mix_params" not in state
    return state["personal_params"]


# ------------------------------------------------------------------------------------ Eq. 2 limits
# LG-Mix computes u + Δw_c and w_c + λΔw_c − (1 − λ)u + (1 − λ)u', equal to FedAvg's and local training's
# weights only in exact arithmetic: compared in float64 (conftest.F64_ATOL).
@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(
    "setting", [pytest.param(BASE, id="mlp"), pytest.param(BN, id="batchnorm", marks=pytest.mark.slow)]
)
def test_lambda_zero_is_fedavg(tmp_path, setting):
    """λ = 0: every personal model is the global model and the global model follows FedAvg — up to rounding, since
    LG-Mix uploads u + (w − u). BatchNorm with one step per round: with two, one client's second step of round 2
    amplifies that rounding (1e-7) to 1e-3 on this digits setting, beyond any tolerance that would still notice a
    wrong λ."""
    _, fedavg = train(tmp_path, "fedavg", **setting)
    _, lgmix = train(tmp_path, "lgmix", {"fixed_lambda": 0.0}, **setting)
    assert lgmix["server"]["params"].dtype == torch.float64
    assert torch.allclose(lgmix["server"]["params"], fedavg["server"]["params"], rtol=0, atol=F64_ATOL)
    for name, b in fedavg["server"]["buffers"].items():
        if b.is_floating_point():
            assert torch.allclose(lgmix["server"]["buffers"][name], b, rtol=0, atol=F64_ATOL), name
    for state in lgmix["client_states"].values():
        assert torch.allclose(personal(state), fedavg["server"]["params"], rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("float64")
def test_lambda_one_is_local_training(tmp_path):
    _, local = train(tmp_path, "local")
    _, lgmix = train(tmp_path, "lgmix", {"fixed_lambda": 1.0})
    for client, state in lgmix["client_states"].items():
        assert torch.allclose(personal(state), local["client_states"][client]["personal_params"], rtol=0, atol=F64_ATOL)
    assert not torch.allclose(lgmix["server"]["params"], local["server"]["params"])  # u still learns


class Scripted:
    """LG-Mix with a scripted sequence of raw λ (Eq. 6) per round, to check history averaging and Eq. 2."""

    def __init__(self, raw, **params):
        self.algorithm = build_algorithm("lgmix", params)
        self.raw = iter(raw)
        self.algorithm.round_lambda = lambda ctx: next(self.raw)


@pytest.mark.usefixtures("float64")
def test_history_averaging_and_the_mixing_rule_match_the_formulas():
    torch.manual_seed(0)
    raw = [0.9, 0.3, 0.6, 0.2]
    for history in (True, False):
        scripted = Scripted(raw, history=history)
        state: dict = {}
        w = torch.randn(6)  # w_c(0)
        u = torch.randn(6)  # u(0)
        for t, lam_raw in enumerate(raw):
            delta = torch.randn(6)  # Δw_c(t)
            server = SimpleNamespace(params=u, buffers={"bn.mean": u[:2].clone(), "bn.n": torch.tensor(t)})
            ctx = SimpleNamespace(
                state=state,
                global_params=server.params,
                global_buffers=server.buffers,
                scratch={
                    "start_params": w.clone(),
                    "start_buffers": {"bn.mean": w[:2].clone(), "bn.n": torch.tensor(0)},
                },
            )
            update = SimpleNamespace(params=w + delta, buffers={"bn.mean": w[:2] + delta[:2], "bn.n": torch.tensor(2)})
            scripted.algorithm.end_local(ctx, update)
            expected = float(np.mean(raw[: t + 1])) if history else lam_raw  # [code]: mean incl. round t
            assert float(state["lambda"]) == pytest.approx(expected)
            assert torch.allclose(update.params, u + delta, rtol=0, atol=F64_ATOL)  # upload u(t) + Δw_c
            delta_u = torch.randn(6)
            u = u + delta_u  # the server's u(t+1)
            scripted.algorithm.after_aggregation(
                ctx, SimpleNamespace(params=u, buffers={"bn.mean": u[:2].clone(), "bn.n": torch.tensor(t)})
            )
            w_next = w + expected * delta + (1 - expected) * delta_u  # LG-Mix Eq. 2
            assert torch.allclose(state["personal_params"], w_next, rtol=0, atol=F64_ATOL)
            assert torch.allclose(state["personal_buffers"]["bn.mean"], w_next[:2], rtol=0, atol=F64_ATOL)
            assert int(state["personal_buffers"]["bn.n"]) == 2  # the client's own count
            w = state["personal_params"]


# ------------------------------------------------------------------------------------ Eq. 5-6
def test_gram_traces_equal_the_closed_forms():
    torch.manual_seed(1)
    h = torch.relu(torch.randn(40, 8)).double()
    moments = None
    for chunk in h.split(16):  # accumulated batch by batch
        moments = feature_moments(chunk.float(), moments)
    n = len(h)
    assert gram_trace(moments, center=False, drop_smallest=False) == pytest.approx(float((h**2).sum()) / n)
    centered = h - h.mean(0)
    assert gram_trace(moments, center=True, drop_smallest=False) == pytest.approx(float((centered**2).sum()) / n)
    eigenvalues = np.linalg.eigvalsh((centered.T @ centered / n).numpy())
    assert gram_trace(moments) == pytest.approx(eigenvalues.sum() - eigenvalues.min())
    spatial = feature_moments(torch.ones(2, 3, 4, 4), None)  # feature maps are average-pooled
    assert spatial[0].shape == (3, 3) and spatial[2] == 2
    sequence = torch.randn(5, 3, 7)  # 1-D feature maps (B, C, L) too: h = the mean over L
    pooled = sequence.double().mean(2)
    outer, total, n = feature_moments(sequence, None)
    assert n == 5 and torch.allclose(outer, pooled.T @ pooled) and torch.allclose(total, pooled.sum(0))


def test_mixing_ratio_stays_in_the_unit_interval():
    assert mixing_ratio(3.0, 1.0) == pytest.approx(0.75)
    assert mixing_ratio(0.0, 2.0) == 0.0 and mixing_ratio(2.0, 0.0) == 1.0
    assert mixing_ratio(0.0, 0.0) == 0.5
    assert mixing_ratio(0.2, 0.6) == pytest.approx(0.25)  # small traces are ratios too
    # a centred trace that rounding left slightly below 0 still gives λ in [0, 1]
    assert mixing_ratio(1.0, -1e-12) == 1.0 and mixing_ratio(-1e-12, 1.0) == 0.0
    for a, b in np.random.default_rng(0).exponential(size=(20, 2)):
        assert 0.0 <= mixing_ratio(a, b) <= 1.0


def test_lambda_from_features_is_a_running_mean_in_the_unit_interval(tmp_path):
    _, history = train(tmp_path, "lgmix", rounds=3)
    for state in history["client_states"].values():
        assert int(state["lambda_count"]) == 3
        assert 0.0 <= float(state["lambda"]) <= 1.0
        assert float(state["lambda"]) == pytest.approx(float(state["lambda_sum"]) / 3)
    _, raw = train(tmp_path, "lgmix", {"history": False, "center": False, "drop_smallest": False}, rounds=3)
    assert all("lambda_count" not in s and 0 <= float(s["lambda"]) <= 1 for s in raw["client_states"].values())


@pytest.mark.slow
def test_resume_gives_the_same_curve(tmp_path):
    spec_args = {"rounds": 3, "eval_every": 2, "model": "fedbn_digit_cnn", "model_params": {}, "local_steps": 2}
    full, _ = train(tmp_path / "a", "lgmix", **spec_args)
    partial_dir = tmp_path / "b"
    first, _ = train(partial_dir, "lgmix", stop_after_round=1, **spec_args)
    second, _ = train(partial_dir, "lgmix", **spec_args)
    assert [r.personal_mean for r in first + second] == [r.personal_mean for r in full]
    assert [r.test_acc for r in first + second] == [r.test_acc for r in full]


# ------------------------------------------------------------------------------------ partial participation
PARTIAL = {"clients_per_round": 2, "rounds": 4, "client_val_fraction": 0.1}


def test_evaluation_does_not_change_training_under_partial_participation(tmp_path):
    """A fixed bug: with 2 of 4 clients per round, personal evaluation (``eval_model``) used to finish and store
    the pending Eq. 2 mix with the u of the evaluation, so training and every reported figure depended on
    ``eval_every`` / ``eval_mode`` (server weights 0.0097 apart here, client 0's round-4 personal accuracy 0.571
    with eval_every=1 and 0.619 with 2). Eq. 2 is now completed right after aggregation; evaluation only reads."""
    every_round, every_round_ckpt = train(tmp_path / "a", "lgmix", eval_every=1, **PARTIAL)
    every_other, every_other_ckpt = train(tmp_path / "b", "lgmix", eval_every=2, **PARTIAL)
    global_only, global_ckpt = train(tmp_path / "c", "lgmix", eval_mode="global", **PARTIAL)
    for ckpt in (every_other_ckpt, global_ckpt):
        assert torch.equal(ckpt["server"]["params"], every_round_ckpt["server"]["params"])
        assert sorted(ckpt["client_states"]) == sorted(every_round_ckpt["client_states"])
        for client, state in every_round_ckpt["client_states"].items():
            assert torch.equal(personal(ckpt["client_states"][client]), personal(state))
            assert torch.equal(ckpt["client_states"][client]["lambda"], state["lambda"])
    assert (
        [r.train_loss for r in every_other]
        == [r.train_loss for r in every_round]
        == [r.train_loss for r in global_only]
    )
    by_round = {r.round: r for r in every_round}
    evaluated = [r for r in every_other if r.personal_per_client is not None]
    assert [r.round for r in evaluated] == [2, 4]
    for record in evaluated:  # the same personal figures, whatever else was evaluated
        assert record.personal_per_client == by_round[record.round].personal_per_client
        assert record.personal_val_per_client == by_round[record.round].personal_val_per_client
        assert record.test_acc == by_round[record.round].test_acc


@pytest.mark.usefixtures("float64")  # the two sides differ by summation order only: compared in float64
def test_partial_participation_applies_eq2_in_the_rounds_a_client_trains(tmp_path):
    """[proposal] A client applies Eq. 2 in the rounds it trains, with that round's Δu(t) = u(t+1) − u(t), and keeps
    w_c in the others. With λ = 0: w_c(t+1) = w_c(t) + Δu(t) for a client of round t (a client's first round starts
    from the current u, so it then holds u(t+1)); the others keep w_c exactly."""
    from fedbench.engine import client_schedule

    params = {"fixed_lambda": 0.0}
    setting = {**PARTIAL, "eval_mode": "global"}
    schedule = client_schedule(RunSpec(algorithm="lgmix", algorithm_params=params, **{**BASE, **setting}))
    ckpts = [train(tmp_path / f"r{t}", "lgmix", params, **{**setting, "rounds": t})[1] for t in (1, 2, 3)]
    for t in (1, 2):  # from the checkpoint after round t to the one after round t + 1
        before, after = ckpts[t - 1], ckpts[t]
        u_before, u_after = before["server"]["params"], after["server"]["params"]
        for client in range(4):
            old, new = before["client_states"].get(client), after["client_states"].get(client)
            if client not in schedule[t]:
                assert (old is None and new is None) or torch.equal(personal(new), personal(old))
            elif old is None:
                assert torch.allclose(personal(new), u_after, rtol=0, atol=F64_ATOL)
            else:
                assert torch.allclose(personal(new), personal(old) - u_before + u_after, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(
    "setting",
    [
        pytest.param({**BN, "rounds": 4, "eval_every": 2}, id="batchnorm-every2", marks=pytest.mark.slow),
        pytest.param({"rounds": 3, "eval_mode": "global", "client_val_fraction": 0.1}, id="mlp-global"),
        pytest.param({"rounds": 3, "algorithm_params": {"history": False}}, id="no-history"),
    ],
)
def test_full_participation_keeps_its_reference_results(tmp_path, request, setting):
    """The paper's setting (every client every round) keeps result revision 1: Eq. 2 completed right after
    aggregation gives the curves, server weights and personal models stored for these runs, which are those of the
    earlier code that completed it at the client's next use (with every client in every round, the same u(t+1))."""
    setting = dict(setting)
    params = setting.pop("algorithm_params", None)
    spec = RunSpec(algorithm="lgmix", algorithm_params=params or {}, **{**BASE, **setting})
    assert LGMixParams.result_revision(spec) == 1
    records, checkpoint = train(tmp_path, "lgmix", params, **setting)
    check_reference_run(f"lgmix/{request.node.callspec.id}", records, checkpoint)


def with_pending_mix(path: Path, spec: RunSpec, clients) -> dict:
    """Rewrite the checkpoint at ``path`` as the earlier code wrote it for ``clients``: Eq. 2's last term pending in
    the client state, ``mix_params`` = w_c(t+1) − (1 − λ̄)u(t+1) with ``mix_global_share`` = 1 − λ̄ (and the same for
    the floating BN buffers), beside a stale personal model that completing the mix replaces. The u(t+1) taken out
    is the checkpoint's server model, as the earlier code's next use would have added it back. Every state is kept
    inline (no client-state files), as such checkpoints were. Returns the rewritten client states."""
    payload = read_checkpoint(path, spec.spec_hash)
    folder = client_state_folder(path)
    for client, (name, sha256) in payload.pop("client_files").items():
        payload["client_states"][client] = read_checkpoint(folder / name, spec.spec_hash, "cpu", sha256, bound=True)[
            "state"
        ]
        (folder / name).unlink()
    server = payload["server"]
    for client in clients:
        state = payload["client_states"][client]
        share = 1.0 - float(state["lambda"])
        state["mix_params"] = state["personal_params"] - share * server["params"]
        state["mix_global_share"] = torch.tensor(share, dtype=torch.float64)
        state["mix_buffers"] = {
            name: b - share * server["buffers"][name] if b.is_floating_point() else b.clone()
            for name, b in state["personal_buffers"].items()
        }
        state["personal_params"] = state["personal_params"] + 1.0  # stale: w_c of an earlier round
    save_checkpoint(path, payload)
    return payload["client_states"]


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(
    "model",
    [
        pytest.param({}, id="mlp"),
        pytest.param(
            {k: BN[k] for k in ("model", "model_params", "local_steps", "batch_size")},
            id="batchnorm",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_checkpoint_with_eq2_pending_resumes_exactly_under_full_participation(tmp_path, model):
    """A checkpoint of the earlier code after a round without personal evaluation (every client's mix pending) is
    completed on resume with the checkpoint's u, BatchNorm statistics included, and continues the uninterrupted
    run's curve."""
    setting = {**model, "rounds": 3, "eval_every": 3}
    spec = RunSpec(algorithm="lgmix", **{**BASE, **setting})
    straight, _ = train(tmp_path / "a", "lgmix", **setting)
    first, _ = train(tmp_path / "b", "lgmix", stop_after_round=2, **setting)
    states = with_pending_mix(tmp_path / "b" / f"{spec.spec_hash}.pt", spec, range(spec.num_clients))
    assert all("mix_params" in state for state in states.values())
    second, resumed = train(tmp_path / "b", "lgmix", **setting)
    assert [r.round for r in first + second] == [r.round for r in straight]
    for fields in ("train_loss", "test_acc", "personal_per_client"):
        resumed_curve = [getattr(r, fields) for r in first + second]
        expected = [getattr(r, fields) for r in straight]
        assert [v is None for v in resumed_curve] == [v is None for v in expected], fields
        for got, want in zip(resumed_curve, expected):
            if want is not None:
                assert got == pytest.approx(want, rel=0, abs=F64_ATOL), fields
    assert all("mix_params" not in state for state in resumed["client_states"].values())


def test_a_checkpoint_with_a_mix_pending_since_an_earlier_round_is_rejected(tmp_path):
    """Partial participation, no personal evaluation: a client of round 1 that skipped round 2 held, in the earlier
    code's checkpoint after round 2, a mix meant for u(2), which that checkpoint no longer holds. Resuming it fails
    with a one-line reason."""
    from fedbench.engine import client_schedule
    from fedbench.errors import FedbenchError

    setting = {**PARTIAL, "eval_mode": "global"}
    spec = RunSpec(algorithm="lgmix", **{**BASE, **setting})
    schedule = client_schedule(spec)
    skipped = sorted(set(schedule[0]) - set(schedule[1]))
    assert skipped  # some client of round 1 skips round 2
    train(tmp_path, "lgmix", stop_after_round=2, **setting)
    with_pending_mix(tmp_path / f"{spec.spec_hash}.pt", spec, skipped[:1])
    with pytest.raises(
        FedbenchError, match=r"^checkpoint \S+: LG-Mix client \d+ holds .* cannot be completed exactly\. Delete"
    ):
        train(tmp_path, "lgmix", **setting)


CLI_RECIPE = """
paper = "tests"
name = "lgmix_cli"
title = "LG-Mix on digits"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 32 }
partition = "dirichlet"
partition_params = { alpha = 0.3, min_size = 20 }
num_clients = 4
clients_per_round = 4
rounds = 4
batch_size = 32
optimizer = { lr = 0.1 }
eval_mode = "both"
client_test_fraction = 0.2
client_val_fraction = 0.2

[matrix]
algorithm = ["lgmix"]

[[tables]]
name = "per_client"
rows = ["algorithm"]
columns = ["client"]
clients = ["A", "B", "C", "D"]
figure = "val_selected"
metric = "personal_mean"
"""


def test_cli_run_improves_personal_accuracy(tmp_path):
    recipe = tmp_path / "lgmix.toml"
    recipe.write_text(CLI_RECIPE)
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(recipe), "--registry", registry])
    assert result.exit_code == 0, result.output
    reg = Registry(registry)
    (row,) = reg.runs()
    curve = reg.curve(row.id)
    assert row.status == "done" and len(curve) == 4
    assert curve[-1].personal_mean > curve[0].personal_mean + 0.05
    assert curve[-1].personal_mean > 0.5 and curve[-1].personal_val_mean is not None
    report = runner.invoke(app, ["report", "--recipe", str(recipe), "--registry", registry, "--format", "json"])
    assert report.exit_code == 0, report.output
    cells = json.loads(report.stdout)["tables"][0]["cells"]
    assert {c["column"] for c in cells} == {"A", "B", "C", "D", "Avg."}


def test_defaults_follow_the_official_code_and_fixed_lambda_is_a_ratio():
    """Spec §1.5, §8 #1: history on, centred covariance without its smallest singular value; λ fixed in [0, 1]."""
    from fedbench.algorithms import validate_algorithm_params
    from fedbench.errors import ConfigError

    assert build_algorithm("lgmix", {}).params.model_dump() == {
        "history": True,
        "center": True,
        "drop_smallest": True,
        "fixed_lambda": None,
        "regularizers": (),
    }
    for value in (0.0, 1.0):
        validate_algorithm_params("lgmix", {"fixed_lambda": value})
    for value in (-1e-9, 1.0 + 1e-9):
        with pytest.raises(ConfigError, match="fixed_lambda"):
            validate_algorithm_params("lgmix", {"fixed_lambda": value})


# ------------------------------------------------------------------------------------------- LG-Mix
def trace_by_hand(h: torch.Tensor, center: bool, drop_smallest: bool) -> float:
    """tr(Σ) of LG-Mix Eq. 5 over the rows of h (÷ n: cancels in Eq. 6), centred and without the smallest eigenvalue
    as the [code] computes it, or the paper's plain Σ h hᵀ."""
    n = h.shape[0]
    centred = h - h.mean(0) if center else h
    sigma = centred.T @ centred / n
    if not drop_smallest:
        return float(torch.diagonal(sigma).sum())
    eigenvalues = torch.linalg.eigvalsh(sigma).abs()
    return float(eigenvalues.sum() - eigenvalues.min())


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("center, drop_smallest", [(True, True), (False, False)])
def test_lgmix_lambda_and_eq2_from_two_local_steps_by_hand(center, drop_smallest):
    """LG-Mix Eq. 1–6 through ``local_train`` and ``after_aggregation``: two full-batch SGD steps from the personal
    model w_c; h_c = its penultimate features before each step, h_g = those of u(t) (both steps); λ = tr Σ_c /
    (tr Σ_c + tr Σ_g); the upload is u + Δw_c and the new personal model w_c + λΔw_c + (1 − λ)Δu."""
    params = {"center": center, "drop_smallest": drop_smallest}
    lr = 0.3
    spec = make_spec("lgmix", params, model=MLP, local_steps=2, batch_size=8, optimizer={"lr": lr})
    algorithm = build_algorithm("lgmix", params)
    torch.manual_seed(2)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    u = server.params.clone()
    w_c = u + 0.3 * torch.randn_like(u)  # the client's personal model differs from u(t)
    state = {"personal_params": w_c.clone(), "personal_buffers": {}}
    x, y = torch.randn(8, DIM), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), state)
    update = algorithm.local_train(ctx)

    reference = HeadMLP(CLASSES, (DIM,), hidden=5)

    def at(w: torch.Tensor) -> HeadMLP:
        torch.nn.utils.vector_to_parameters(w, reference.parameters())
        return reference

    def features(w: torch.Tensor) -> torch.Tensor:
        return at(w).encoder(x).detach()

    def step(w: torch.Tensor) -> torch.Tensor:
        loss = torch.nn.functional.cross_entropy(at(w.clone().requires_grad_(False))(x), y)
        grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(reference.parameters()))])
        return w - lr * grad

    w_1 = step(w_c)
    w_2 = step(w_1)
    local = trace_by_hand(torch.cat([features(w_c), features(w_1)]), center, drop_smallest)
    glob = trace_by_hand(torch.cat([features(u), features(u)]), center, drop_smallest)
    lam = local / (local + glob)
    assert 0.05 < lam < 0.95  # a λ that neither limit (FedAvg, local training) explains
    assert float(state["lambda"]) == pytest.approx(lam, rel=0, abs=F64_ATOL)  # round 1: λ̄ = λ
    assert torch.allclose(update.params, u + (w_2 - w_c), rtol=0, atol=F64_ATOL)  # upload u(t) + Δw_c
    server.params = u + torch.linspace(-0.2, 0.3, u.numel())  # u(t+1): the server has aggregated
    algorithm.after_aggregation(ctx, server)
    expected = w_c + lam * (w_2 - w_c) + (1 - lam) * (server.params - u)  # LG-Mix Eq. 2
    assert torch.allclose(state["personal_params"], expected, rtol=0, atol=F64_ATOL)


def test_lgmix_attaching_flops_are_the_global_models_forward_pass_on_every_batch():
    """Eq. 6's h_g: the global model's forward pass on each of the K local batches of B samples."""
    flops = build_algorithm("lgmix", {}).attach_flops_per_round(
        steps=5, samples=230, batch_size=50, num_params=1000, forward_flops=300.0, backward_flops=600.0
    )
    assert flops == 5 * 50 * 300.0


@pytest.mark.usefixtures("head_mlp", "float64")
def test_lgmix_traces_accumulate_over_the_rounds_batches():
    """Eq. 5's Σ sums over every local batch of the round, for h_c and for h_g: one epoch of two different batches
    (the batches as the engine draws them); h_c of the second batch is taken at the weights after the first step."""
    spec = make_spec("lgmix", {}, model=MLP, local_epochs=1, batch_size=4, optimizer={"lr": 0.3})
    algorithm = build_algorithm("lgmix", {})
    torch.manual_seed(5)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    u = server.params.clone()
    w_c = u + 0.3 * torch.randn_like(u)
    x, y = torch.randn(8, DIM), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    data = TensorData(x, y, x, y)
    twin = client_context(algorithm, spec, HeadMLP(CLASSES, (DIM,), hidden=5), server, data, torch.arange(8), {})
    (x1, y1), (x2, y2) = list(twin.batches())
    state = {"personal_params": w_c.clone(), "personal_buffers": {}}
    ctx = client_context(algorithm, spec, model, server, data, torch.arange(8), state)
    algorithm.local_train(ctx)

    reference = HeadMLP(CLASSES, (DIM,), hidden=5)

    def at(w):
        torch.nn.utils.vector_to_parameters(w, reference.parameters())
        return reference

    loss = torch.nn.functional.cross_entropy(at(w_c)(x1), y1)
    w_1 = w_c - 0.3 * torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(reference.parameters()))])
    local = trace_by_hand(torch.cat([at(w_c).encoder(x1), at(w_1).encoder(x2)]).detach(), True, True)
    glob = trace_by_hand(at(u).encoder(torch.cat([x1, x2])).detach(), True, True)
    assert float(state["lambda"]) == pytest.approx(local / (local + glob), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_lgmix_client_without_data_keeps_the_global_update():
    """A client with no local step has Δw_c = 0 and λ = 0 [proposal]: w_c(t+1) = w_c(t) + Δu(t)."""
    spec = make_spec("lgmix", {}, model=MLP)
    algorithm = build_algorithm("lgmix", {"history": False})
    torch.manual_seed(6)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    u = server.params.clone()
    w_c = u + 0.3 * torch.randn_like(u)
    state = {"personal_params": w_c.clone(), "personal_buffers": {}}
    x, y = torch.randn(1, DIM), torch.tensor([0])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(0), state)
    update = algorithm.local_train(ctx)
    assert float(state["lambda"]) == 0.0 and torch.allclose(update.params, u, rtol=0, atol=F64_ATOL)
    server.params = u + 0.1
    algorithm.after_aggregation(ctx, server)
    assert torch.allclose(state["personal_params"], w_c + 0.1, rtol=0, atol=F64_ATOL)
    evaluated = algorithm.eval_model(ctx)  # personalised evaluation uses w_c(t+1), not u(t+1)
    assert torch.allclose(torch.nn.utils.parameters_to_vector(evaluated.parameters()), w_c + 0.1, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp")
def test_lgmix_needs_penultimate_features():
    """Eq. 6 compares penultimate features: a model without a features/head split is a user error naming why."""
    from fedbench.errors import ConfigError

    spec = make_spec("lgmix", {}, model=MLP)
    algorithm = build_algorithm("lgmix", {})
    model = torch.nn.Sequential(torch.nn.Linear(DIM, CLASSES))
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    x, y = torch.randn(2, DIM), torch.tensor([0, 1])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(2), {})
    with pytest.raises(
        ConfigError, match=r"^lgmix needs a model with a features/head split \(penultimate features h\)$"
    ):
        algorithm.local_train(ctx)


def test_lgmix_reports_each_clients_mixing_weight_when_asked_and_nothing_otherwise():
    """Fig. 2(a)'s values: λ̄_c of each client of the round that holds one (a client that took no step holds none)."""
    lgmix = build_algorithm("lgmix", {})
    contexts = [SimpleNamespace(client_id=3, state={"lambda": 0.25}), SimpleNamespace(client_id=5, state={})]
    weights = {"clients": [3], "weight": [0.25], "symbol": "λ"}
    assert lgmix.round_diagnostics({"mixing_weights", "val_loss"}, None, contexts) == {"mixing_weights": weights}
    assert lgmix.round_diagnostics({"val_loss"}, None, contexts) == {}


def test_a_spec_may_ask_lgmix_for_its_mixing_weights():
    """LG-Mix declares the mixing weights it reports (``reported_diagnostics``): a spec asking for them starts."""
    from fedbench.engine.diagnostics import check_diagnostics, diagnostics_of

    spec = make_spec("lgmix", diagnostics=("mixing_weights",))
    assert build_algorithm("lgmix", {}).reported_diagnostics == frozenset({"mixing_weights"})
    check_diagnostics(spec, build_algorithm("lgmix", spec.algorithm_params))
    assert "mixing_weights" in diagnostics_of(spec)
