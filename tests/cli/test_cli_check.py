"""``fedbench check-method`` (``fedbench/cli/check.py``): one line per property of the engine contract, exit 0 when
none fails and 1 when one does, naming it; a method from a ``--plugin`` file is checked as a built-in is; bad input
is one line, exit 2."""

from __future__ import annotations

import json
import textwrap

import pytest
from plugin_fixtures import fresh_plugins  # noqa: F401 (fixture)
from typer.testing import CliRunner

from fedbench.cli import app

pytestmark = pytest.mark.usefixtures("fresh_plugins")  # every plug-in a test loads is forgotten after it
runner = CliRunner()

# A user's file: a FedProx variant that keeps the contract and declares its FedAvg setting, a FedAvgM whose FedAvg
# setting is FedAvg only up to rounding, and one that keeps each client's last model on the method object, where no
# checkpoint holds it.
METHODS = '''
"""Three methods of a user's own."""
import torch
from pydantic import Field

from fedbench.algorithms import register_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.params import NoParams


class ProxParams(NoParams):
    mu: float = Field(0.05, ge=0)


@register_algorithm("checkedprox", fedavg_setting={"algorithm_params": {"mu": 0.0}})
class CheckedProx(Algorithm):
    Params = ProxParams
    params: ProxParams

    def loss(self, ctx, x, y, logits):
        term = proximal(ctx.model.parameters(), ctx.global_tensors)  # FedProx Eq. 2
        return super().loss(ctx, x, y, logits) + 0.5 * self.params.mu * term


class MomentumParams(NoParams):
    beta: float = Field(0.9, ge=0, lt=1)


@register_algorithm("plugin_momentum", fedavg_setting={"algorithm_params": {"beta": 0.0}})
class FedAvgM(Algorithm):
    """Server momentum as its update reads, v <- beta v + (w - avg), w <- w - lr v (lr 1): FedAvg at beta = 0 only
    in exact arithmetic."""

    Params = MomentumParams
    params: MomentumParams

    def init_server(self, server):
        server.state["velocity"] = torch.zeros_like(server.params)

    def aggregate(self, server, updates, round_index):
        old = server.params
        super().aggregate(server, updates, round_index)
        server.state["velocity"] = self.params.beta * server.state["velocity"] + (old - server.params)
        server.params = old - 1.0 * server.state["velocity"]


@register_algorithm("forgetful")
class Forgetful(Algorithm):
    """Pulls a client towards its previous local model, kept on self instead of ctx.state."""

    def __init__(self, params):
        super().__init__(params)
        self.previous = {}

    def loss(self, ctx, x, y, logits):
        loss = super().loss(ctx, x, y, logits)
        previous = self.previous.get(ctx.client_id)
        return loss if previous is None else loss + 0.5 * proximal(ctx.model.parameters(), previous)

    def end_local(self, ctx, update):
        self.previous[ctx.client_id] = [p.detach().clone() for p in ctx.model.parameters()]
'''


@pytest.fixture
def methods_file(tmp_path):
    path = tmp_path / "my_checked_methods.py"
    path.write_text(textwrap.dedent(METHODS).lstrip())
    return path


def invoke(*args: object):
    return runner.invoke(app, ["check-method", *map(str, args)])


def lines_of(output: str) -> dict[str, str]:
    """{property: its line} of the command's output."""
    return {line.split()[1].rstrip(":"): line for line in output.splitlines() if line.split()[0] in PREFIXES}


PREFIXES = ("PASS", "FAIL", "SKIP")


def test_a_built_in_passes_with_one_line_per_property():
    result = invoke("fedavg")
    assert result.exit_code == 0, result.output
    lines = lines_of(result.output)
    assert list(lines) == [
        "evaluation",
        "keyed-streams",
        "resume",
        "packed",
        "fedavg-setting",
        "empty-client",
        "diagnostics",
    ]
    assert [line.split()[0] for line in lines.values()] == ["PASS", "PASS", "PASS", "PASS", "SKIP", "PASS", "PASS"]
    assert lines["resume"].startswith("PASS resume: kill and resume gives the same curve — stopped after round 2")
    assert lines["fedavg-setting"].startswith(
        "SKIP fedavg-setting: its declared FedAvg setting is FedAvg — FedAvg itself"
    )
    assert result.output.splitlines()[-1] == "fedavg: every property checked holds"


def test_a_plugin_method_that_keeps_the_contract_passes_its_declared_fedavg_setting_included(methods_file):
    result = invoke("checkedprox", "--plugin", methods_file, "--rounds", "2")
    assert result.exit_code == 0, result.output
    lines = lines_of(result.output)
    assert {p: line.split()[0] for p, line in lines.items()} == {
        "evaluation": "PASS",
        "keyed-streams": "PASS",
        "resume": "PASS",
        "packed": "SKIP",
        "fedavg-setting": "PASS",
        "empty-client": "PASS",
        "diagnostics": "PASS",
    }
    assert (  # over 8 rounds, though the other checks train 2
        "in its declared setting (mu=0.0) it trains as FedAvg bit for bit in float32 for 8 rounds: every parameter "
        "and buffer after every round, and the curve" in lines["fedavg-setting"]
    )
    assert "method checkedprox does not declare a packed local step" in lines["packed"]


def test_a_plugin_method_whose_fedavg_setting_is_fedavg_up_to_rounding_fails_it_and_exits_1(methods_file):
    result = invoke("plugin_momentum", "--plugin", methods_file, "--property", "fedavg-setting")
    assert result.exit_code == 1, result.output
    assert lines_of(result.output)["fedavg-setting"].startswith(
        "FAIL fedavg-setting: its declared FedAvg setting is FedAvg — equal up to rounding: float32 runs will drift "
        "from FedAvg's curve; make the update exact (e.g. where the setting reduces the method to FedAvg, compute "
        "what FedAvg computes: return the clients' average itself, base.weighted_average, instead of an "
        "algebraically equal form such as old − lr·velocity). In its declared setting (beta=0.0), trained in float32 "
        "for 8 rounds, round 1 is the first not FedAvg's bit for bit: the global weights' encoder.1.weight differs"
    ), result.output
    assert result.output.splitlines()[-1] == "plugin_momentum: 1 of 1 properties failed (fedavg-setting)"


def test_a_plugin_method_whose_state_is_not_checkpointed_fails_resume_and_exits_1(methods_file):
    result = invoke("forgetful", "--plugin", methods_file, "--property", "evaluation", "--property", "resume")
    assert result.exit_code == 1, result.output
    lines = lines_of(result.output)
    assert list(lines) == ["evaluation", "resume"]
    assert lines["evaluation"].startswith("PASS")
    assert lines["resume"].startswith(
        "FAIL resume: kill and resume gives the same curve — stopped after round 2 and resumed from its checkpoint, "
        "the run differs from the uninterrupted one: round 3's train_loss is"
    )
    assert "not on the method object (self)" in lines["resume"]
    assert result.output.splitlines()[-1] == "forgetful: 1 of 2 properties failed (resume)"


def test_settings_of_the_runs_and_json_output():
    result = invoke(
        "fedprox", "--set", "algorithm_params.mu=0.5", "--set", "optimizer.lr=0.1", "--rounds", "2", "--clients", "3",
        "--property", "packed", "--property", "fedavg-setting", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [(r["property"], r["status"]) for r in found] == [("packed", "pass"), ("fedavg-setting", "pass")]
    assert set(found[0]) == {"property", "title", "status", "detail", "seconds"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fedavgg"], "error: unknown algorithm 'fedavgg'; did you mean fedavg"),
        (["fedavg", "--property", "speed"], "error: unknown property 'speed'; expected one of evaluation,"),
        (["fedavg", "--set", "algorithm=fedprox"], "error: --set 'algorithm=fedprox': unknown setup key 'algorithm'"),
        (["fedprox", "--set", "algorithm_params.mu=-1"], "error: algorithm 'fedprox': algorithm_params.mu: Input"),
        (["fedavg", "--plugin", "no_such_file.py"], "error: plug-in no_such_file.py: no such file or folder"),
        (["dot_regression"], "error: dot_regression needs a fixed etf classifier"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(message) and len(result.output.strip().splitlines()) == 1, result.output
