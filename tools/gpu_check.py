"""fedbench's CUDA paths checked and measured on a GPU machine in one command: one JSON file and a short summary.

    python3 tools/gpu_check.py --out FOLDER [--device cuda|cpu] [--quick] [--parts NAME,...]
                                    [--limit NAME=SECONDS ...] [--total SECONDS] [--wheels FOLDER]
    make gpu-check [DEVICE=cpu] [QUICK=1] [GPU_OUT=reports/gpu-check]

A GPU machine lent for a short time has PyTorch but not all of fedbench's dependencies, and reaches no package
index. So first, when fedbench's imports fail, the script installs the wheels pinned in
``tools/gpu-requirements.txt`` from the carried folder ``.gpu-wheels/`` (``make gpu-wheels``) into ``.gpu-site/``
with the pip wheel carried there, ``--no-index`` (a few seconds); fedbench itself runs from this working tree (on
``PYTHONPATH``), so a fix made on the GPU machine takes effect without building anything. docs/gpu.md has the
command a GPU session runs.

Then the parts, each in a process of its own with its own time limit, all of them within ``--total`` (470 s;
the install is not counted). A part that fails or runs over its limit is recorded with its error and what it had
measured, and the next part starts. Each prints its progress (prefixed by its name):

- ``environment``: Python, torch, CUDA, cuDNN, the device's name, compute capability, memory and driver.
- ``cuda_tests``: the tests about CUDA (``pytest tests/engine tests/execution -k cuda``: packed == sequential on
  CUDA in float64, the acceleration switches, worker placement); on a CPU the CUDA-only ones skip.
- ``determinism``: the quickstart recipe twice with the defaults (``--fast`` on CUDA; packed where it applies):
  curves bit-identical; and with ``--set precision=tf32``: other spec hashes, both run.
- ``throughput``: ``benchmarks/gpu_throughput.py`` on Table IV's CNN-MNIST set-up: sequential and packed in one
  process, and N worker processes at once (1, 4, 8; 2 with ``--quick``): run-rounds per second, and packed over
  the best N.
- ``table4_block``: FedTrip Table IV's MNIST/FMNIST block (6 methods × 4 cases × 10 seeds = 240 runs) on stand-in
  data of MNIST's shape and size (class templates plus noise, written as IDX files), one seed (24 runs, a tenth
  of the block) after another until the limit: the slices' wall time and the whole block's, extrapolated.
- ``pfl_slice``: a slice of ``recipes/bench_pfl_cifar10.toml``, pfl-research's CIFAR-10 benchmark (1,000 users of
  50 images, 50 per round, E = 1, batch 10, its CNN; 1,500 rounds, evaluation every 10), on CIFAR-shaped stand-in
  data of CIFAR-10's size: a few rounds sequential and packed in this process, and N worker processes at once (2,
  4; 2 with ``--quick``, at the smoke scale's 40 users of 5 per round); each extrapolated to the benchmark as
  seconds per round × 1,500 + one evaluation's seconds × 150.
- ``plan``: ``fedbench plan --device DEVICE`` of the same runs next to the measured times.
- ``memory``: the quickstart runs in this process: peak memory as recorded in each run's provenance next to
  ``torch.cuda.max_memory_allocated`` read by the check after the run.
- ``compile``: the quickstart recipe with ``--compile``: it trains; its curve next to the default one.

Written to FOLDER: ``gpu_check.json`` (after every part), ``gpu_check.txt`` (the summary, also printed),
``logs/PART.log`` (each part's output) and ``work/PART/`` (its registries and stand-in data, emptied when the part
starts). ``--device cpu --quick`` runs
every part on the CPU at tiny sizes, a rehearsal of the whole check in about 2–3 minutes; figures only a GPU has are
recorded as not applicable.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tools" / "gpu-requirements.txt"
WHEELS = ROOT / ".gpu-wheels"
SITE = ROOT / ".gpu-site"
RESULT = "gpu_check.json"
SUMMARY = "gpu_check.txt"
TOTAL_SECONDS = 470.0  # the check's 8 minutes at most (7 min 50 s), install not counted
QUICK_TOTAL_SECONDS = 585.0
NOT_APPLICABLE = "not applicable on a CPU"
# Whether the carried wheels must be installed: fedbench's own dependencies that a GPU machine may lack (the PyTorch
# stack it has is not probed: importing torch takes seconds, and no carried wheel could replace it).
DEPENDENCIES_PROBE = "import fedbench.cli, pydantic, sqlalchemy, alembic, filelock, platformdirs"

TABLE4 = ROOT / "recipes" / "fedtrip_table4.toml"
TABLE4_CASES = ("MLP MNIST-87%", "MLP FMNIST-75%", "CNN MNIST-90%", "CNN FMNIST-75%")  # the MNIST/FMNIST block
TABLE4_SEEDS = 10
QUICKSTART = ROOT / "recipes" / "quickstart.toml"
PFL_RECIPE = ROOT / "recipes" / "bench_pfl_cifar10.toml"
PFL_ROUNDS = 1500  # pfl-research's CIFAR-10 benchmark: 1,500 rounds, the test set evaluated every 10
PFL_EVALUATIONS = 150
PFL_STAND_IN = "pfl_cifar10_size"
# The tests about CUDA: those named so in the packages that train on a device (folders rather than files: a test file
# may be renamed or split; they import nothing a GPU machine lacks).
CUDA_TESTS = ("tests/engine", "tests/execution")


# ---- the check: parts in processes of their own, each with a time limit ------------------------------------------


@dataclass(frozen=True)
class Part:
    """A part of the check: ``command`` runs it and gets ``--part-out FILE --budget SECONDS`` appended (it writes
    its result, a JSON object, to FILE whenever it has something new; SECONDS is when it should wrap up); it is
    stopped after ``limit`` seconds."""

    name: str
    limit: float
    command: list[str]


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, default=str) + "\n")
    temporary.replace(path)


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _stop_group(process: subprocess.Popen, first: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """Stop a process started in a session of its own and everything it started: ``first``, then SIGKILL."""
    for sig in (first, signal.SIGKILL):
        if process.poll() is not None:
            break
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    if process.poll() is None:
        process.wait()


def run_part(part: Part, limit: float, out: Path) -> dict[str, Any]:
    """Run one part for at most ``limit`` seconds; its output goes to the terminal (prefixed) and to its log."""
    part_out = out / "parts" / f"{part.name}.json"
    part_out.parent.mkdir(parents=True, exist_ok=True)
    part_out.unlink(missing_ok=True)
    log = out / "logs" / f"{part.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    budget = max(1.0, limit - min(15.0, 0.15 * limit))  # leaves the part time to stop what it started
    command = [*part.command, "--part-out", str(part_out), "--budget", f"{budget:.1f}"]
    tail: collections.deque[str] = collections.deque(maxlen=15)
    began = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=ROOT
        )

        def relay() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                sink.write(line)
                sink.flush()
                tail.append(line.rstrip())
                print(f"[{part.name}] {line.rstrip()}", flush=True)

        reader = threading.Thread(target=relay, daemon=True)
        reader.start()
        timed_out = False
        try:
            process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            print(f"[{part.name}] stopped at its time limit of {limit:.0f} s", flush=True)
        finally:
            _stop_group(process)
        reader.join(timeout=5)
    result = _read_json(part_out)
    error = (result or {}).pop("error", None)
    if timed_out:
        status = "timed out"
        error = f"stopped at its time limit of {limit:.0f} s" + (f"; {error}" if error else "")
    elif process.returncode == 0:
        status = "ok"
    else:
        status = "failed"
        error = error or f"exit code {process.returncode}: " + " | ".join(list(tail)[-5:])
    return {
        "status": status,
        "seconds": round(time.monotonic() - began, 2),
        "limit_seconds": round(limit, 1),
        "exit_code": process.returncode,
        "error": error,
        "result": result,
    }


def check(parts: list[Part], out: Path, total: float, report: dict[str, Any]) -> dict[str, Any]:
    """Run ``parts`` in order within ``total`` seconds; ``report`` (with what the caller has already recorded) is
    written to ``out/gpu_check.json`` with the summary after every part, whatever happened in it."""
    out.mkdir(parents=True, exist_ok=True)
    report.setdefault("parts", {})
    report.setdefault("figures", {})
    began = time.monotonic()
    for part in parts:
        remaining = total - (time.monotonic() - began)
        if remaining < 5:
            record = {"status": "skipped", "seconds": 0.0, "error": f"the check's {total:.0f} s were spent"}
        else:
            print(f"== {part.name} (at most {min(part.limit, remaining):.0f} s)", flush=True)
            try:
                record = run_part(part, min(part.limit, remaining), out)
            except Exception as exc:  # the check goes on to the next part, whatever broke
                record = {"status": "failed", "seconds": 0.0, "error": f"{type(exc).__name__}: {exc}"}
        report["parts"][part.name] = record
        figures = (record.get("result") or {}).get("figures")
        if figures:
            report["figures"][part.name] = figures
        report["check"]["seconds"] = round(time.monotonic() - began, 1)
        write_report(report, out)
    return report


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_figure(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_figure(v)}" for k, v in value.items()) + "}"
    return str(value)


def summary(report: dict[str, Any]) -> str:
    """A few lines: the device, then one line per part with its status, seconds and figures."""
    environment = (report.get("parts", {}).get("environment", {}).get("result") or {}).get("figures", {})
    check_info = report.get("check", {})
    lines = [
        f"fedbench GPU check on {environment.get('device_name', check_info.get('device', '?'))}"
        f" (capability {environment.get('capability', 'n/a')}, driver {environment.get('driver', 'n/a')},"
        f" torch {environment.get('torch', '?')}, CUDA {environment.get('cuda', 'n/a')})"
        f"{' --quick' if check_info.get('quick') else ''}: {check_info.get('seconds', 0):.0f} s of parts",
    ]
    install = report.get("install")
    if install:
        lines.append(f"  install       {install.get('status', '?')}  {install.get('seconds', 0):.1f} s")
    for name, record in report.get("parts", {}).items():
        line = f"  {name:13s} {record['status']:9s} {record.get('seconds', 0):6.1f} s"
        figures = report.get("figures", {}).get(name, {})
        if name == "environment":
            figures = {}
        if figures:
            line += "  " + "; ".join(f"{k}={_figure(v)}" for k, v in figures.items())
        if record.get("error"):
            line += f"\n    error: {str(record['error']).strip().splitlines()[-1][:300]}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out: Path) -> None:
    _write_json(out / RESULT, report)
    (out / SUMMARY).write_text(summary(report))


# ---- the install from the carried wheels ---------------------------------------------------------------------------


def python_path(site: Path) -> str:
    """PYTHONPATH for every process of the check: the installed wheels, then this working tree (fedbench)."""
    paths = [str(site)] if site.is_dir() else []
    paths += [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return os.pathsep.join(dict.fromkeys(paths))


def _probe(python: str, site: Path) -> str | None:
    """None when fedbench's dependencies import with ``site`` on the path, else the import error's last line."""
    env = {**os.environ, "PYTHONPATH": python_path(site)}
    done = subprocess.run([python, "-c", DEPENDENCIES_PROBE], env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit code {done.returncode}"


def pip_install_command(python: str, wheels: Path, site: Path) -> list[str]:
    """The carried pip (a wheel runs as a program) installs the pinned wheels from ``wheels`` alone into ``site``:
    ``--target`` installs beside the machine's packages without touching them (nor needing a venv or write access
    to them), and every pinned package lands there whatever the machine has, so the versions are the tested ones."""
    carried = sorted(wheels.glob("pip-*.whl"))
    pip = [python, str(carried[-1] / "pip")] if carried else [python, "-m", "pip"]
    return [
        *pip,
        "install",
        "--no-index",
        "--find-links",
        str(wheels),
        "--target",
        str(site),
        "--upgrade",
        "--disable-pip-version-check",
        "--quiet",
        "-r",
        str(REQUIREMENTS),
    ]


def pip_environment() -> dict[str, str]:
    """No pip configuration of the machine (its index, extra find-links, constraints): only the carried wheels."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def install(python: str, wheels: Path, site: Path) -> dict[str, Any]:
    """Install the carried wheels into ``site`` when fedbench's dependencies do not import; the record says what."""
    began = time.monotonic()
    problem = _probe(python, site)
    if problem is None:
        return {"status": "not needed", "seconds": round(time.monotonic() - began, 1)}
    record: dict[str, Any] = {"status": "failed", "missing": problem, "wheels": str(wheels), "site": str(site)}
    if not wheels.is_dir():
        record["error"] = f"{problem}; no wheel folder {wheels} (run `make gpu-wheels` and carry it)"
    else:
        command = pip_install_command(python, wheels, site)
        print(f"== install: {problem}; installing the carried wheels into {site}", flush=True)
        done = subprocess.run(command, env=pip_environment(), capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            record["error"] = (done.stderr or done.stdout).strip()[-2000:]
        else:
            after = _probe(python, site)
            record.update(status="installed" if after is None else "failed", **({"error": after} if after else {}))
    record["seconds"] = round(time.monotonic() - began, 1)
    return record


# ---- the parts (each runs in its own process: ``--part NAME``) ------------------------------------------------------


class Recorder(dict):
    """A part's result: written to its file on every change, so that a part stopped early keeps what it had."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        _write_json(self.path, self)

    def figures(self, **figures: Any) -> None:
        self["figures"] = {**self.get("figures", {}), **figures}


@dataclass
class Context:
    """What a part's process knows: the options, its deadline, its result, and its folder ``work/PART`` (emptied
    when the part starts, so that a rerun trains afresh instead of finding its runs done)."""

    name: str
    device: str
    quick: bool
    out: Path
    deadline: float  # time.monotonic() at which the part should have wrapped up
    record: Recorder

    @property
    def work(self) -> Path:
        path = self.work_of(self.name)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def work_of(self, part: str) -> Path:
        return self.out / "work" / part

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def registry(self, name: str) -> str:
        return f"sqlite:///{self.work / f'{name}.db'}"


def run_command(
    command: list[str], timeout: float, interrupt: bool = False, capture: bool = False, grace: float = 10.0
) -> tuple[int, str]:
    """Run ``command`` (its output passed on, or captured) for at most ``timeout`` seconds, in a session of its own;
    past it, SIGINT first when ``interrupt`` (fedbench run's Ctrl-C: it stops its workers and marks their runs
    interrupted), then SIGKILL ``grace`` seconds later. Returns (exit code, captured output); the exit code is -1
    when it was stopped."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.STDOUT if capture else None,
        text=True,
        start_new_session=True,
        cwd=ROOT,
    )
    try:
        output, _ = process.communicate(timeout=max(timeout, 0.1))
        return process.returncode, output or ""
    except subprocess.TimeoutExpired:
        print(f"stopping {' '.join(command[:4])} … at its time limit", flush=True)
        _stop_group(process, signal.SIGINT if interrupt else signal.SIGKILL, grace=grace)
        return -1, ""
    finally:
        if process.poll() is None:  # the part itself was stopped (SIGTERM → SystemExit): stop what it started
            _stop_group(process, signal.SIGKILL)


def fedbench_cli(
    args: list[str], timeout: float, interrupt: bool = False, grace: float = 10.0, capture: bool = False
) -> tuple[int, str]:
    """``fedbench ARGS`` in a process of its own; its output passed on as it comes, or (``capture``) when it ends,
    and returned too."""
    print("fedbench " + " ".join(args), flush=True)
    code, output = run_command([sys.executable, "-m", "fedbench.cli", *args], timeout, interrupt, capture, grace)
    print(output, end="", flush=True)
    return code, output


def warnings_about(output: str, word: str) -> list[str]:
    """The distinct lines of ``output`` that are warnings mentioning ``word`` (e.g. PyTorch naming an operation
    without a deterministic implementation: fedbench runs in deterministic mode with ``warn_only``)."""
    return sorted({line.strip() for line in output.splitlines() if "Warning" in line and word in line.lower()})


def fedbench_json(args: list[str], timeout: float = 120) -> Any:
    code, output = run_command([sys.executable, "-m", "fedbench.cli", *args, "--json"], timeout, capture=True)
    if code != 0:
        raise RuntimeError(f"fedbench {' '.join(args)} --json: exit code {code}: {output.strip()[-500:]}")
    return json.loads(output)


def registry_runs(url: str, curves: bool = False) -> list[dict]:
    """The registry's runs (``fedbench runs --json``), each with its curve (``fedbench show --json``) if asked."""
    runs = fedbench_json(["runs", "--registry", url])
    if curves:
        for run in runs:
            run["curve"] = fedbench_json(["show", str(run["id"]), "--registry", url])["curve"]
    return runs


def run_brief(run: dict) -> dict[str, Any]:
    provenance = run.get("provenance") or {}
    return {
        "spec_hash": run["spec_hash"],
        "labels": run["labels"],
        "status": run["status"],
        "rounds_done": run.get("rounds_done"),
        "wall_seconds": run.get("wall_seconds"),
        "final_test_acc": (run.get("summary") or {}).get("final"),
        "precision": (run.get("spec") or {}).get("precision"),
        "device": provenance.get("device"),
        "packing": provenance.get("packing"),
        "acceleration": provenance.get("acceleration"),
        "tf32": provenance.get("tf32"),
        "peak_memory": provenance.get("peak_memory"),
        "error": run.get("error"),
    }


CURVE_FIELDS = ("train_loss", "test_loss", "test_acc")


def curve_difference(a: list[dict], b: list[dict]) -> dict[str, Any]:
    """Whether two curves are bit-identical, the first round and field where they are not, and the largest
    absolute difference of each field."""
    first = None
    largest: dict[str, float] = {}
    if len(a) != len(b):
        first = f"{len(a)} vs {len(b)} rounds"
    for ra, rb in zip(a, b):
        for field in CURVE_FIELDS:
            x, y = ra.get(field), rb.get(field)
            if x != y and first is None:
                first = f"round {ra.get('round')} {field}: {x!r} vs {y!r}"
            if isinstance(x, float) and isinstance(y, float):
                largest[field] = max(largest.get(field, 0.0), abs(x - y))
    return {"identical": first is None, "first_difference": first, "max_abs_difference": largest}


def quickstart_args(ctx: Context) -> list[str]:
    """The quickstart recipe (bundled digits, FedAvg and FedProx): smoke scale (3 rounds) with --quick, else one
    seed of its full 20 rounds."""
    scale = ["--scale", "smoke"] if ctx.quick else ["--seeds", "0"]
    return [str(QUICKSTART), *scale, "--device", ctx.device]


def part_environment(ctx: Context) -> None:
    import torch

    figures: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpu_count": os.cpu_count(),
    }
    ctx.record["platform"] = platform.platform()
    if ctx.cuda:
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda, but torch.cuda.is_available() is False")
        properties = torch.cuda.get_device_properties(0)
        figures.update(
            device_name=torch.cuda.get_device_name(0),
            capability=".".join(map(str, torch.cuda.get_device_capability(0))),
            memory_gib=round(properties.total_memory / 2**30, 1),
            gpus=torch.cuda.device_count(),
        )
        try:
            query = ["nvidia-smi", "--query-gpu=driver_version,name,memory.total", "--format=csv,noheader"]
            smi = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
            ctx.record["nvidia_smi"] = smi
            figures["driver"] = smi.splitlines()[0].split(",")[0].strip() if smi else None
        except (OSError, subprocess.TimeoutExpired) as exc:
            figures["driver"] = f"nvidia-smi failed: {exc}"
    else:
        figures.update(device_name=f"cpu ({platform.processor() or platform.machine()})", capability=NOT_APPLICABLE)
        figures["driver"] = NOT_APPLICABLE
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=10)
        ctx.record["git_commit"] = commit.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        ctx.record["git_commit"] = None
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("pydantic", "sqlalchemy", "alembic", "typer", "numpy", "torchvision"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    ctx.record["packages"] = versions
    ctx.record.figures(**figures)
    print(json.dumps(figures), flush=True)


def part_cuda_tests(ctx: Context) -> None:
    import xml.etree.ElementTree as ElementTree

    junit = ctx.work / "cuda_tests.xml"
    junit.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", *CUDA_TESTS, "-k", "cuda", "-q", "-p", "no:cacheprovider"]
    ctx.record["command"] = " ".join(command[1:])
    code, _ = run_command([*command, f"--junitxml={junit}"], ctx.left())
    ctx.record["pytest_exit_code"] = code
    if not junit.exists():
        raise RuntimeError(f"pytest exit code {code} and no report (stopped at its time limit if -1)")
    suite = ElementTree.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests = failures = skipped = 0
    failed, skips = [], collections.Counter()
    for case in suite.iter("testcase"):
        tests += 1
        name = f"{case.get('classname')}::{case.get('name')}"
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is not None:
            failures += 1
            failed.append({"test": name, "message": (problem.get("message") or "")[:500]})
        elif case.find("skipped") is not None:
            skipped += 1
            skips[case.find("skipped").get("message", "")] += 1
    ctx.record["failed"] = failed
    ctx.record["skip_reasons"] = dict(skips)
    ctx.record.figures(tests=tests, passed=tests - failures - skipped, failed=failures, skipped=skipped)
    if code != 0:
        raise RuntimeError(f"pytest exit code {code}: {len(failed)} failed")


def part_determinism(ctx: Context) -> None:
    runs: dict[str, list[dict]] = {}
    warned: list[str] = []
    variants = {"default": [], "default_again": [], "tf32": ["--set", "precision=tf32"]}
    for name, extra in variants.items():
        url = ctx.registry(name)
        code, output = fedbench_cli(["run", *quickstart_args(ctx), *extra, "--registry", url], ctx.left(), capture=True)
        warned += warnings_about(output, "determinis")
        runs[name] = registry_runs(url, curves=True)
        ctx.record[name] = [run_brief(run) for run in runs[name]]
        ctx.record["nondeterminism_warnings"] = sorted(set(warned))
        if code != 0:
            raise RuntimeError(f"fedbench run ({name}) exit code {code}")
    again = {run["spec_hash"]: run for run in runs["default_again"]}
    comparisons = {
        run["spec_hash"]: curve_difference(run["curve"], again[run["spec_hash"]]["curve"]) for run in runs["default"]
    }
    ctx.record["default_vs_again"] = comparisons
    fp32 = {run["spec_hash"] for run in runs["default"]}
    tf32 = {run["spec_hash"] for run in runs["tf32"]}
    tf32_vs_fp32 = [curve_difference(a["curve"], b["curve"]) for a, b in zip(runs["default"], runs["tf32"])]
    ctx.record["tf32_vs_fp32"] = tf32_vs_fp32
    ctx.record.figures(
        runs=len(runs["default"]),
        bit_identical=all(c["identical"] for c in comparisons.values()),
        executors=sorted({(r.get("provenance") or {}).get("packing", {}).get("executor") for r in runs["default"]}),
        fast=all(((r.get("provenance") or {}).get("acceleration") or {}).get("channels_last") for r in runs["default"])
        if ctx.cuda
        else NOT_APPLICABLE,
        tf32_hashes_differ=not fp32 & tf32,
        tf32_and_fp32_done=all(r["status"] == "done" for r in runs["default"] + runs["tf32"]),
        tf32_vs_fp32_max_abs_test_acc_difference=max(
            (d["max_abs_difference"].get("test_acc", 0.0) for d in tf32_vs_fp32), default=None
        ),
        nondeterminism_warnings=len(set(warned)),
    )


def part_compile(ctx: Context) -> None:
    url = ctx.registry("compile")
    code, _ = fedbench_cli(["run", *quickstart_args(ctx), "--compile", "--registry", url], ctx.left())
    compiled = registry_runs(url, curves=True)
    ctx.record["runs"] = [run_brief(run) for run in compiled]
    ctx.record.figures(
        done=bool(compiled) and all(r["status"] == "done" for r in compiled),
        compiled=all(((r.get("provenance") or {}).get("acceleration") or {}).get("compile") for r in compiled)
        if ctx.cuda
        else NOT_APPLICABLE,
        wall_seconds=[r.get("wall_seconds") for r in compiled],
    )
    if code != 0:
        raise RuntimeError(f"fedbench run --compile exit code {code}")
    default_db = ctx.work_of("determinism") / "default.db"
    if not default_db.exists():
        return
    default = {r["spec_hash"]: r for r in registry_runs(f"sqlite:///{default_db}", curves=True)}
    differences = {
        run["spec_hash"]: curve_difference(run["curve"], default[run["spec_hash"]]["curve"])
        for run in compiled
        if run["spec_hash"] in default
    }
    ctx.record["compiled_vs_default"] = differences
    ctx.record.figures(
        default_wall_seconds=[
            default[r["spec_hash"]].get("wall_seconds") for r in compiled if r["spec_hash"] in default
        ],
        max_abs_test_acc_difference=max(
            (d["max_abs_difference"].get("test_acc", 0.0) for d in differences.values()), default=None
        ),
    )


def part_throughput(ctx: Context) -> None:
    out = ctx.work / "throughput.json"
    out.unlink(missing_ok=True)
    sizes = (
        ["--rounds", "3", "--workers", "2", "--pool", "3000,500"]
        if ctx.quick
        else ["--rounds", "12", "--workers", "1,4,8"]
    )
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "gpu_throughput.py"),
        "--device",
        ctx.device,
        "--repeats",
        "1",
        "--models",
        "fedtrip_cnn",
        "--algorithms",
        "fedavg",
        "--no-big-models",
        *sizes,
        "--out",
        str(out),
    ]
    ctx.record["command"] = " ".join(command[1:])
    try:
        code, _ = run_command(command, ctx.left())
    finally:
        result = _read_json(out) or {}
        ctx.record["benchmark"] = result
    rows = result.get("table4") or []
    figures: dict[str, Any] = {}
    if rows:
        figures.update(
            sequential_run_rounds_per_s=1.0 / rows[0]["sequential"]["wall_seconds_per_round"],
            packed_run_rounds_per_s=1.0 / rows[0]["packed"]["wall_seconds_per_round"],
            packed_executor=rows[0]["packed"]["executor"],
        )
    for row in result.get("workers") or []:
        figures[f"workers_{row['workers']}_run_rounds_per_s"] = row["run_rounds_per_second"]
    if result.get("packed_over_best_workers") is not None:
        figures["packed_over_best_workers"] = result["packed_over_best_workers"]
        figures["goal_5x_met"] = result["packed_over_best_workers"] >= 5 if ctx.cuda else NOT_APPLICABLE
    ctx.record.figures(**figures)
    if code != 0:
        raise RuntimeError(f"gpu_throughput.py exit code {code}")


def write_mnist_like(root: Path, train: int, test: int) -> Path:
    """MNIST and Fashion-MNIST stand-ins in their on-disk layout (gzipped IDX files): fedbench's synthetic images
    (a class template plus noise, so that the models learn), ``train`` and ``test`` of them. Returns the data root."""
    import gzip

    import numpy as np

    from fedbench.data.base import DatasetMeta
    from fedbench.data.synthetic import synthetic_like

    for name, folder, seed in (("mnist", "mnist/MNIST/raw", 0), ("fmnist", "fmnist/FashionMNIST/raw", 1)):
        target = root / folder
        if (target / "t10k-labels-idx1-ubyte.gz").exists():
            continue
        target.mkdir(parents=True, exist_ok=True)
        meta = DatasetMeta(name, 10, (1, 28, 28), (0.5,), (0.5,))
        arrays = synthetic_like(meta, seed=seed, train_size=train, test_size=test)
        for prefix, x, y in (("train", arrays.train_x, arrays.train_y), ("t10k", arrays.test_x, arrays.test_y)):
            images = np.ascontiguousarray(x[:, 0], dtype=np.uint8)
            header = np.array([0x803, len(images), 28, 28], dtype=">u4").tobytes()
            (target / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(header + images.tobytes(), 1))
            labels = np.asarray(y, dtype=np.uint8)
            header = np.array([0x801, len(labels)], dtype=">u4").tobytes()
            (target / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(header + labels.tobytes(), 1))
    return root


def table4_args(ctx: Context, data: Path) -> list[str]:
    only = [arg for case in TABLE4_CASES for arg in ("--only", f"case={case}")]
    scale = ["--scale", "smoke"] if ctx.quick else []
    return [str(TABLE4), *only, *scale, "--data-dir", str(data), "--device", ctx.device]


def block_jobs(ctx: Context) -> tuple[int, str]:
    """Worker processes for the block: the throughput part's best N when it ran, else 8 (2 with --quick)."""
    measured = (_read_json(ctx.out / "parts" / "throughput.json") or {}).get("benchmark", {}).get("workers")
    if measured:
        best = max(measured, key=lambda row: row["run_rounds_per_second"])
        return int(best["workers"]), "the throughput part's best worker count"
    return (2 if ctx.quick else 8), "default (no throughput figures)"


def part_table4_block(ctx: Context) -> None:
    began = time.monotonic()
    data = write_mnist_like(ctx.work / "data", *((2000, 500) if ctx.quick else (60_000, 10_000)))
    jobs, why = block_jobs(ctx)
    ctx.record["jobs"] = {"jobs": jobs, "why": why}
    ctx.record["data_seconds"] = round(time.monotonic() - began, 1)
    url = ctx.registry("table4_block")
    base = ["run", *table4_args(ctx, data), "--no-verify", "--jobs", str(jobs), "--registry", url]
    slices: list[dict] = []
    grace = 4.0 if ctx.quick else 10.0  # for the interrupted workers to record their runs
    for seed in range(1, (2 if ctx.quick else TABLE4_SEEDS) + 1):  # --quick: two slices show the extrapolation
        left = ctx.left() - grace - 3  # 3 s to read the registry after the last slice
        if left < 3:
            break
        start = time.monotonic()
        code, _ = fedbench_cli([*base, "--seeds", str(seed)], left, interrupt=True, grace=grace)
        slices.append({"seed": seed, "seconds": round(time.monotonic() - start, 2), "exit_code": code})
        ctx.record["slices"] = slices
        if code != 0:
            break
    runs = registry_runs(url)
    rounds_done = sum(run.get("rounds_done") or 0 for run in runs)
    rounds_per_run = (runs[0].get("spec") or {}).get("rounds") if runs else None
    complete = [s["seconds"] for s in slices if s["exit_code"] == 0]
    measured = sum(s["seconds"] for s in slices)
    block_runs = len(TABLE4_CASES) * 6 * TABLE4_SEEDS
    if complete:
        extrapolated = sum(complete) / len(complete) * TABLE4_SEEDS
        how = f"mean of {len(complete)} complete one-seed slices × {TABLE4_SEEDS}"
    elif rounds_done and rounds_per_run:
        extrapolated = measured * block_runs * rounds_per_run / rounds_done
        how = "run-rounds done in the partial first slice, scaled to the block's (its runs are not all alike)"
    else:
        raise RuntimeError(f"no round of the block finished in {measured:.0f} s")
    executors = collections.Counter(  # a run's provenance names its executor once the run is done
        ((run.get("provenance") or {}).get("packing") or {}).get("executor", "not recorded (unfinished)")
        for run in runs
        if run.get("rounds_done")
    )
    ctx.record["runs"] = [run_brief(run) for run in runs if run.get("rounds_done")]
    ctx.record["extrapolation"] = how
    ctx.record.figures(
        jobs=jobs,
        slices_complete=len(complete),
        runs_done=sum(run["status"] == "done" for run in runs),
        block_runs=block_runs,
        rounds_done=rounds_done,
        measured_seconds=measured,
        slice_seconds=complete,
        block_seconds_extrapolated=extrapolated,
        block_minutes_extrapolated=None if extrapolated is None else extrapolated / 60,
        goal_5_min_met=(extrapolated is not None and extrapolated <= 300) if ctx.cuda else NOT_APPLICABLE,
        executors=dict(executors),
        scale="smoke" if ctx.quick else "full",
    )


def part_plan(ctx: Context) -> None:
    figures: dict[str, Any] = {}
    determinism = _read_json(ctx.out / "parts" / "determinism.json") or {}
    measured_runs = determinism.get("default") or []
    plan = fedbench_json(["plan", *quickstart_args(ctx)], timeout=ctx.left())
    ctx.record["quickstart_plan"] = plan
    measured = sum(run.get("wall_seconds") or 0 for run in measured_runs)
    figures.update(quickstart_planned_s=plan["seconds_one_worker"], quickstart_measured_s=measured or None)
    if measured:
        figures["quickstart_measured_over_planned"] = measured / plan["seconds_one_worker"]
    block = _read_json(ctx.out / "parts" / "table4_block.json") or {}
    data = ctx.work_of("table4_block") / "data"
    if data.is_dir() and ctx.left() > 10:
        jobs = (block.get("jobs") or {}).get("jobs") or block_jobs(ctx)[0]
        seeds = ",".join(str(s) for s in range(1, TABLE4_SEEDS + 1))
        args = ["plan", *table4_args(ctx, data), "--seeds", seeds, "--jobs", str(jobs)]
        plan = fedbench_json(args, timeout=ctx.left())
        ctx.record["table4_block_plan"] = {k: v for k, v in plan.items() if k != "cells"}
        extrapolated = (block.get("figures") or {}).get("block_seconds_extrapolated")
        figures.update(block_planned_s=plan["wall_seconds"], block_extrapolated_s=extrapolated, block_jobs=jobs)
        if extrapolated:
            figures["block_measured_over_planned"] = extrapolated / plan["wall_seconds"]
    ctx.record.figures(**figures)


def part_memory(ctx: Context) -> None:
    import torch

    from fedbench.cli import app

    url = ctx.registry("memory")
    rows = []
    for algorithm in ("fedavg", "fedprox"):
        if ctx.cuda:
            torch.cuda.reset_peak_memory_stats()
        args = ["run", *quickstart_args(ctx), "--only", f"algorithm={algorithm}", "--registry", url]
        print("fedbench " + " ".join(args), flush=True)
        try:
            app(args, standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                raise
        checked = int(torch.cuda.max_memory_allocated()) if ctx.cuda else None
        run = next(r for r in registry_runs(url) if r["labels"].get("algorithm") == algorithm)
        recorded = ((run.get("provenance") or {}).get("peak_memory")) or {}
        rows.append(
            {
                "algorithm": algorithm,
                "provenance": recorded,
                "check_max_memory_allocated": checked if ctx.cuda else NOT_APPLICABLE,
                "check_over_provenance": checked / recorded["bytes"] if ctx.cuda and recorded.get("bytes") else None,
            }
        )
        ctx.record["runs"] = rows
    ctx.record.figures(
        provenance_bytes=[row["provenance"].get("bytes") for row in rows],
        provenance_measure=sorted({str(row["provenance"].get("measure")) for row in rows}),
        check_max_memory_allocated=[row["check_max_memory_allocated"] for row in rows] if ctx.cuda else NOT_APPLICABLE,
    )


class _RoundTimes:
    """A run sink that keeps each round's record (the engine's ``RunSink``), for the rounds' wall seconds."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def log_round(self, record: Any) -> None:
        self.records.append(record)

    def truncate(self, after_round: int) -> None:
        del self.records[after_round:]


def pfl_stand_in(quick: bool) -> None:
    """Register CIFAR-shaped stand-in data (uniform noise: the timing does not depend on the pixels) of CIFAR-10's
    size, 50,000 training and 10,000 test images; 2,000 and 500 with ``--quick``, the smoke scale's synthetic size."""
    import numpy as np

    from fedbench.data import register_dataset
    from fedbench.data.base import DatasetArrays, DatasetMeta

    train, test = (2000, 500) if quick else (50_000, 10_000)
    meta = DatasetMeta(PFL_STAND_IN, 10, (3, 32, 32), (0.5,) * 3, (0.5,) * 3)
    rng = np.random.default_rng(0)
    arrays = DatasetArrays(
        meta=meta,
        train_x=rng.integers(0, 256, (train, 3, 32, 32), dtype=np.uint8),
        train_y=rng.integers(0, 10, train),
        test_x=rng.integers(0, 256, (test, 3, 32, 32), dtype=np.uint8),
        test_y=rng.integers(0, 10, test),
    )
    register_dataset(meta)(lambda root, **params: arrays)


def pfl_slice_spec(quick: bool, rounds: int) -> Any:
    """The benchmark recipe's run (its full scale; with ``quick`` its smoke scale's users and cohort) on the
    stand-in data, ``rounds`` rounds, the test set evaluated after the last one only."""
    from fedbench.recipes.expand import expand
    from fedbench.recipes.load import load_recipe
    from fedbench.spec import RunSpec

    (planned,) = expand(load_recipe(PFL_RECIPE), scale="smoke" if quick else "full")
    fields = planned.spec.model_dump()
    fields.update(dataset=PFL_STAND_IN, dataset_params={}, rounds=rounds, eval_every=rounds)
    return RunSpec(**fields)


def pfl_extrapolation(seconds_per_round: float, evaluation_seconds: float) -> float:
    """The benchmark's wall time from a slice: 1,500 training rounds and 150 evaluations of the test set."""
    return seconds_per_round * PFL_ROUNDS + evaluation_seconds * PFL_EVALUATIONS


def round_timing(walls: list[float]) -> dict[str, float]:
    """A slice's rounds' wall seconds, the last of which also evaluated the test set: a training round's (median of
    the rounds between the first, which warms up, and the last) and one evaluation's (the last round's excess)."""
    training = sorted(walls[1:-1] or walls[:1])
    middle = len(training) // 2
    per_round = training[middle] if len(training) % 2 else (training[middle - 1] + training[middle]) / 2
    return {"seconds_per_round": per_round, "evaluation_seconds": max(0.0, walls[-1] - per_round)}


def time_pfl_slice(spec: Any, device: str, packing: str) -> dict[str, Any]:
    """One run of ``spec`` with the executor ``packing``: its rounds' wall seconds, the executor it used, the
    timing and the extrapolation."""
    from fedbench.engine import EngineOptions, run

    sink = _RoundTimes()
    result = run(spec, sink, EngineOptions(device=device).with_settings(packing=packing))
    walls = [record.wall_seconds for record in sink.records]
    timing = round_timing(walls)
    return {
        "executor": result.settings["packing"]["executor"],
        "executor_reason": result.settings["packing"]["reason"],
        "round_wall_seconds": walls,
        **timing,
        "benchmark_seconds_extrapolated": pfl_extrapolation(timing["seconds_per_round"], timing["evaluation_seconds"]),
    }


def _pfl_worker(index: int, device: str, quick: bool, rounds: int, ready: Any, results: Any) -> None:
    """One of N worker processes on the device: builds its data (and CUDA context), waits for the others, trains
    one sequential run of the slice (seed ``index``), puts its round timing on ``results``."""
    import torch

    torch.set_num_threads(1)
    pfl_stand_in(quick)
    if device.startswith("cuda"):
        torch.zeros(1, device=device)  # the CUDA context, before the clock starts
    spec = pfl_slice_spec(quick, rounds).model_copy(update={"seed": index})
    ready.wait()
    results.put(time_pfl_slice(spec, device, "sequential"))


def pfl_workers(device: str, quick: bool, rounds: int, count: int, timeout: float) -> dict[str, Any]:
    """``count`` processes training one run each at the same time: each run's seconds per round, the device's
    run-rounds per second, each run's 1,500 rounds extrapolated (they run together) and that over ``count``."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # CUDA cannot be used in forked processes
    ready, results = context.Barrier(count), context.Queue()
    processes = [
        context.Process(target=_pfl_worker, args=(i, device, quick, rounds, ready, results)) for i in range(count)
    ]
    for process in processes:
        process.start()
    try:
        timings = [results.get(timeout=max(timeout, 1.0)) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    per_round = [t["seconds_per_round"] for t in timings]
    each = max(t["benchmark_seconds_extrapolated"] for t in timings)
    return {
        "workers": count,
        "seconds_per_round": per_round,
        "run_rounds_per_second": sum(1.0 / s for s in per_round),
        "benchmark_seconds_extrapolated": each,
        "benchmark_seconds_per_run_amortised": each / count,
    }


def part_pfl_slice(ctx: Context) -> None:
    rounds = 3 if ctx.quick else 6  # the first warms up, the last evaluates
    ctx.record["setup"] = (
        "pfl-research CIFAR-10 benchmark (recipes/bench_pfl_cifar10.toml): FedAvg, pfl_cnn, "
        + (
            "the smoke scale's 40 users × 50 images, 5 per round"
            if ctx.quick
            else "1,000 users × 50 images, 50 per round"
        )
        + f", E = 1, batch 10, SGD lr 0.1; {PFL_ROUNDS} rounds, evaluation every 10; pfl-research's own figure:"
        " one A100-40GB with 10 CPUs"
    )
    ctx.record["extrapolation"] = (
        f"seconds per round × {PFL_ROUNDS} + one evaluation's seconds × {PFL_EVALUATIONS}; a round's seconds: the"
        f" median of a {rounds}-round slice's rounds but the first (warm-up) and the last (which evaluates the test"
        " set: its excess over a round is the evaluation's)"
    )
    import torch

    if not ctx.cuda:
        torch.set_num_threads(1)  # as each worker process: the in-process and the worker figures compare
    pfl_stand_in(ctx.quick)
    spec = pfl_slice_spec(ctx.quick, rounds)
    figures: dict[str, Any] = {"scale": "smoke" if ctx.quick else "full", "slice_rounds": rounds}
    for packing in ("sequential", "packed"):
        timing = time_pfl_slice(spec, ctx.device, packing)
        ctx.record[packing] = timing
        if packing == "packed":
            # the benchmark's CNN has dropout, which the packed step does not reproduce: a request for it falls
            # back to the sequential path, and says why; its timing is then the sequential one again
            figures.update(packed_executor=timing["executor"], packed_reason=timing["executor_reason"])
        figures.update(
            {
                f"{packing}_seconds_per_round": timing["seconds_per_round"],
                f"{packing}_evaluation_seconds": timing["evaluation_seconds"],
                f"{packing}_benchmark_seconds_extrapolated": timing["benchmark_seconds_extrapolated"],
            }
        )
        ctx.record.figures(**figures)
    rows = []
    for count in (2,) if ctx.quick else (2, 4):
        if ctx.left() < 10:
            break
        rows.append(pfl_workers(ctx.device, ctx.quick, rounds, count, ctx.left() - 5))
        ctx.record["workers"] = rows
        row = rows[-1]
        figures.update(
            {
                f"workers_{count}_seconds_per_round": max(row["seconds_per_round"]),
                f"workers_{count}_benchmark_seconds_extrapolated": row["benchmark_seconds_extrapolated"],
                f"workers_{count}_seconds_per_run_amortised": row["benchmark_seconds_per_run_amortised"],
            }
        )
        ctx.record.figures(**figures)


PART_FUNCTIONS: dict[str, Callable[[Context], None]] = {
    "environment": part_environment,
    "cuda_tests": part_cuda_tests,
    "determinism": part_determinism,
    "throughput": part_throughput,
    "table4_block": part_table4_block,
    "pfl_slice": part_pfl_slice,
    "plan": part_plan,
    "memory": part_memory,
    "compile": part_compile,
}
# Time limits in seconds, in the order the parts run: on a GPU (470 in all), and with --quick, where they are only a
# safety net (an idle 2-core machine needs about a fifth of each; one shared with other jobs, several times that).
# The compile part comes last: torch.compile's first compilation is the least predictable step.
LIMITS = {
    "environment": (15, 30),
    "cuda_tests": (60, 60),
    "determinism": (50, 90),
    "throughput": (70, 90),
    "table4_block": (110, 60),  # on a GPU: the data, then one or two slices of 24 runs of 100 rounds
    "pfl_slice": (50, 60),  # on a GPU: CIFAR-10-sized data, two 6-round runs in this process, 2 then 4 workers
    "plan": (30, 60),
    "memory": (25, 45),
    "compile": (60, 60),
}


def run_one_part(name: str, ctx: Context) -> int:
    """The process of one part: run it, record its error (the traceback's end) if it fails."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped by the check: clean up what it started
    try:
        PART_FUNCTIONS[name](ctx)
    except BaseException as exc:
        message = "".join(traceback.format_exception(exc))
        print(message, flush=True)  # the log keeps where it was, also when the check stopped it
        if not (isinstance(exc, SystemExit) and exc.code == 143):  # else the check records its time limit
            ctx.record["error"] = message[-3000:]
        return 1
    return 0


# ---- command line -------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_check.json, the summary, logs, work")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a rehearsal of the check (e.g. on a CPU)")
    parser.add_argument("--parts", default=",".join(PART_FUNCTIONS), help="comma-separated parts to run, in order")
    parser.add_argument(
        "--limit", action="append", default=[], metavar="PART=SECONDS", help="a part's time limit (repeatable)"
    )
    parser.add_argument("--total", type=float, default=None, help="seconds for all parts [470; 585 with --quick]")
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="the carried wheel folder (make gpu-wheels)")
    parser.add_argument("--site", type=Path, default=SITE, help="where the carried wheels are installed")
    parser.add_argument("--part", choices=sorted(PART_FUNCTIONS), help=argparse.SUPPRESS)
    parser.add_argument("--part-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=float, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def planned_parts(args: argparse.Namespace) -> Iterator[Part]:
    limits = {name: float(pair[1] if args.quick else pair[0]) for name, pair in LIMITS.items()}
    for item in args.limit:
        name, _, seconds = item.partition("=")
        if name not in limits:
            raise SystemExit(f"--limit {item!r}: no part {name!r}; parts: {', '.join(limits)}")
        limits[name] = float(seconds)
    for name in [n for n in args.parts.split(",") if n]:
        if name not in PART_FUNCTIONS:
            raise SystemExit(f"--parts: no part {name!r}; parts: {', '.join(PART_FUNCTIONS)}")
        command = [sys.executable, str(Path(__file__).resolve()), "--part", name, "--device", args.device]
        command += ["--out", str(args.out.resolve()), *(["--quick"] if args.quick else [])]
        yield Part(name, limits[name], command)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.part:
        ctx = Context(
            args.part, args.device, args.quick, args.out, time.monotonic() + args.budget, Recorder(args.part_out)
        )
        shutil.rmtree(ctx.work_of(args.part), ignore_errors=True)
        return run_one_part(args.part, ctx)
    parts = list(planned_parts(args))
    out = args.out.resolve()
    report: dict[str, Any] = {
        "check": {
            "device": args.device,
            "quick": args.quick,
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "total_limit_seconds": args.total or (QUICK_TOTAL_SECONDS if args.quick else TOTAL_SECONDS),
            "command": " ".join(sys.argv),
        }
    }
    out.mkdir(parents=True, exist_ok=True)
    report["install"] = install(sys.executable, args.wheels.resolve(), args.site.resolve())
    write_report(report, out)
    os.environ["PYTHONPATH"] = python_path(args.site.resolve())  # every part's process finds the wheels and fedbench
    check(parts, out, report["check"]["total_limit_seconds"], report)
    text = summary(report)
    print(text, end="")
    print(f"wrote {out / RESULT} and {out / SUMMARY}")
    return 0 if all(record["status"] == "ok" for record in report["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
