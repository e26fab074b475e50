"""The tracking settings a job and the other commands read before any compute (src/tracking/store.py), on what
the mutation check (docs/mutation.md) found no fast test checking:

- `tracking.offline=true` logs to `tracking.offline_dir`'s SQLite file, `mlruns/offline` where it names none;
- the store check refuses MLflow's file store (a bare path, `file:`) for every command that reads a store, not only
  for the job's config check (compare, plan, recheck, sync read a `--tracking-uri` of their own);
- `tracking.retry_budget_s` holds from 0 to 600 seconds, both included."""

from __future__ import annotations

import pytest

from src.common.errors import UserError
from src.tracking import store


def test_an_offline_job_logs_to_its_offline_dir_or_to_mlruns_offline(tmp_path):
    assert store.job_tracking_uri({"uri": "http://h:5000", "offline": False}) == "http://h:5000"
    offline = {"uri": "http://h:5000", "offline": True}
    assert store.job_tracking_uri({**offline, "offline_dir": str(tmp_path)}) == f"sqlite:///{tmp_path}/mlflow.db"
    assert store.job_tracking_uri({**offline, "offline_dir": None}) == "sqlite:///mlruns/offline/mlflow.db"
    assert store.job_tracking_uri(offline) == "sqlite:///mlruns/offline/mlflow.db"


@pytest.mark.parametrize("uri", ["mlruns", "./runs/here", "file:///tmp/mlruns", "file:mlruns"])
def test_the_store_check_refuses_a_file_store_in_one_line(uri):
    with pytest.raises(UserError) as err:
        store.check_tracking(uri)
    said = str(err.value)
    assert said.startswith("config key tracking.uri: ") and "is a file store" in said and "\n" not in said


def test_the_store_check_leaves_a_database_uri_to_mlflow(tmp_path):
    """A database URI (postgresql://, mysql://) is no file store: nothing to create or probe before the job."""
    assert store.check_tracking("postgresql://user@db.example:5432/mlflow") is None
    assert store.check_tracking(f"sqlite:///{tmp_path}/new/mlflow.db") is None
    assert (tmp_path / "new").is_dir()  # a SQLite store's folder is made


@pytest.mark.parametrize("budget", [0, 0.0, 20, 599.5, 600, "600"])
def test_a_retry_budget_from_0_to_600_seconds_is_accepted(budget):
    store.check_options({"on_outage": "fail", "retry_budget_s": budget})


@pytest.mark.parametrize("budget", [-0.5, 600.5, 601, None])
def test_a_retry_budget_outside_0_to_600_seconds_is_one_line(budget):
    with pytest.raises(UserError) as err:
        store.check_options({"on_outage": "offline", "retry_budget_s": budget})
    assert str(err.value) == f"config key tracking.retry_budget_s: {budget} must be between 0 and 600 seconds"


def test_a_killed_store_creations_sqlite_files_are_removed_and_a_live_ones_kept(tmp_path, monkeypatch, empty_mlflow_db):
    """Before a store is made, SQLite's side files (`-journal`, `-wal`, `-shm`) of a temporary store whose creator
    died (this host, its pid gone) are removed; a living creator's, and files that are not SQLite's, are kept.
    MLflow's migrations are stood in for by a client that makes the file: seconds each (the store is a copy of the
    session's template, `empty_mlflow_db`, made before)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import mlflow.tracking

    from src.common import owners

    class MadeStore:
        def __init__(self, tracking_uri):
            self.path = Path(tracking_uri.removeprefix("sqlite:///"))

        def search_experiments(self, max_results):
            self.path.write_bytes(b"SQLite format 3\x00")

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = f".mlflow.db.tmp-{owners.host()}-{int(dead.stdout)}-0a1b2c3d"
    living = f".mlflow.db.tmp-{owners.host()}-{os.getpid()}-4e5f6a7b"
    kept = [f"{living}-journal", f"{killed}-notes"]
    for name in [f"{killed}-journal", f"{killed}-wal", f"{killed}-shm", *kept]:
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setattr(mlflow.tracking, "MlflowClient", MadeStore)
    store._create_sqlite_store(tmp_path / "mlflow.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "mlflow.db"])


def test_mlflows_retries_of_one_call_end_within_the_retry_budget():
    """urllib3 waits 0 s before the first retry, then 2, 4, 8 ... s (backoff factor 1), each but the first with up
    to 1 s of jitter: the retries allowed are the most whose waits fit in `tracking.retry_budget_s` (at most 10)."""

    def worst_wait(retries: int) -> int:
        return sum(2 ** (k - 1) + 1 for k in range(2, retries + 1))

    for tenths in range(0, 6001):
        budget = tenths / 10
        retries, timeout = store.client_retries(budget)
        assert worst_wait(retries) <= budget, budget  # the first retry, at once, fits any budget
        assert retries == 10 or worst_wait(retries + 1) > budget, budget
        assert timeout >= 5


def test_a_store_in_a_folder_that_exists_is_checked_without_complaint(tmp_path):
    """The SQLite store's folder is made when missing and taken as it is when it exists (a mutant:
    `check_tracking`'s `exist_ok`): a second job, or a folder the user made, is no error."""
    (tmp_path / "runs").mkdir()
    store.check_tracking(f"sqlite:///{tmp_path}/runs/mlflow.db")
    store.check_tracking(f"sqlite:///{tmp_path}/new/runs/mlflow.db")  # its parents made too
    assert (tmp_path / "new" / "runs").is_dir()
