"""A RUNNING run whose process is provably dead is marked KILLED, and only such a run (src/tracking/dead_runs.py):
on a real SQLite store, runs of a dead process of this host, of this live process, of another host with a fresh or
a stale heartbeat, and of no known owner."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time

import pytest

from src.common import owners
from src.tracking import dead_runs


@pytest.fixture
def client(tmp_path, empty_mlflow_db):
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    return MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")


def dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # ended and reaped: no process has this pid now
    return f"{owners.host()}:{child.pid}"


def test_only_runs_whose_process_is_provably_dead_are_marked_killed_and_their_ids_returned(client, caplog):
    exp = client.create_experiment("dead runs")
    now = time.time()

    def run(**tags: str) -> str:
        return client.create_run(exp, tags={"sweep_id": "s1", **tags}).info.run_id

    dead = [
        run(owner=dead_owner()),
        run(owner="elsewhere:7", heartbeat=str(now - dead_runs.STALE_S - 60)),  # another host, silent too long
        run(),  # no owner: logged before owners were tagged
    ]
    live = run(owner=owners.this_owner())
    fresh = run(owner="elsewhere:8", heartbeat=str(now))
    finished = run(owner=dead_owner())
    client.set_terminated(finished, "FINISHED")
    other_sweep = client.create_run(exp, tags={"sweep_id": "s2", "owner": dead_owner()}).info.run_id
    with caplog.at_level(logging.INFO, logger=dead_runs.__name__):
        marked = dead_runs.mark_dead_runs(client, exp, "tags.sweep_id = 's1'")
    assert sorted(marked) == sorted(dead)
    for run_id in dead:
        killed = client.get_run(run_id)
        assert killed.info.status == "KILLED" and killed.data.tags["interrupted"] == "true"
    statuses = {r: client.get_run(r).info.status for r in (live, fresh, finished, other_sweep)}
    assert statuses == {live: "RUNNING", fresh: "RUNNING", finished: "FINISHED", other_sweep: "RUNNING"}
    assert "interrupted" not in client.get_run(live).data.tags
    left = sorted(r.getMessage() for r in caplog.records)
    assert left == sorted(
        [
            f"run {live} is still running (owner {owners.this_owner()}): left as it is",
            f"run {fresh} is still running (owner elsewhere:8): left as it is",
        ]
    )


def test_a_rerun_marks_its_jobs_dead_runs_killed_and_leaves_other_jobs_runs(client):
    exp = client.create_experiment("reruns")
    mine = client.create_run(exp, tags={"config_hash": "h1", "owner": dead_owner()}).info.run_id
    other = client.create_run(exp, tags={"config_hash": "h2", "owner": dead_owner()}).info.run_id
    dead_runs.mark_interrupted_runs(client, exp, "h1")
    assert client.get_run(mine).info.status == "KILLED" and client.get_run(other).info.status == "RUNNING"


def test_a_heartbeat_is_fresh_up_to_stale_s_and_an_unreadable_one_is_dead():
    tags = {"owner": "elsewhere:1", "heartbeat": "1000"}
    assert dead_runs.provably_dead(tags, now=1000 + dead_runs.STALE_S) is False
    assert dead_runs.provably_dead(tags, now=1000 + dead_runs.STALE_S + 0.5) is True
    assert dead_runs.provably_dead({"owner": "elsewhere:1", "heartbeat": "soon"}) is True
    assert dead_runs.provably_dead({"owner": "not an owner"}) is True
