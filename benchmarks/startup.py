"""Time the start of the commands that train nothing against importing fedbench's CLI libraries alone.

Each command runs as its own process (``python -m fedbench.cli ...``) on a tiny registry this script makes (one
finished run of ``recipes/quickstart.toml`` at its smoke scale, one round); the baseline is
``python -c "import sqlalchemy, rich, typer"``, what any fedbench command imports before doing anything. The
commands run in turn, ``--repeat`` times each (interleaved, so a change in the machine's load hits them alike),
and the table gives the median wall-clock seconds, the median CPU seconds of the process (the figure to read on a
shared, busy machine) and both as a multiple of the baseline's (the goal: at most 1.5×), and whether the command
imported torch. The second row is the floor under every Typer command: a two-command Typer app parsing one option
(Typer imports its pydantic adapters to parse), about 1.3× the import baseline on its own; the third, the floor
under ``--help``: the same app printing its help (Typer renders it with rich's markdown and syntax modules).
``import`` resolves every spec of the runs file, and ``report`` and ``run --dry-run`` compile the quickstart recipe
(its tables need no model statistics): they read the methods' parameter classes and the models' builders, not torch.

    python benchmarks/startup.py [--repeat 11] [--json benchmarks/results/startup.json --label after]
    PYTHONPATH=OLD_CHECKOUT python benchmarks/startup.py --json ... --label before   # an older fedbench, alike

Before timing, the script compiles the bytecode of the fedbench it measures, as installing fedbench does: a
checkout run with ``PYTHONDONTWRITEBYTECODE`` set would otherwise compile every module it imports in every run.
``--json PATH`` keeps the table in PATH under ``--label`` (other labels already there are kept), with the machine it
was measured on (the CPU model from /proc/cpuinfo, the load average).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fedbench
from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import compile_recipes
from fedbench.registry import Registry

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "quickstart.toml"
BASELINE = "import sqlalchemy, rich, typer"
# The least any Typer command costs: parsing one option makes Typer import its pydantic adapters (typer >= 0.16),
# which the import baseline does not pay. The distance from this floor is what fedbench adds.
TYPER_APP = (
    "import sqlalchemy, rich, typer\n"
    "app = typer.Typer(rich_markup_mode='markdown')\n"
    "@app.command()\n"
    "def runs(registry: str = typer.Option('x', '--registry'), paper: str = typer.Option(None)) -> None:\n"
    "    'List the `runs`.'\n"
    "@app.command()\n"
    "def show() -> None: pass\n"
)
TYPER_FLOOR = TYPER_APP + "app(['runs', '--registry', 'y'])"
# The least a --help costs: Typer renders it with rich (markdown, syntax highlighting), which parsing does not import.
TYPER_HELP_FLOOR = TYPER_APP + "app(['--help'])"


def make_registry(url: str) -> None:
    """One finished run of the quickstart recipe (smoke scale) with one round, written through the Registry API."""
    planned = compile_recipes([RECIPE], scale="smoke")[0]
    registry = Registry(url)
    registry.ensure_runs([planned.registry_entry()])
    run_id = registry.claim(planned.spec_hash, worker="benchmark:1")
    assert run_id is not None
    record = RoundRecord(
        round=1, train_loss=1.0, wall_seconds=0.5, bytes_up=1, bytes_down=2, test_acc=0.5, test_loss=1.2
    )
    registry.log_round(run_id, record, worker="benchmark:1")
    registry.finish(run_id, "done", summary={"best": 0.5, "final": 0.5}, worker="benchmark:1")


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds) of one run of ``argv``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imports_torch(argv: list[str]) -> bool:
    """Whether the process imports torch (Python's import-time report names every module it loads)."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    return any(line.split("|")[-1].strip() == "torch" for line in done.stderr.splitlines())


def machine() -> dict[str, object]:
    """The CPU model (/proc/cpuinfo), the cores, the Python and the load average (1, 5, 15 minutes) now."""
    try:
        fields = dict(
            (key.strip(), value.strip())
            for key, _, value in (line.partition(":") for line in Path("/proc/cpuinfo").read_text().splitlines())
            if value
        )
        cpu = f"{fields['model name']} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')})"
    except (OSError, KeyError):
        cpu = platform.processor() or "unknown"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }


def save(path: Path, label: str, result: dict[str, object]) -> None:
    """``result`` under ``label`` in the JSON file ``path``, beside the labels it holds already."""
    saved = json.loads(path.read_text()) if path.exists() else {"benchmark": "benchmarks/startup.py"}
    saved[label] = result
    path.write_text(json.dumps(saved, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11, help="runs of each command (the median is shown)")
    parser.add_argument("--json", type=Path, help="also keep the table in this JSON file, under --label")
    parser.add_argument("--label", default="after", help="the key of this measurement in the --json file")
    args = parser.parse_args()
    compileall.compile_dir(Path(fedbench.__file__).parent, quiet=1)

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'fedbench.db'}"
        make_registry(url)
        runs_file = Path(folder) / "runs.jsonl"
        cli = [sys.executable, "-m", "fedbench.cli"]
        commands = {
            "baseline: " + BASELINE: [sys.executable, "-c", BASELINE],
            "floor: a two-command Typer app, parsing": [sys.executable, "-c", TYPER_FLOOR],
            "floor: the same app's --help": [sys.executable, "-c", TYPER_HELP_FLOOR],
            "fedbench --help": [*cli, "--help"],
            "fedbench runs": [*cli, "runs", "--registry", url],
            "fedbench show 1": [*cli, "show", "1", "--registry", url],
            "fedbench status": [*cli, "status", "--registry", url],
            "fedbench export": [*cli, "export", "--registry", url, "--out", str(runs_file)],
            "fedbench import": [*cli, "import", str(runs_file), "--registry", url],
            "fedbench report": [*cli, "report", "--recipe", str(RECIPE), "--scale", "smoke", "--registry", url],
            "fedbench run --dry-run": [*cli, "run", str(RECIPE), "--scale", "smoke", "--dry-run", "--registry", url],
        }
        subprocess.run(commands["fedbench export"], check=True, stderr=subprocess.DEVNULL)  # import reads it
        torch = {name: imports_torch(argv) for name, argv in commands.items()}
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, argv in commands.items():
                wall, cpu = timed(argv)
                walls[name].append(wall)
                cpus[name].append(cpu)

    wall = {name: statistics.median(values) for name, values in walls.items()}
    cpu = {name: statistics.median(values) for name, values in cpus.items()}
    base = next(iter(commands))
    width = max(map(len, commands))
    print(f"median of {args.repeat} runs each; fedbench from {Path(fedbench.__file__).parent}")
    print(f"{'command':<{width}}  {'wall s':>7}  {'× base':>6}  {'CPU s':>6}  {'× base':>6}  torch")
    for name in commands:
        print(
            f"{name:<{width}}  {wall[name]:7.3f}  {wall[name] / wall[base]:6.2f}  {cpu[name]:6.3f}  "
            f"{cpu[name] / cpu[base]:6.2f}  {'yes' if torch[name] else 'no'}"
        )
    if args.json is not None:
        rows = {
            name: {
                "wall_s": round(wall[name], 3),
                "wall_x_baseline": round(wall[name] / wall[base], 2),
                "cpu_s": round(cpu[name], 3),
                "cpu_x_baseline": round(cpu[name] / cpu[base], 2),
                "imports_torch": torch[name],
            }
            for name in commands
        }
        result = {"fedbench": str(Path(fedbench.__file__).parent), "repeat": args.repeat, "machine": machine()}
        save(args.json, args.label, {**result, "median": rows})


if __name__ == "__main__":
    main()
