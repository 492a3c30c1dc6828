"""Client state at scale: peak RSS and checkpoint cost per round of stateful runs with many clients or a
big model, where every client keeps a state (SCAFFOLD's control variate c_i, as large as the model).

Two settings, each trained in its own process (so its peak RSS is its own) on synthetic stand-in data:

- ``lenet1000``: SCAFFOLD, 1,000 clients, 100 per round, LeNet-5 (FedTR's, OrganAMNIST shape), 60,000 samples.
- ``vgg100``: SCAFFOLD, 100 clients, 10 per round, VGG-11 (FedDr+ Table 2, CIFAR-10 shape).

Per round it records the seconds spent writing the checkpoint (client-state files included) and the bytes written.
The script runs against whichever fedbench is first on ``sys.path``, so the same script measures an older tree
(``PYTHONPATH=/path/to/old/checkout python benchmarks/client_state_scale.py``) for a before/after comparison.

    python benchmarks/client_state_scale.py [--settings lenet1000 vgg100] [--out benchmarks/results/client_state_scale.json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETTINGS = {
    "lenet1000": dict(
        dataset="organamnist",
        model="lenet5",
        num_clients=1000,
        clients_per_round=100,
        rounds=12,
        train_size=60_000,
        test_size=2_000,
    ),
    "vgg100": dict(
        dataset="cifar10",
        model="vgg11",
        num_clients=100,
        clients_per_round=10,
        rounds=12,
        train_size=2_000,
        test_size=200,
    ),
}


def status_mib(field: str) -> float:
    """A /proc/self/status figure (VmRSS, VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux)


def child(name: str, memory_mib: int | None) -> dict:
    import torch

    import fedbench
    import fedbench.checkpoint.format as checkpoint
    import fedbench.data.federated as federated
    import fedbench.engine.loop as loop
    from fedbench.engine import EngineOptions, run
    from fedbench.spec import RunSpec

    torch.set_num_threads(1)
    setting = dict(SETTINGS[name])
    train_size, test_size = setting.pop("train_size"), setting.pop("test_size")
    original = federated.synthetic_dataset
    federated.synthetic_dataset = lambda dataset, params=None, **_: original(
        dataset, train_size=train_size, test_size=test_size, params=params
    )
    spec = RunSpec(
        algorithm="scaffold",
        partition="iid",
        local_steps=1,
        batch_size=8,
        optimizer={"lr": 0.01},
        eval_every=setting["rounds"],
        synthetic=True,
        **setting,
    )

    seconds: list[float] = []
    written: list[int] = []
    in_checkpoint = [False]
    if hasattr(
        checkpoint, "write_all_atomic"
    ):  # every checkpoint file goes through it (the client-state store's files too)
        original_write_all = checkpoint.write_all_atomic

        def counting_write_all(files, *args, **kwargs):
            written[-1] += sum(len(part) for _, parts in files for part in parts)
            return original_write_all(files, *args, **kwargs)

        checkpoint.write_all_atomic = counting_write_all
    else:  # a checkpoint module of before the client-state store: every file through write_atomic
        original_write = checkpoint.write_atomic

        def counting_write(path, data=None, chunks=None):
            written[-1] += len(data) if data is not None else sum(len(c) for c in chunks or [])
            return original_write(path, data, chunks)

        checkpoint.write_atomic = counting_write

    def timed(function):
        def wrapper(*args, **kwargs):
            if in_checkpoint[0]:
                return function(*args, **kwargs)
            in_checkpoint[0] = True
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[-1] += time.perf_counter() - began
                in_checkpoint[0] = False

        return wrapper

    loop.save_checkpoint = timed(loop.save_checkpoint)
    try:  # the store of client-state files (absent from older fedbench versions)
        from fedbench.engine.client_states import ClientStates

        ClientStates.write_changed = timed(ClientStates.write_changed)
        ClientStates.commit = timed(ClientStates.commit)
    except ImportError:
        pass

    class Sink:
        def log_round(self, record):
            pass

        def truncate(self, after_round):
            pass

    rounds_began: list[float] = []

    rss_per_round: list[int] = []

    def next_round(record):
        rss_per_round.append(round(status_mib("VmRSS")))
        rounds_began.append(time.perf_counter())
        seconds.append(0.0)
        written.append(0)

    # Peak RSS while training, apart from loading and generating the data (the synthetic generator's float64
    # temporaries dominate the process's peak): the kernel's high-water mark is reset once the data are prepared.
    rss_at_start = [0.0]
    original_prepare = loop.prepare_data

    def prepared(*args, **kwargs):
        data = original_prepare(*args, **kwargs)
        reset_peak_rss()
        rss_at_start[0] = status_mib("VmRSS")
        return data

    loop.prepare_data = prepared
    seconds.append(0.0)
    written.append(0)
    kwargs = {}
    if memory_mib is not None and "client_state_memory" in inspect.signature(run).parameters:
        kwargs["client_state_memory"] = memory_mib << 20
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        result = run(
            spec,
            Sink(),
            EngineOptions(checkpoint_path=Path(folder) / "run.pt", on_round=next_round).with_settings(**kwargs),
        )
    total = time.perf_counter() - began
    per_round_seconds, per_round_bytes = seconds[: spec.rounds], written[: spec.rounds]
    return {
        "setting": name,
        "fedbench": str(Path(fedbench.__file__).parent.parent),
        "status": result.status,
        "client_state_memory_mib": kwargs.get("client_state_memory", 0) >> 20 if kwargs else None,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_after_data_mib": round(rss_at_start[0]),
        "peak_rss_training_mib": round(status_mib("VmHWM")),
        "rss_mib_per_round": rss_per_round,
        "checkpoint_seconds_per_round": [round(s, 4) for s in per_round_seconds],
        "checkpoint_mib_per_round": [round(b / 2**20, 1) for b in per_round_bytes],
        "checkpoint_seconds_last_5_mean": round(sum(per_round_seconds[-5:]) / 5, 4),
        "checkpoint_mib_last_5_mean": round(sum(per_round_bytes[-5:]) / 5 / 2**20, 1),
        "total_seconds": round(total, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--client-state-memory", type=int, default=None, help="MiB (default: the engine's)")
    parser.add_argument("--label", default="", help="a name for this tree in the output (e.g. before/after)")
    parser.add_argument("--out", type=Path, default=None, help="append the results to this JSON file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.client_state_memory)))
        return
    results = []
    for name in args.settings:
        command = [sys.executable, __file__, "--child", name]
        if args.client_state_memory is not None:
            command += ["--client-state-memory", str(args.client_state_memory)]
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=os.environ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        result.update(label=args.label, machine=platform.processor() or platform.machine())
        print(
            f"{args.label:>8} {name:>10}: peak RSS {result['peak_rss_mib']:.0f} MiB (training: "
            f"{result['rss_after_data_mib']} → {result['peak_rss_training_mib']} MiB), checkpoint "
            f"{result['checkpoint_seconds_last_5_mean']:.3f} s and {result['checkpoint_mib_last_5_mean']} MiB per "
            f"round (mean of the last 5), {result['total_seconds']} s in all"
        )
        results.append(result)
    if args.out is not None:
        previous = json.loads(args.out.read_text()) if args.out.exists() else []
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(previous + results, indent=1) + "\n")


if __name__ == "__main__":
    main()
