"""Shared fixtures: the repo root, the benchmark data folder, and a CLI runner with an isolated MLflow store."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("MCQ_DATA_DIR", REPO.parent / "shared" / "data")).resolve()

needs_data = pytest.mark.skipif(not DATA_DIR.is_dir(), reason=f"benchmark files absent: {DATA_DIR} (../shared/data) not found")


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory) -> Path:
    """An MLflow SQLite store with its tables made: creating them (migrations) costs seconds per store."""
    from mlflow.tracking import MlflowClient

    db = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    return db


@pytest.fixture
def run_cli(tmp_path, empty_mlflow_db):
    """Run `python -m src.run ARGS` with its MLflow store, response cache and outputs inside tmp_path."""
    (tmp_path / "mlruns").mkdir(exist_ok=True)
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlruns" / "mlflow.db")

    def run(*args: str, multirun: bool = False, timeout: int = 600, check: bool = True) -> subprocess.CompletedProcess:
        own_store = any(a.startswith("tracking.uri=") for a in args)
        store = [] if own_store else [f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db"]
        if not any(a.startswith("cache.") for a in args):
            store.append(f"cache.path={tmp_path}/cache.db")
        dirs = [f"hydra.sweep.dir={tmp_path}/multirun"] if multirun else [f"hydra.run.dir={tmp_path}/out"]
        cmd = [sys.executable, "-m", "src.run", *(["-m"] if multirun else []), *args, *store, *dirs]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "MCQ_DATA_DIR": str(DATA_DIR), "TQDM_DISABLE": "1"})
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\nSTDOUT:\n{proc.stdout[-3000:]}\nSTDERR:\n{proc.stderr[-5000:]}")
        return proc

    run.store_uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    run.tmp = tmp_path
    return run


def mlflow_runs(uri: str, experiment: str = "mcq-consistency", *, kind: str = "job"):
    """The job runs of an experiment (kind="job"), or its sweep parent runs (kind="sweep"), as MLflow Runs."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    runs = client.search_runs([exp.experiment_id])
    return client, [r for r in runs if r.data.tags.get("kind", "job") == kind]
