"""Parallel first use of a fresh SQLite store and a fresh response cache: independent `python -m src.run`
processes started at the same instant all finish, with no traceback (MLflow's schema creation runs once, under a
lock beside the database: `src.tracking.store.open_store`)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from src.tracking.records import read_run_records

from .conftest import DATA_DIR, REPO, mlflow_runs

N_PROCESSES = 8  # 4 at once exercises the same path; 8 is the count the store is promised to hold


@pytest.mark.promise(
    "docs/launchers.md", "8 src.run processes started at once on a fresh SQLite store and cache all finish"
)
@pytest.mark.slow
def test_simultaneous_processes_on_a_fresh_store_and_cache_all_finish(tmp_path):
    store = f"sqlite:///{tmp_path}/mlruns/mlflow.db"  # does not exist yet: every process finds it missing
    env = {**os.environ, "MCQ_DATA_DIR": str(DATA_DIR), "TQDM_DISABLE": "1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "src.run",
                "model=simulated",
                "limit=2",
                f"seed={i}",
                f"tracking.uri={store}",
                f"cache.path={tmp_path}/cache.db",
                f"hydra.run.dir={tmp_path}/out{i}",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(N_PROCESSES)
    ]
    # the race's precondition: the processes ran at the same time, every one started against a missing store (it
    # takes seconds to import MLflow, then to make the store). Their MLflow runs do not overlap: the first use's
    # lock lets one process at a time through (MLflow's first call under it, about 0.5 s here), and each logs its
    # run in less (0.14-0.3 s; three runs of this test, 2026-11-26), so this is the race of first use, not of
    # parallel writes to the store
    assert all(p.poll() is None for p in procs), "a process had already exited before the last was started"
    assert not (tmp_path / "mlruns" / "mlflow.db").exists(), "the store was made before the last process started"
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outputs):
        assert p.returncode == 0 and "Traceback" not in err, f"exit {p.returncode}\n{err[-3000:]}"
    client, runs = mlflow_runs(store)
    assert len(runs) == N_PROCESSES and {r.info.status for r in runs} == {"FINISHED"}
    assert sorted(r.data.params["seed"] for r in runs) == [str(i) for i in range(N_PROCESSES)]
    n_trials = sum(len(read_run_records(r.info.run_id, store)) for r in runs)
    assert n_trials == sum(r.data.metrics["n_trials"] for r in runs) > 0  # every record present
    cached = sqlite3.connect(tmp_path / "cache.db").execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    assert cached == n_trials  # one cache entry per trial: none lost to the first-use race of the cache
