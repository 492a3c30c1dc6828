"""The GPU check's driver (tools/gpu_check.py), without a GPU: every part is recorded in the JSON whatever it
does (fails, runs past its limit, leaves processes behind), the JSON is on disk before the next part starts, the
summary names each part, the install step installs only when fedbench's imports fail, and the pieces the parts
compute with (curve comparison, the MNIST-shaped stand-in files) do what the figures assume."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_check_script", ROOT / "tools" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
sys.modules["gpu_check_script"] = gpu_check
spec.loader.exec_module(gpu_check)


def fake_part(name: str, limit: float, body: str) -> gpu_check.Part:
    """A part whose process runs ``body`` with ``part_out`` (the result file) and ``out`` (the check's folder)."""
    prelude = "import json, os, sys, time\nfrom pathlib import Path\npart_out = Path(sys.argv[sys.argv.index('--part-out') + 1])\nout = part_out.parent.parent\n"
    return gpu_check.Part(name, limit, [sys.executable, "-c", prelude + textwrap.dedent(body)])


def write_result(result: dict) -> str:
    return f"part_out.write_text(json.dumps({result!r}))\n"


def new_report() -> dict:
    return {"check": {"device": "cpu", "quick": True}}


def test_every_part_is_recorded_whatever_it_does_and_the_next_one_runs(tmp_path):
    parts = [
        fake_part("fine", 30, write_result({"figures": {"rate": 2.5}})),
        fake_part("broken", 30, write_result({"error": "Traceback …\nRuntimeError: no GPU here"}) + "sys.exit(1)"),
        fake_part("crashing", 30, "print('about to crash', flush=True)\nos._exit(3)"),
        fake_part("slow", 2, write_result({"figures": {"half": 1}}) + "time.sleep(120)"),
        fake_part(
            "after",
            30,
            "report = json.loads((out / 'gpu_check.json').read_text())\n"
            + "part_out.write_text(json.dumps({'figures': {'seen': sorted(report['parts'])}}))",
        ),
    ]
    report = gpu_check.check(parts, tmp_path, total=200, report=new_report())

    on_disk = json.loads((tmp_path / gpu_check.RESULT).read_text())
    assert on_disk == json.loads(json.dumps(report, default=str))
    status = {name: record["status"] for name, record in on_disk["parts"].items()}
    assert status == {"fine": "ok", "broken": "failed", "crashing": "failed", "slow": "timed out", "after": "ok"}
    assert on_disk["figures"]["fine"] == {"rate": 2.5}
    assert "RuntimeError: no GPU here" in on_disk["parts"]["broken"]["error"]
    assert "exit code 3" in on_disk["parts"]["crashing"]["error"]
    assert "about to crash" in on_disk["parts"]["crashing"]["error"]  # the end of its output when it left no error
    assert "time limit" in on_disk["parts"]["slow"]["error"]
    assert on_disk["figures"]["slow"] == {"half": 1}  # what it measured before it was stopped
    # the JSON was on disk, with every earlier part, before the last part started
    assert on_disk["figures"]["after"] == {"seen": ["broken", "crashing", "fine", "slow"]}
    assert (tmp_path / "logs" / "crashing.log").read_text().strip() == "about to crash"
    text = (tmp_path / gpu_check.SUMMARY).read_text()
    for name in status:
        assert name in text
    assert "timed out" in text and "rate=2.5" in text and "RuntimeError: no GPU here" in text


def test_a_part_over_its_limit_is_stopped_with_every_process_it_started(tmp_path):
    body = """
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        part_out.write_text(json.dumps({"child": child.pid}))
        time.sleep(120)
    """
    report = gpu_check.check([fake_part("stuck", 2, body)], tmp_path, total=200, report=new_report())
    record = report["parts"]["stuck"]
    assert record["status"] == "timed out"
    child = record["result"]["child"]
    for _ in range(50):  # reaped by init once killed
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the part's child process {child} outlived the part")


def test_a_command_past_its_time_is_interrupted_first_then_killed(tmp_path):
    """fedbench run gets Ctrl-C's SIGINT (it marks its runs interrupted); one that ignores it is killed."""
    polite = f"""
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, lambda *_: (Path({str(tmp_path / "interrupted")!r}).touch(), sys.exit(130)))
time.sleep(120)
"""
    assert gpu_check.run_command([sys.executable, "-c", polite], 2, interrupt=True, grace=5)[0] == -1
    assert (tmp_path / "interrupted").exists()
    stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(120)"
    assert gpu_check.run_command([sys.executable, "-c", stubborn], 1, interrupt=True, grace=1)[0] == -1


def test_parts_after_the_total_time_are_skipped_and_recorded(tmp_path):
    parts = [fake_part("first", 60, "time.sleep(120)"), fake_part("second", 60, write_result({}))]
    report = gpu_check.check(parts, tmp_path, total=6, report=new_report())
    assert report["parts"]["first"]["status"] == "timed out"
    assert 5 < report["parts"]["first"]["limit_seconds"] <= 6  # its own 60 s cut to what was left of the check
    assert report["parts"]["second"]["status"] == "skipped"
    assert "second" in json.loads((tmp_path / gpu_check.RESULT).read_text())["parts"]


def test_a_part_function_that_raises_records_its_traceback(tmp_path, monkeypatch):
    def broken(ctx):
        ctx.record.figures(started=True)
        raise ValueError("cuDNN said no")

    monkeypatch.setitem(gpu_check.PART_FUNCTIONS, "environment", broken)
    ctx = gpu_check.Context(
        "environment", "cpu", True, tmp_path, time.monotonic() + 10, gpu_check.Recorder(tmp_path / "p.json")
    )
    assert gpu_check.run_one_part("environment", ctx) == 1
    written = json.loads((tmp_path / "p.json").read_text())
    assert written["figures"] == {"started": True}
    assert "ValueError: cuDNN said no" in written["error"] and "Traceback" in written["error"]


def test_a_part_starts_in_an_empty_folder_so_that_a_rerun_trains_afresh(tmp_path, monkeypatch):
    stale = tmp_path / "work" / "determinism" / "default.db"  # a registry whose runs a rerun would find done
    stale.parent.mkdir(parents=True)
    stale.touch()
    monkeypatch.setitem(
        gpu_check.PART_FUNCTIONS, "determinism", lambda ctx: ctx.record.figures(found=sorted(os.listdir(ctx.work)))
    )
    part_out = tmp_path / "parts" / "determinism.json"
    args = ["--out", str(tmp_path), "--part", "determinism", "--part-out", str(part_out), "--budget", "10"]
    assert gpu_check.main(args) == 0
    assert json.loads(part_out.read_text())["figures"] == {"found": []}


def test_parts_limits_and_selection_follow_the_options(tmp_path):
    args = gpu_check.parse_args(["--out", str(tmp_path), "--device", "cpu", "--quick", "--parts", "plan,memory"])
    args.limit = ["memory=7"]
    parts = list(gpu_check.planned_parts(args))
    assert [p.name for p in parts] == ["plan", "memory"]
    assert parts[0].limit == gpu_check.LIMITS["plan"][1] and parts[1].limit == 7
    assert parts[1].command[-5:] == ["--device", "cpu", "--out", str(tmp_path.resolve()), "--quick"]
    args.limit = ["nothing=3"]
    with pytest.raises(SystemExit, match="no part 'nothing'"):
        list(gpu_check.planned_parts(args))


def test_curves_compare_bit_for_bit():
    a = [
        {"round": 1, "train_loss": 2.0, "test_loss": 1.5, "test_acc": 0.5},
        {"round": 2, "train_loss": 1.0, "test_loss": 1.2, "test_acc": 0.6},
    ]
    same = gpu_check.curve_difference(a, [dict(r) for r in a])
    assert same["identical"] and same["first_difference"] is None
    b = [dict(r) for r in a]
    b[1]["test_loss"] = np.nextafter(1.2, 2.0)  # one ulp
    differ = gpu_check.curve_difference(a, b)
    assert not differ["identical"] and differ["first_difference"].startswith("round 2 test_loss")
    assert 0 < differ["max_abs_difference"]["test_loss"] < 1e-15
    assert not gpu_check.curve_difference(a, a[:1])["identical"]


def test_warnings_of_nondeterministic_operations_are_picked_from_the_output():
    output = (
        "rounds 6/6\n"
        "/x/torch/autograd/graph.py:824: UserWarning: max_pool2d_with_indices_backward_cuda does not have a "
        "deterministic implementation, but you set 'torch.use_deterministic_algorithms(True, warn_only=True)'\n"
        "registry: 2 done (the runs are deterministic)\n"
    )
    found = gpu_check.warnings_about(output + output, "determinis")
    assert len(found) == 1 and "max_pool2d_with_indices_backward_cuda" in found[0]


def test_mnist_shaped_stand_ins_load_through_fedbench_loaders(tmp_path):
    from fedbench.data.mnist import load_fmnist, load_mnist

    root = gpu_check.write_mnist_like(tmp_path, train=30, test=10)
    mnist = load_mnist(root / "mnist", verify=False)
    fmnist = load_fmnist(root / "fmnist", verify=False)
    assert mnist.train_x.shape == (30, 1, 28, 28) and mnist.test_x.shape == (10, 1, 28, 28)
    assert fmnist.train_y.shape == (30,) and set(fmnist.train_y) <= set(range(10))
    assert not np.array_equal(mnist.train_x, fmnist.train_x)  # two data sets, not one written twice


@pytest.fixture
def pfl_stand_in():
    """The pfl slice's stand-in data registered (quick size), and forgotten after the test."""
    from fedbench.data._registry import DATASETS

    state = DATASETS.state()
    gpu_check.pfl_stand_in(quick=True)
    yield
    DATASETS.restore(state)


def test_the_pfl_slice_is_the_benchmark_recipe_on_cifar_shaped_stand_in_data(pfl_stand_in):
    """Full scale: pfl-research's CIFAR-10 benchmark (1,000 users, 50 per round, E = 1, batch 10, SGD lr 0.1 without
    momentum, FedAvg, its CNN); the slice changes only the data set, the rounds and when it evaluates."""
    from fedbench.data import dataset_meta, load_dataset
    from fedbench.recipes.expand import expand
    from fedbench.recipes.load import load_recipe

    full = gpu_check.pfl_slice_spec(quick=False, rounds=6)
    assert (full.algorithm, full.model, full.partition) == ("fedavg", "pfl_cnn", "iid")
    assert (full.num_clients, full.clients_per_round, full.local_epochs, full.batch_size) == (1000, 50, 1, 10)
    assert (full.optimizer.name, full.optimizer.lr, full.optimizer.momentum) == ("sgd", 0.1, 0.0)
    assert (full.dataset, full.rounds, full.eval_every) == (gpu_check.PFL_STAND_IN, 6, 6)
    (recipe_run,) = expand(load_recipe(gpu_check.PFL_RECIPE))
    assert (recipe_run.spec.rounds, recipe_run.spec.eval_every, recipe_run.spec.dataset) == (1500, 10, "cifar10")
    changed = {k for k, v in full.model_dump().items() if v != recipe_run.spec.model_dump()[k]}
    assert changed == {"dataset", "dataset_params", "rounds", "eval_every"}  # the stand-in takes no parameters
    assert gpu_check.PFL_ROUNDS == 1500 and gpu_check.PFL_EVALUATIONS == 1500 // 10
    quick = gpu_check.pfl_slice_spec(quick=True, rounds=3)
    assert (quick.num_clients, quick.clients_per_round) == (40, 5)  # the smoke scale's, 50 images each
    meta = dataset_meta(gpu_check.PFL_STAND_IN)
    assert meta.input_shape == (3, 32, 32) and meta.num_classes == 10
    arrays = load_dataset(gpu_check.PFL_STAND_IN)
    assert arrays.train_x.shape == (2000, 3, 32, 32) and len(arrays.train_x) == 40 * 50


def test_the_pfl_extrapolation_is_rounds_times_a_round_plus_the_evaluations():
    assert gpu_check.pfl_extrapolation(0.5, 2.0) == 0.5 * 1500 + 2.0 * 150
    # the first round warms up, the last also evaluates: a round is the median of those between, an evaluation
    # the last round's excess over it
    assert gpu_check.round_timing([9.0, 1.0, 3.0, 2.0, 5.5]) == {"seconds_per_round": 2.0, "evaluation_seconds": 3.5}
    assert gpu_check.round_timing([9.0, 1.0, 3.0, 5.0]) == {"seconds_per_round": 2.0, "evaluation_seconds": 3.0}
    assert gpu_check.round_timing([4.0, 1.0]) == {"seconds_per_round": 4.0, "evaluation_seconds": 0.0}


def test_a_pfl_slice_trains_and_says_which_executor_it_used(pfl_stand_in):
    spec = gpu_check.pfl_slice_spec(quick=True, rounds=2).model_copy(update={"clients_per_round": 2})
    timing = gpu_check.time_pfl_slice(spec, "cpu", "packed")
    assert len(timing["round_wall_seconds"]) == 2 and timing["seconds_per_round"] > 0
    # the benchmark's CNN has dropout: the packed request falls back to the sequential path, with the reason
    assert timing["executor"] == "sequential" and "dropout" in timing["executor_reason"]
    assert timing["benchmark_seconds_extrapolated"] == gpu_check.pfl_extrapolation(
        timing["seconds_per_round"], timing["evaluation_seconds"]
    )


def test_install_only_when_the_imports_fail(tmp_path, monkeypatch):
    assert gpu_check.install(sys.executable, tmp_path / "wheels", tmp_path / "site")["status"] == "not needed"
    monkeypatch.setattr(gpu_check, "DEPENDENCIES_PROBE", "import fedbench_no_such_module")
    record = gpu_check.install(sys.executable, tmp_path / "wheels", tmp_path / "site")
    assert record["status"] == "failed"
    assert "fedbench_no_such_module" in record["missing"] and "make gpu-wheels" in record["error"]


def test_the_install_reads_only_the_carried_folder(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "pip-26.3-py3-none-any.whl").touch()
    command = gpu_check.pip_install_command("python3.12", wheels, tmp_path / "site")
    assert command[:3] == ["python3.12", str(wheels / "pip-26.3-py3-none-any.whl" / "pip"), "install"]
    assert "--no-index" in command and command[command.index("--find-links") + 1] == str(wheels)
    assert command[command.index("--target") + 1] == str(tmp_path / "site")
    assert command[-1] == str(gpu_check.REQUIREMENTS)
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    env = gpu_check.pip_environment()
    assert "PIP_FIND_LINKS" not in env and env["PIP_CONFIG_FILE"] == os.devnull


@pytest.mark.slow
def test_main_prints_the_summary_and_writes_the_json(tmp_path, capsys):
    code = gpu_check.main(
        ["--out", str(tmp_path), "--device", "cpu", "--parts", "environment", "--wheels", str(tmp_path)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "environment   ok" in printed and f"wrote {tmp_path / gpu_check.RESULT}" in printed
    report = json.loads((tmp_path / gpu_check.RESULT).read_text())
    assert report["install"]["status"] == "not needed"
    assert report["figures"]["environment"]["capability"] == gpu_check.NOT_APPLICABLE


@pytest.mark.slow
@pytest.mark.timeout(int(8 * gpu_check.QUICK_TOTAL_SECONDS))
def test_the_quick_check_runs_every_part_end_to_end_on_the_cpu(tmp_path):
    """`make gpu-check DEVICE=cpu QUICK=1`: every part runs and reports its figures. The limits are stretched: the
    machine running the suite may be several times busier than a rehearsal's (the limits are tested above)."""
    limits = [arg for name, (_, quick) in gpu_check.LIMITS.items() for arg in ("--limit", f"{name}={4 * quick}")]
    command = [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--out", str(tmp_path), "--device", "cpu"]
    command += ["--quick", "--total", str(4 * gpu_check.QUICK_TOTAL_SECONDS), *limits]
    done = subprocess.run(command, capture_output=True, text=True, timeout=8 * gpu_check.QUICK_TOTAL_SECONDS)
    report = json.loads((tmp_path / gpu_check.RESULT).read_text())
    assert {name: r["status"] for name, r in report["parts"].items()} == dict.fromkeys(
        gpu_check.PART_FUNCTIONS, "ok"
    ), done.stdout[-3000:]
    assert done.returncode == 0
    figures = report["figures"]
    assert set(figures) == set(gpu_check.PART_FUNCTIONS)
    assert figures["cuda_tests"]["failed"] == 0 and figures["cuda_tests"]["skipped"] >= 1  # the CUDA-only ones
    assert figures["determinism"]["bit_identical"] is True and figures["determinism"]["tf32_hashes_differ"] is True
    assert figures["throughput"]["packed_executor"] == "packed"
    # a whole slice, or on a busy machine part of one: either way some rounds and an extrapolation
    assert figures["table4_block"]["rounds_done"] > 0 and figures["table4_block"]["block_seconds_extrapolated"] > 0
    pfl = figures["pfl_slice"]
    assert pfl["scale"] == "smoke" and pfl["packed_executor"] == "sequential" and "dropout" in pfl["packed_reason"]
    assert pfl["sequential_benchmark_seconds_extrapolated"] > 0 and pfl["workers_2_seconds_per_run_amortised"] > 0
    assert figures["plan"]["quickstart_planned_s"] > 0
    assert figures["memory"]["check_max_memory_allocated"] == gpu_check.NOT_APPLICABLE
    assert figures["compile"]["done"] is True
    assert (tmp_path / gpu_check.SUMMARY).read_text() in done.stdout
