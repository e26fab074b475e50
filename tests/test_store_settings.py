"""The tracking settings a job and the other commands read before any compute (src/tracking/store.py), on what
mutation run 12 (docs/mutation.md) found no fast test checking:

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
