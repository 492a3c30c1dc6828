"""Start, on one machine, the cluster engines the test suite runs fedbench on, to try `fedbench run --executor slurm`
and `--executor ray --address` by hand: a single-host Slurm (munged, slurmctld, slurmd from Debian's ``slurm-wlm`` and
``munge``, as root) and a Ray cluster of two nodes on 127.0.0.1 (``ray start --head`` and a second ``ray start``).

    sudo apt-get install -y slurm-wlm munge      # Debian/Ubuntu; pip install 'fedbench-repro[slurm,ray]'
    sudo .venv/bin/python tools/cluster_sandbox.py slurm ray

It prints what to set and run, then waits; Ctrl-C stops exactly the processes it started and deletes their scratch
folders. The engines are those of ``tests/cluster_fixtures.py`` (one place for how they are configured).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

# the tests' folder, added above
from cluster_fixtures import SLURM_PARTITION, start_ray, start_slurm  # type: ignore[import-not-found]  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engines", nargs="+", choices=["slurm", "ray"], help="which engines to start")
    engines = parser.parse_args().engines
    started = []
    try:
        if "slurm" in engines:
            slurm, reason = start_slurm()
            if slurm is None:
                print(f"slurm: {reason}", file=sys.stderr)
                return 2
            started.append(slurm)
            print(
                f"Slurm is up: export SLURM_CONF={slurm.conf}\n"
                f"  fedbench run recipes/quickstart.toml --scale smoke --executor slurm "
                f"--slurm-partition {SLURM_PARTITION} --slurm-time 00:10:00 --jobs 2"
            )
        if "ray" in engines:
            ray, reason = start_ray()
            if ray is None:
                print(f"ray: {reason}", file=sys.stderr)
                return 2
            started.append(ray)
            env = " ".join(f"{k}={v}" for k, v in ray.env.items())
            print(
                f"Ray is up (two nodes): export {env}\n"
                f"  fedbench run recipes/quickstart.toml --scale smoke --executor ray --address {ray.address} --jobs 2"
            )
        print("Ctrl-C stops them.")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        for engine in reversed(started):
            engine.stop()


if __name__ == "__main__":
    sys.exit(main())
