"""A shared PostgreSQL registry restarted while workers train: `fedbench run --jobs 2` on a server of its own
(tests/postgres_server.py), the server shut down (``pg_ctl stop -m fast``: "terminating connection due to
administrator command") once the registry shows a run in progress, and started again once a worker has said it is
retrying. The workers reconnect (one line per retry, the password masked), and the batch ends with every run done
once, every round stored once, and the curves of a calm run of the same specs, bit for bit.

Nothing waits on the clock: the runs last long in wall time by design (a plug-in pauses 1 s after each recorded round,
tests/cluster_fixtures.py), the server is stopped when the registry shows a run mid-way, and started again when a
retry line has been printed (a run in progress must write to the registry again before it can end)."""

from __future__ import annotations

import re
import subprocess

import pytest
from cluster_fixtures import curves, fedbench_command, run_fedbench, slow_rounds_plugin, wait_for
from sqlalchemy import func, select

from fedbench.registry import Registry
from fedbench.registry.tables import rounds
from postgres_server import server_or_skip

pytestmark = pytest.mark.slow

ROUNDS = 10  # each at least 1 s (the plug-in): the server is stopped within the first few
SPECS = ("--scale", "smoke", "--set", f"rounds={ROUNDS}")  # fedavg and fedprox, seed 0: one run per worker
PASSWORD = "not-a-real-secret"  # the server trusts every local connection: the password is never asked for


@pytest.fixture
def server():
    """A PostgreSQL server of this test alone (it is restarted), stopped and deleted after it."""
    with server_or_skip() as started:
        yield started


def registry_state(url: str):
    """The runs, or None while the server is down (the test's own reads are not the workers' retries)."""
    try:
        return Registry(url).runs()
    except Exception:
        return None


def test_workers_reconnect_to_a_restarted_registry_and_lose_or_duplicate_nothing(server, tmp_path, write_recipe):
    recipe = write_recipe()
    url = server.create_database().replace("fedbench@", f"fedbench:{PASSWORD}@")
    plugin = slow_rounds_plugin(tmp_path)
    args = ("run", str(recipe), *SPECS, "--registry", url, "--jobs", "2", "--plugin", str(plugin))
    out_file, err_file = tmp_path / "out.txt", tmp_path / "err.txt"
    # run from the test's folder: a PostgreSQL registry keeps its checkpoints under registry/ there
    with open(out_file, "w") as out, open(err_file, "w") as err:
        batch = subprocess.Popen(fedbench_command(*args), stdout=out, stderr=err, text=True, cwd=tmp_path)
    try:

        def mid_way():
            runs = registry_state(url)
            return next((r for r in runs or [] if r.status == "running" and r.rounds_done >= 1), None)

        caught = wait_for("a run in progress", mid_way, process=batch)
        assert caught.rounds_done < ROUNDS - 1, caught.rounds_done  # its next rounds and its finish are still to come
        server.shut_down()
        wait_for("a worker retrying", lambda: "connection lost" in err_file.read_text(), seconds=120, process=batch)
        server.start_again()
        batch.wait(timeout=300)
    finally:
        batch.kill()
    out, err = out_file.read_text(), err_file.read_text()
    assert batch.returncode == 0, out + err
    assert "2/2 runs" in out and "3/2 runs" not in out, out
    assert "Traceback" not in err and PASSWORD not in out + err, err
    masked = re.escape(f"postgresql+psycopg://fedbench:***@127.0.0.1:{server.port}/") + r"test_\d+"
    retries = re.findall(rf"registry {masked}: connection lost \([^)]*\); retry (\d+) of (\d+) in [\d.]+ s", err)
    assert retries and all(1 <= int(n) <= int(total) for n, total in retries), err
    assert len(retries) == sum("connection lost" in line for line in err.splitlines()), err  # one line each

    registry = Registry(url)
    runs = registry.runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"done"}, [(r.status, r.error) for r in runs]
    with registry.engine.connect() as connection:
        stored = connection.execute(
            select(rounds.c.run_id, rounds.c.round, func.count()).group_by(rounds.c.run_id, rounds.c.round)
        ).all()
    assert len(stored) == 2 * ROUNDS and all(count == 1 for *_, count in stored), stored
    calm_url = f"sqlite:///{tmp_path / 'calm.db'}"
    calm = run_fedbench("run", str(recipe), *SPECS, "--registry", calm_url)  # in process, without the plug-in
    assert calm.returncode == 0, calm.stdout + calm.stderr
    assert curves(url) == curves(calm_url)
    assert all(len(curve) == ROUNDS for curve in curves(url).values())
