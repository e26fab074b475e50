"""Interrupted runs lose nothing, parallel jobs corrupt nothing, a dead tracking store costs no compute."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pandas as pd
import pytest

from src.records import read_run_records

from .conftest import DATA_DIR, REPO, mlflow_runs, needs_data

VOLATILE = ["run_id", "cache_hit"]  # differ between two runs of the same job by design


def records_of(client, run) -> pd.DataFrame:
    return read_run_records(run.info.run_id, client.tracking_uri)


def stable(records: pd.DataFrame) -> pd.DataFrame:
    return records.drop(columns=VOLATILE).sort_values(["question_id", "variant_id", "repetition"]).reset_index(drop=True)


@pytest.mark.slow
def test_killed_run_resumes_from_cache_and_matches_uninterrupted(run_job_in, tmp_path):
    job = ["model=simulated", "model.delay_s=0.01", "benchmark.n_questions=60", "variants=cora",
           "scoring=generate", "temperature=0.7", "repetitions=2"]
    cache = f"cache.path={tmp_path}/cache.db"
    cmd = [sys.executable, "-m", "src.run", *job, cache, f"tracking.uri=sqlite:///{tmp_path}/killed/mlflow.db",
           f"hydra.run.dir={tmp_path}/killed-out"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TQDM_DISABLE": "1", "MCQ_DATA_DIR": str(DATA_DIR)}, start_new_session=True)
    deadline = time.time() + 120
    cached = 0
    while time.time() < deadline and cached < 300:  # wait until some chunks are committed, then kill -9
        time.sleep(0.5)
        if (tmp_path / "cache.db").exists():
            try:
                cached = sqlite3.connect(tmp_path / "cache.db").execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    assert proc.poll() is None, "the run finished before it could be interrupted; make it longer"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    cached = sqlite3.connect(tmp_path / "cache.db").execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    run_job_in(*job, cache, f"tracking.uri=sqlite:///{tmp_path}/killed/mlflow.db")
    client, runs = mlflow_runs(f"sqlite:///{tmp_path}/killed/mlflow.db")
    (resumed,) = [r for r in runs if r.info.status == "FINISHED"]
    (killed,) = [r for r in runs if r.info.status == "KILLED"]  # the interrupted run is marked, not left RUNNING
    assert killed.data.tags["interrupted"] == "true"
    resumed_records = records_of(client, resumed)
    # every trial committed before the kill was served from the cache, not recomputed
    assert resumed_records.cache_hit.sum() == cached > 0
    assert resumed_records.cache_hit.sum() < len(resumed_records)

    # the uninterrupted reference, without the delay that only made the first run slow enough to kill
    fresh_job = [a for a in job if not a.startswith("model.delay_s=")]
    run_job_in(*fresh_job, f"cache.path={tmp_path}/fresh.db", f"tracking.uri=sqlite:///{tmp_path}/fresh/mlflow.db")
    client2, (fresh,) = mlflow_runs(f"sqlite:///{tmp_path}/fresh/mlflow.db")
    pd.testing.assert_frame_equal(stable(resumed_records), stable(records_of(client2, fresh)))
    assert resumed.data.metrics == pytest.approx({**fresh.data.metrics, "seconds": resumed.data.metrics["seconds"],
                                                  "cache_hit_rate": resumed.data.metrics["cache_hit_rate"]})


@needs_data
@pytest.mark.slow
def test_four_parallel_jobs_share_store_and_cache(run_cli, tmp_path):
    run_cli("hydra/launcher=joblib", "hydra.launcher.n_jobs=4", "model=simulated",
            "benchmark=synthetic,medqa,arc_easy,mmlu", "limit=25", "scoring=generate", "temperature=0.7",
            "repetitions=3", f"cache.path={tmp_path}/cache.db", multirun=True)
    client, runs = mlflow_runs(run_cli.store_uri)
    assert sorted(r.data.tags["benchmark"] for r in runs) == ["arc_easy", "medqa", "mmlu", "synthetic"]
    assert all(r.info.status == "FINISHED" for r in runs)
    n_trials = sum(len(records_of(client, r)) for r in runs)
    # one cache entry per sampled trial: none lost, none duplicated
    assert sqlite3.connect(tmp_path / "cache.db").execute("SELECT COUNT(*) FROM responses").fetchone()[0] == n_trials
    assert n_trials == sum(r.data.metrics["n_trials"] for r in runs)


def test_unreachable_tracking_server_fails_fast_naming_the_key(run_cli):
    start = time.time()
    proc = run_cli("model=simulated", "tracking.uri=http://127.0.0.1:9", "limit=3", check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert "tracking.uri" in line and "127.0.0.1:9" in line
    assert time.time() - start < 60


def test_offline_runs_upload_later_with_sync(run_job_in, tmp_path, capsys):
    from src.sync import main as sync

    offline = tmp_path / "offline"
    run_job_in("model=simulated", "limit=4", "tracking.offline=true", f"tracking.offline_dir={offline}")
    from mlflow.tracking import MlflowClient

    assert MlflowClient(tracking_uri=run_job_in.store_uri).get_experiment_by_name("mcq-consistency") is None  # not yet
    assert sync(["--offline-dir", str(offline)]) == 0
    assert "1 run(s) uploaded" in capsys.readouterr().out
    client, (run,) = mlflow_runs(run_job_in.store_uri)
    assert "synced_from" in run.data.tags and run.data.metrics["n_questions"] == 4
    assert len(records_of(client, run)) == run.data.metrics["n_trials"]
    assert sync(["--offline-dir", str(offline)]) == 0
    assert "0 run(s) uploaded" in capsys.readouterr().out


def test_finished_job_is_skipped_on_rerun_unless_resume_false(run_job_in):
    first = run_job_in("model=simulated", "limit=3")
    second = run_job_in("model=simulated", "limit=3")
    assert second.skipped and not first.skipped and second.run_id == first.run_id
    assert "already finished" in second.summary() and second.metrics == pytest.approx(first.metrics)
    assert not run_job_in("model=simulated", "limit=3", "resume=false").skipped
    _, runs = mlflow_runs(run_job_in.store_uri)
    assert len(runs) == 2


@pytest.mark.parametrize("sampling", [["temperature=0"], ["temperature=0.7", "repetitions=4"]], ids=["greedy", "sampled"])
def test_simulated_records_are_byte_identical_across_runs(run_job_in, tmp_path, sampling):
    job = ["model=simulated", "benchmark.n_questions=20", "variants=cora", "scoring=generate", "cache.enabled=false",
           "resume=false", *sampling]
    run_job_in(*job)
    run_job_in(*job)
    client, runs = mlflow_runs(run_job_in.store_uri)
    a, b = (stable(records_of(client, r)) for r in runs)
    a.to_parquet(tmp_path / "a.parquet"), b.to_parquet(tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
