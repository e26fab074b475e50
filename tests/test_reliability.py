"""Interrupted runs lose nothing, parallel jobs corrupt nothing, a dead tracking store costs no compute."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pandas as pd
import pytest

from src.tracking.records import read_run_records

from .conftest import DATA_DIR, REPO, mlflow_runs, needs_data

VOLATILE = ["run_id", "cache_hit"]  # differ between two runs of the same job by design


def records_of(client, run) -> pd.DataFrame:
    return read_run_records(run.info.run_id, client.tracking_uri)


def stable(records: pd.DataFrame) -> pd.DataFrame:
    return (
        records.drop(columns=VOLATILE).sort_values(["question_id", "variant_id", "repetition"]).reset_index(drop=True)
    )


@pytest.mark.promise(
    "docs/clusters.md",
    "a stopped job's run ends KILLED (interrupted=true); run again, it resumes from the response cache",
)
@pytest.mark.slow
def test_killed_run_resumes_from_cache_and_matches_uninterrupted(run_job_in, tmp_path):
    job = [
        "model=simulated",
        "model.latency_ms=10",
        "benchmark.n_questions=24",
        "variants=cora",
        "scoring=generate",
        "temperature=0.7",
        "repetitions=2",
    ]
    cache = f"cache.path={tmp_path}/cache.db"
    cmd = [
        sys.executable,
        "-m",
        "src.run",
        *job,
        cache,
        f"tracking.uri=sqlite:///{tmp_path}/killed/mlflow.db",
        f"hydra.run.dir={tmp_path}/killed-out",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TQDM_DISABLE": "1", "MCQ_DATA_DIR": str(DATA_DIR)},
        start_new_session=True,
    )
    deadline = time.time() + 120
    cached = 0
    while time.time() < deadline and cached < 300:  # wait until some chunks are committed, then kill -9
        time.sleep(0.5)
        if (tmp_path / "cache.db").exists():
            try:
                cached = sqlite3.connect(tmp_path / "cache.db").execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    # the precondition of everything below: the kill lands mid-run, its run RUNNING with some trials committed
    assert proc.poll() is None, "the run finished before it could be interrupted; make it longer"
    assert cached >= 300, f"only {cached} trials committed in 120 s: the kill would not test a resume"
    assert job_statuses(f"sqlite:///{tmp_path}/killed/mlflow.db") == ["RUNNING"], (
        "the job's run is not RUNNING when it is killed"
    )
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
    fresh_job = [a for a in job if not a.startswith("model.latency_ms=")]
    run_job_in(*fresh_job, f"cache.path={tmp_path}/fresh.db", f"tracking.uri=sqlite:///{tmp_path}/fresh/mlflow.db")
    client2, (fresh,) = mlflow_runs(f"sqlite:///{tmp_path}/fresh/mlflow.db")
    pd.testing.assert_frame_equal(stable(resumed_records), stable(records_of(client2, fresh)))
    assert resumed.data.metrics == pytest.approx(
        {
            **fresh.data.metrics,
            "seconds": resumed.data.metrics["seconds"],
            "cache_hit_rate": resumed.data.metrics["cache_hit_rate"],
        }
    )


@needs_data
@pytest.mark.slow
def test_the_same_command_twice_never_marks_a_live_run_killed(tmp_path):
    """Two identical jobs, the second started once the first's run is RUNNING: the second finds it, sees that its
    owner process lives (src/common/owners.py, the run's `owner` tag), leaves it alone and makes a run of its own;
    both finish. The precondition is asserted: the first's run was RUNNING when the second started and the two
    runs overlapped in time: the first job's backend takes 40 s (16 prompts at 2.5 s, asleep, no CPU), so that the
    second, started as a new process on a loaded machine, makes its run before the first ends."""
    store = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    cmd = [
        sys.executable,
        "-m",
        "src.run",
        "model=simulated",
        "model.latency_ms=2500",
        "limit=16",
        "cache.enabled=false",
        f"tracking.uri={store}",
    ]
    env = {**os.environ, "TQDM_DISABLE": "1", "MCQ_DATA_DIR": str(DATA_DIR)}
    first = subprocess.Popen(
        [*cmd, f"hydra.run.dir={tmp_path}/a"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while "RUNNING" not in job_statuses(store):  # the first job has made its run and is answering
        assert first.poll() is None and time.time() < deadline, (
            "the first job ended, or made no run in 120 s, before the second started: " + first.communicate()[1][-3000:]
        )
        time.sleep(0.2)
    second = subprocess.Popen(
        [*cmd, f"hydra.run.dir={tmp_path}/b"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for proc in (first, second):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    _, runs = mlflow_runs(store)
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    assert not any("interrupted" in r.data.tags for r in runs)
    assert len({r.data.tags["owner"] for r in runs}) == 2
    early, late = sorted(runs, key=lambda r: r.info.start_time)
    assert late.info.start_time < early.info.end_time, "the second job started after the first had finished"


def job_statuses(store: str) -> list[str]:
    """The statuses of the store's runs, read while jobs write to it (none while it has no experiment yet)."""
    from mlflow.tracking import MlflowClient

    from src.tracking.store import open_store, with_retries

    open_store(store)  # under the store's creation lock: never beside a job that is creating its schema
    client = MlflowClient(tracking_uri=store)
    experiment = with_retries(lambda: client.get_experiment_by_name("mcq-consistency"))
    if experiment is None:
        return []
    return [r.info.status for r in with_retries(lambda: client.search_runs([experiment.experiment_id]))]


def test_only_runs_of_dead_processes_are_marked_killed(tmp_path, empty_mlflow_db):
    import shutil

    from mlflow.tracking import MlflowClient

    from src.common import owners
    from src.tracking.dead_runs import mark_interrupted_runs

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.create_experiment("e")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    beat = str(int(time.time()))
    owner_tags = {
        "live": {"owner": owners.this_owner()},
        "dead": {"owner": f"{owners.host()}:{gone.pid}"},
        "far_fresh": {"owner": "otherhost:1", "heartbeat": beat},
        "far_stale": {"owner": "otherhost:1", "heartbeat": str(int(time.time()) - 3600)},
        "no_owner": {},
    }
    made = {
        name: client.create_run(exp, tags={"config_hash": "h", **tags}).info.run_id for name, tags in owner_tags.items()
    }
    mark_interrupted_runs(client, exp, "h")
    status = {name: client.get_run(run_id).info.status for name, run_id in made.items()}
    assert status == {
        "live": "RUNNING",
        "dead": "KILLED",
        "far_fresh": "RUNNING",
        "far_stale": "KILLED",
        "no_owner": "KILLED",
    }


@pytest.mark.promise(
    "docs/clusters.md", "a job run left RUNNING by a killed worker is marked KILLED when the sweep ends"
)
def test_a_sweep_marks_its_job_runs_left_by_a_dead_process_killed_at_its_end(tmp_path):
    """A job whose process was killed outright (SIGKILL, out of memory: a Ray or Slurm worker) could not end its run;
    the sweep's end marks it KILLED. A run of a live process, and the runs of another sweep, are left as they are."""
    from src.common import owners
    from src.sweep.callback import MlflowSweepCallback

    from .test_offline_mode import sweep_config

    tracking = [f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.offline_dir={tmp_path}/offline"]
    _, config = sweep_config(tmp_path, "s", tracking)  # an offline folder of its own, not the shared default
    callback = MlflowSweepCallback()
    callback.sweep_dir = tmp_path / "s" / "sweep"
    callback.sweep_dir.mkdir(parents=True)
    callback._open_parent(config)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    client, exp = callback.client, callback.experiment_id
    made = {
        name: client.create_run(exp, tags={"kind": "job", "sweep_id": sweep, "owner": owner}).info.run_id
        for name, sweep, owner in (
            ("dead", callback.sweep_id, f"{owners.host()}:{gone.pid}"),
            ("live", callback.sweep_id, owners.this_owner()),
            ("other_sweep", "another", f"{owners.host()}:{gone.pid}"),
        )
    }
    callback.finish(interrupted=False)
    status = {name: client.get_run(run_id).info.status for name, run_id in made.items()}
    assert status == {"dead": "KILLED", "live": "RUNNING", "other_sweep": "RUNNING"}
    assert client.get_run(made["dead"]).data.tags["interrupted"] == "true"


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


def test_the_json_line_holds_the_headline_for_a_new_and_a_skipped_run(run_job_in):
    """A script reads a condition's headline from stdout: `acc_mean` where the run asked each question more than
    once (never only `mcqa`, one sampled draw), and a rerun that finds the run finished prints the same numbers."""
    args = ("model=simulated", "limit=20", "repetitions=3", "temperature=0.7")
    first = json.loads(run_job_in(*args).summary())
    again = json.loads(run_job_in(*args).summary())
    assert list(first)[:2] == ["run_id", "acc_mean"] and "mcqa" in first, first
    assert first["acc_mean_ci"][0] <= first["acc_mean"] <= first["acc_mean_ci"][1]  # its interval beside it
    assert again.pop("skipped") == "already finished" and "skipped" not in first
    assert again == first


def test_a_killed_or_running_run_of_the_same_config_is_not_taken_for_finished(run_job_in):
    """resume skips a job only for a FINISHED run of its config: after a KILLED run the job runs again, and beside
    a RUNNING one whose process still lives (here: this one) it makes a run of its own, leaving that one alone."""
    from src.common import owners

    job = ("model=simulated", "limit=3")
    killed = run_job_in(*job)
    client, _ = mlflow_runs(run_job_in.store_uri)
    client.set_terminated(killed.run_id, "KILLED")
    after_killed = run_job_in(*job)
    assert not after_killed.skipped and after_killed.run_id != killed.run_id
    client.update_run(after_killed.run_id, status="RUNNING")
    client.set_tag(after_killed.run_id, "owner", owners.this_owner())  # alive: not marked KILLED by the rerun
    beside_running = run_job_in(*job)
    assert not beside_running.skipped and beside_running.run_id not in (killed.run_id, after_killed.run_id)
    status = {r.info.run_id: r.info.status for r in mlflow_runs(run_job_in.store_uri)[1]}
    assert status == {killed.run_id: "KILLED", after_killed.run_id: "RUNNING", beside_running.run_id: "FINISHED"}
    assert run_job_in(*job).run_id == beside_running.run_id  # the FINISHED one is found, and only it
    client.set_terminated(after_killed.run_id, "KILLED")  # no run left RUNNING


def test_a_run_of_another_host_is_dead_once_its_heartbeat_is_older_than_stale_s():
    """The rerun marks KILLED only what is provably dead: another host's run by its heartbeat, alive up to and at
    STALE_S seconds, dead after; a heartbeat that is no number, or none, proves nothing alive."""
    from src.tracking.dead_runs import STALE_S, provably_dead

    tags = {"owner": "another_host:12", "heartbeat": "1000.0"}
    assert not provably_dead(tags, now=1000.0 + STALE_S)
    assert provably_dead(tags, now=1000.0 + STALE_S + 0.5)
    assert provably_dead({**tags, "heartbeat": "soon"}, now=1000.0)
    assert provably_dead({"owner": "another_host:12"}, now=1000.0)


@pytest.mark.parametrize(
    "sampling", [["temperature=0"], ["temperature=0.7", "repetitions=4"]], ids=["greedy", "sampled"]
)
def test_simulated_records_are_byte_identical_across_runs(run_job_in, tmp_path, sampling):
    job = [
        "model=simulated",
        "benchmark.n_questions=20",
        "variants=cora",
        "scoring=generate",
        "cache.enabled=false",
        "resume=false",
        *sampling,
    ]
    run_job_in(*job)
    run_job_in(*job)
    client, runs = mlflow_runs(run_job_in.store_uri)
    a, b = (stable(records_of(client, r)) for r in runs)
    a.to_parquet(tmp_path / "a.parquet"), b.to_parquet(tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
