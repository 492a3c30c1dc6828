"""The real cluster engines for the test session: a Slurm cluster of one host and a Ray cluster of two nodes.

``SlurmHost``: munged with its own key and socket, slurmctld and slurmd (Debian's ``munge`` and ``slurm-wlm``), all
from a minimal ``slurm.conf`` in a scratch folder, on free loopback ports, no accounting (as on many small clusters:
``sacct`` fails there, which fedbench must live with). The clients (``sbatch``, ``squeue``, submitit) find it through
``SLURM_CONF``. The daemons run as root (slurmd must, to start jobs as their user).

``RayNodes``: ``ray start --head`` and a second ``ray start --address`` on 127.0.0.1, one CPU each, in a temporary
folder of their own; the second node carries a custom resource (``SECOND_NODE``) so that a test can place work on it
and find its raylet to kill.

Each stops exactly the processes it started (by pid, with their descendants), never ``ray stop`` or a ``pkill`` by
name, which would stop other users' engines on the machine. Where an engine cannot start (not root, the packages
missing), ``start_*`` returns None and the one-line reason the tests skip with; ``.ci/run`` installs the packages.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLURM_PARTITION = "fbtest"
SLURM_NODE = "fbnode"
SECOND_NODE = "second_node"  # the custom resource of the Ray cluster's second node


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def descendants(pids: set[int]) -> set[int]:
    """``pids`` and every process below them, read from /proc once."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, grew = set(pids), True
    while grew:
        children = {pid for pid, ppid in parent.items() if ppid in found} - found
        found |= children
        grew = bool(children)
    return found


def processes_naming(text: str) -> set[int]:
    """The processes whose command line contains ``text`` (a folder of ours: no one else's processes name it), this
    one excepted (a test process may name it too)."""
    named = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    named.add(int(entry.name))
            except OSError:
                continue
    return named


def stop_processes(pids: set[int], grace: float = 5.0) -> None:
    """SIGTERM, then after ``grace`` seconds SIGKILL to whichever of ``pids`` is still there."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
            time.sleep(0.2)


def tail(path: Path, chars: int = 600) -> str:
    return " ".join(path.read_text(errors="replace")[-chars:].split()) if path.exists() else ""


# ---------------------------------------------------------------------------------------------- Slurm
class SlurmHost:
    """A running single-host Slurm cluster: ``env`` is what its clients need (``SLURM_CONF``)."""

    def __init__(self, base: Path):
        self.base = base
        self.conf = base / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self.daemons: list[subprocess.Popen] = []
        self.munged_pid: int | None = None

    def command(self, *args: str, check: bool = True) -> str:
        """A Slurm client command against this cluster (``squeue``, ``scancel``, ``scontrol`` …); its stdout."""
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=60, env={**os.environ, **self.env}, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def queued(self) -> list[str]:
        """``jobid state`` of every job in the queue (array tasks one by one)."""
        return self.command("squeue", "-h", "-r", "-o", "%i %T").split("\n")[:-1]

    def start(self) -> None:
        self.base.chmod(0o755)  # munged wants its socket's folder open to all (clients of every user)
        for name in ("state", "spool", "jobs"):
            (self.base / name).mkdir()
        key = self.base / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        munge = [
            "munged",
            f"--key-file={key}",
            f"--socket={self.base / 'munge.sock'}",
            f"--pid-file={self.base / 'munged.pid'}",
            f"--log-file={self.base / 'munged.log'}",
            f"--seed-file={self.base / 'munge.seed'}",
        ]
        started = subprocess.run(munge, capture_output=True, text=True, timeout=60)
        if started.returncode != 0:
            raise RuntimeError(f"munged: {started.stderr.strip()} {tail(self.base / 'munged.log')}")
        self.munged_pid = int((self.base / "munged.pid").read_text())
        self.conf.write_text(slurm_conf(self.base, socket.gethostname(), free_port(), free_port()))
        env = {**os.environ, **self.env}
        for args, log in (
            (["slurmctld", "-D", "-f", str(self.conf)], "slurmctld.out"),
            (["slurmd", "-D", "-f", str(self.conf), "-N", SLURM_NODE], "slurmd.out"),
        ):
            with open(self.base / log, "wb") as out:
                self.daemons.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(d.poll() is not None for d in self.daemons):
                break
            state = self.command("sinfo", "-h", "-n", SLURM_NODE, "-o", "%T", check=False).strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"the Slurm node never became idle: slurmctld: {tail(self.base / 'slurmctld.out')} "
            f"slurmd: {tail(self.base / 'slurmd.out')}"
        )

    def cancel_all(self) -> None:
        """Cancel every job of this cluster (ours alone) and wait until the queue is empty."""
        self.command("scancel", "--full", "-p", SLURM_PARTITION, check=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.queued():
            time.sleep(0.5)

    def stop(self) -> None:
        if self.daemons and all(d.poll() is None for d in self.daemons):
            self.cancel_all()
        pids = {d.pid for d in self.daemons} | ({self.munged_pid} if self.munged_pid else set())
        # slurmstepd and the jobs' processes outlive slurmd: they name our folder (the job scripts lie in it)
        stop_processes(descendants(pids | processes_naming(str(self.base))))
        shutil.rmtree(self.base, ignore_errors=True)


def slurm_conf(base: Path, host: str, controller_port: int, node_port: int) -> str:
    """A minimal configuration: one node of this host's CPUs, no cgroups (``linuxproc`` tracks the processes), no
    accounting, short kill and job-age delays (a test waits on them)."""
    return f"""\
ClusterName=fedbenchtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={controller_port}
SlurmdPort={node_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={base / "munge.sock"},cred_expire=10
CredType=cred/munge
StateSaveLocation={base / "state"}
SlurmdSpoolDir={base / "spool"}
SlurmctldPidFile={base / "slurmctld.pid"}
SlurmdPidFile={base / "slurmd.pid"}
SlurmctldLogFile={base / "slurmctld.log"}
SlurmdLogFile={base / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
MinJobAge=5
SlurmdParameters=config_overrides
NodeName={SLURM_NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName={SLURM_PARTITION} Nodes={SLURM_NODE} Default=YES MaxTime=INFINITE State=UP
"""


def start_slurm() -> tuple[SlurmHost | None, str]:
    """A started single-host Slurm cluster, or None and the reason none could be had."""
    missing = [name for name in ("munged", "slurmctld", "slurmd", "sbatch", "squeue") if shutil.which(name) is None]
    if missing:
        return None, f"no {', '.join(missing)} here: apt-get install slurm-wlm munge (as root)"
    if os.geteuid() != 0:
        return None, "a real Slurm's slurmd runs as root: run these tests as root (CI does)"
    try:
        import submitit  # noqa: F401
    except ImportError:
        return None, "submitit not installed (pip install 'fedbench-repro[slurm]')"
    host = SlurmHost(Path(tempfile.mkdtemp(prefix="fbslurm")))
    try:
        host.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        host.stop()
        return None, f"could not start a single-host Slurm: {' '.join(str(exc).split())[:400]}"
    return host, ""


# ---------------------------------------------------------------------------------------------- Ray
class RayNodes:
    """A running Ray cluster of two nodes on this host; ``address`` is the head's ``host:port``."""

    def __init__(self, temp_dir: str, env: dict[str, str] | None = None):
        self.temp_dir = temp_dir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # a private test cluster: no token shared between the nodes (the driver must ask for the same)
        self.env = env if env is not None else {"RAY_AUTH_MODE": "disabled"}
        self.ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
        self.second_node: set[int] = set()

    def _start(self, *args: str) -> None:
        common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
        started = subprocess.run(
            [self.ray, "start", *args, *common],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **self.env},
        )
        if started.returncode != 0:
            raise RuntimeError(f"ray start {args[0]}: {(started.stdout + started.stderr)[-600:]}")

    def start(self, nodes: int = 2) -> None:
        self._start("--head", f"--port={self.port}", f"--temp-dir={self.temp_dir}", "--include-dashboard=false")
        if nodes == 1:
            return
        head = descendants(processes_naming(self.temp_dir))
        self._start(f"--address={self.address}", f'--resources={{"{SECOND_NODE}": 1}}')
        # the second node's processes: the new ones naming our folder (its raylet and its agents), with theirs
        self.second_node = descendants(processes_naming(self.temp_dir)) - head

    def second_raylet(self) -> int:
        """The second node's raylet (the process that killing takes the node down)."""
        for pid in sorted(self.second_node):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                    return pid
            except OSError:
                continue
        raise RuntimeError("the second Ray node has no raylet")

    def second_node_id(self) -> str:
        """The second node's Ray node id (``ray.get_runtime_context().get_node_id()`` of a task there)."""
        arguments = Path(f"/proc/{self.second_raylet()}/cmdline").read_bytes().split(b"\0")
        return next(a.decode().split("=", 1)[1] for a in arguments if a.startswith(b"--node_id="))

    def stop(self) -> None:
        # collected once, before any parent dies and its children are re-parented
        stop_processes(descendants(processes_naming(self.temp_dir) | self.second_node), grace=3.0)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_ray(nodes_wanted: int = 2, env: dict[str, str] | None = None) -> tuple[RayNodes | None, str]:
    """A started Ray cluster of ``nodes_wanted`` nodes (1 or 2) started with ``env`` (default: no authentication),
    or None and the reason none could be had."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return None, "ray not installed (pip install 'fedbench-repro[ray]')"
    nodes = RayNodes(tempfile.mkdtemp(prefix="fbray"), env)  # short: Ray's socket paths must fit in 107 bytes
    try:
        nodes.start(nodes_wanted)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        nodes.stop()
        return None, f"could not start a two-node Ray cluster: {' '.join(str(exc).split())[:400]}"
    return nodes, ""


# ---------------------------------------------------------------------------------------------- driving them
# A plug-in for the fault tests: after each round a worker records, it pauses ``seconds`` (no CPU used), so a run is
# still in progress when a fault is injected however loaded the machine is, by design rather than by the speed of
# its training. It registers no name, so no spec, spec hash or curve changes: the calm reference trains without it.
SLOW_ROUNDS = '''"""Test-only: a pause of {seconds} s after every round a worker records (the curves are unchanged)."""
import time

from fedbench.execution import worker

_record = worker.RegistrySink.log_round


def _log_round_then_pause(self, record):
    _record(self, record)
    time.sleep({seconds})


worker.RegistrySink.log_round = _log_round_then_pause
'''


def slow_rounds_plugin(folder: Path, seconds: float = 1.0) -> Path:
    """The ``--plugin`` file that makes every recorded round last at least ``seconds`` more (``SLOW_ROUNDS``)."""
    path = folder / "slow_rounds.py"
    path.write_text(SLOW_ROUNDS.format(seconds=seconds))
    return path


def fedbench_command(*args: str) -> list[str]:
    """`fedbench ARGS` in a process of its own (a hang is then a timeout, and the engines' clients see the env)."""
    return [sys.executable, "-m", "fedbench.cli", *args]


def run_fedbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(fedbench_command(*args), capture_output=True, text=True, timeout=timeout, check=False)


def curves(url: str) -> dict[str, list[tuple]]:
    """Every run's curve, by spec hash: what a calm run and one through faults must share bit for bit."""
    from fedbench.registry import Registry  # local: the fixtures module is imported before any test needs torch

    registry = Registry(url)
    return {
        r.spec_hash: [(x.round, x.test_acc, x.test_loss, x.train_loss) for x in registry.curve(r.id)]
        for r in registry.runs()
    }


def wait_for(what: str, found, seconds: float = 240, process: subprocess.Popen | None = None):
    """Poll ``found()`` until it returns something true (returned); fails the test after ``seconds``, or at once if
    ``process`` ended meanwhile."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"fedbench ended before {what}: {(out + err)[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"no {what} after {seconds} s")


def running_run(url: str, min_rounds: int = 2, where=lambda run: True):
    """A run of the registry in progress with at least ``min_rounds`` recorded (so a checkpoint is on disk), of those
    ``where`` accepts (e.g. on a given node: several runs may be in progress at once), or None (also while the
    registry does not exist yet)."""
    from fedbench.registry import Registry  # local: as in ``curves``

    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return None
    runs = Registry(url).runs()
    return next((r for r in runs if r.status == "running" and r.rounds_done >= min_rounds and where(r)), None)
