"""`tracking.offline=true` never contacts the tracking server (neither the job nor the sweep callback), an offline
run carries the same tags as an online run of the same sweep (sweep id and parent run included), and `src.sync`
keeps them, linking each job to the uploaded parent run (no data lost offline). In-process: no subprocess,
no server; a server address where nothing listens, and every TCP connection attempt recorded and refused."""

from __future__ import annotations

import shutil
import socket

import pytest
from omegaconf import OmegaConf, open_dict

from src.common.errors import UserError
from src.config.compose import compose_job
from src.job.runner import run_job
from src.sweep.callback import MlflowSweepCallback, read_sweep_info
from src.tracking.store import check_tracking

from .conftest import DATA_DIR, mlflow_runs

SERVER = "http://127.0.0.1:9"  # the discard port: nothing answers there
# differ between any two runs by design (ids, times, where the job ran), or say where a run was logged
VARYING = {"mlflow.parentRunId", "sweep_id", "owner", "heartbeat", "offline_target", "synced_from", "synced_run_id"}


@pytest.fixture
def no_network(monkeypatch):
    """Every IP connection attempt is recorded and refused; Unix sockets (none expected) pass."""
    attempts: list[object] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guard(real):
        def connect(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6):
                attempts.append(address)
                raise ConnectionRefusedError(f"test: no connection may be made ({address})")
            return real(self, address)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guard(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guard(real_connect_ex))
    return attempts


def sweep_config(tmp_path, name: str, tracking: list[str]):
    """The composed config of a two-job sweep (seed=0,1) as the callback sees it, with its hydra node."""
    job = ["model=simulated", "limit=3", f"data_dir={DATA_DIR}", f"cache.path={tmp_path}/cache.db", *tracking]
    config = compose_job(job)
    with open_dict(config):
        config.hydra = OmegaConf.create(
            {
                "sweeper": {
                    "_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
                    "params": {"seed": "0,1"},
                },
                "overrides": {"task": job},
                "sweep": {"dir": str(tmp_path / name / "sweep")},
            }
        )
    return job, config


def run_sweep(tmp_path, name: str, tracking: list[str]):
    """The sweep callback's parent run, its two jobs (each with the sweep ids the callback wrote) and the end."""
    job, config = sweep_config(tmp_path, name, tracking)
    callback = MlflowSweepCallback()
    callback.sweep_dir = tmp_path / name / "sweep"
    callback.sweep_dir.mkdir(parents=True)
    callback._open_parent(config)
    sweep = read_sweep_info(callback.sweep_dir)
    results = [
        run_job(compose_job([*job, f"seed={seed}"]), out_dir=tmp_path / name / str(seed), sweep=sweep)
        for seed in (0, 1)
    ]
    callback.finish(interrupted=False)
    return callback, results


def tag_keys(run) -> set[str]:
    return set(run.data.tags) - VARYING


@pytest.mark.slow  # two sweeps and a sync, in-process
def test_offline_sweep_contacts_no_server_and_keeps_tags_parent_and_sweep_id_through_sync(
    tmp_path, monkeypatch, no_network, empty_mlflow_db
):
    from src.sync import sync

    for store in ("online", "offline", "server"):  # stores with their tables made: migrations cost seconds each
        (tmp_path / store).mkdir()
        shutil.copyfile(empty_mlflow_db, tmp_path / store / "mlflow.db")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.chdir(tmp_path)
    offline = tmp_path / "offline"
    online_uri = f"sqlite:///{tmp_path}/online/mlflow.db"

    # the same sweep logged online (to a sqlite store) and offline (the server address refuses connections)
    run_sweep(tmp_path, "online", [f"tracking.uri={online_uri}"])
    callback, results = run_sweep(
        tmp_path, "offline", [f"tracking.uri={SERVER}", "tracking.offline=true", f"tracking.offline_dir={offline}"]
    )
    assert no_network == [], "offline mode tried to reach the server"
    assert callback.parent_uri == f"sqlite:///{offline}/mlflow.db"

    _, online_jobs = mlflow_runs(online_uri)
    _, (online_parent,) = mlflow_runs(online_uri, kind="sweep")
    offline_uri = f"sqlite:///{offline}/mlflow.db"
    _, offline_jobs = mlflow_runs(offline_uri)
    _, (offline_parent,) = mlflow_runs(offline_uri, kind="sweep")
    assert len(online_jobs) == len(offline_jobs) == 2
    assert tag_keys(online_jobs[0]) == tag_keys(online_jobs[1])
    assert tag_keys(offline_jobs[0]) == tag_keys(online_jobs[0]), "an offline job run has the online run's tags"
    assert tag_keys(offline_parent) == tag_keys(online_parent), "the offline parent run has the online one's tags"
    for jobs, parent in ((online_jobs, online_parent), (offline_jobs, offline_parent)):
        for run in jobs:
            assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
            assert run.data.tags["sweep_id"] == parent.data.tags["sweep_id"]
    assert all("offline_target" in r.data.tags for r in [*offline_jobs, offline_parent])

    # `src.sync` (the server is back: a sqlite store at the address the runs name) keeps every tag
    target = f"sqlite:///{tmp_path}/server/mlflow.db"
    copied = sync(offline, to=target)
    assert len(copied) == 3
    assert no_network == []
    _, synced_jobs = mlflow_runs(target)
    _, (synced_parent,) = mlflow_runs(target, kind="sweep")
    assert tag_keys(synced_parent) == tag_keys(online_parent)
    assert synced_parent.data.tags["sweep_id"] == offline_parent.data.tags["sweep_id"]
    assert sorted(r.data.tags["synced_from"] for r in synced_jobs) == sorted(r.info.run_id for r in offline_jobs)
    for run in synced_jobs:
        assert tag_keys(run) == tag_keys(online_jobs[0]), "a synced job run has the online run's tags"
        assert run.data.tags["mlflow.parentRunId"] == synced_parent.info.run_id, "linked to the uploaded parent"
        assert run.data.tags["sweep_id"] == offline_parent.data.tags["sweep_id"]
        assert run.info.status == "FINISHED"


def test_offline_job_alone_contacts_no_server(tmp_path, monkeypatch, no_network, empty_mlflow_db):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    offline = tmp_path / "offline"
    offline.mkdir()
    shutil.copyfile(empty_mlflow_db, offline / "mlflow.db")
    job = [
        "model=simulated",
        "limit=2",
        f"data_dir={DATA_DIR}",
        f"cache.path={tmp_path}/c.db",
        f"tracking.uri={SERVER}",
        "tracking.offline=true",
        f"tracking.offline_dir={offline}",
    ]
    result = run_job(compose_job(job), out_dir=tmp_path / "out")
    assert (offline / "mlflow.db").is_file() and result.run_id
    assert no_network == [], "offline mode tried to reach the server"
    with pytest.raises(UserError, match="unreachable"):  # the guard sees an online job's health check
        check_tracking(SERVER)
    assert no_network == [("127.0.0.1", 9)]
