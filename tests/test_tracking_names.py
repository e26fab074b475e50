"""The names MLflow sees (src/tracking/names.py): a metric name with '@' round-trips through MLflow's allowed
characters, and a server this project starts runs without MLflow's job runner."""

from __future__ import annotations

import re

from src.tracking import names

MLFLOW_NAME = re.compile(r"^[/\w.\- :]+$")  # what MLflow accepts in a metric name


def test_per_set_metric_names_round_trip_through_mlflows_allowed_characters():
    for name in ("wacc@cyclic", "mcqa", "rws_lo@permuted", "acc/law"):
        stored = names.mlflow_metric_name(name)
        assert MLFLOW_NAME.match(stored) and names.metric_name(stored) == name
    assert names.mlflow_metric_name("wacc@cyclic") == "wacc_at_cyclic"


def test_a_server_this_project_starts_has_mlflows_job_runner_off(monkeypatch):
    from mlflow.environment_variables import MLFLOW_SERVER_ENABLE_JOB_EXECUTION as JOBS

    monkeypatch.delenv(JOBS.name, raising=False)
    assert JOBS.get() is True  # MLflow's default: on
    for name, value in names.SERVER_ENV.items():
        monkeypatch.setenv(name, value)
    assert JOBS.get() is False


def test_the_mlflow_ui_command_the_docs_give_opens_the_store_runs_go_to_by_default():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "tracking.md").read_text()
    [uri] = set(re.findall(r"mlflow ui --backend-store-uri (\S+)", page))
    assert uri == names.DEFAULT_URI


def test_a_param_is_cut_where_mlflow_cuts_it():
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

    assert names.PARAM_LIMIT == MAX_PARAM_VAL_LENGTH
    assert names.param_text("x" * (MAX_PARAM_VAL_LENGTH + 1)) == "x" * MAX_PARAM_VAL_LENGTH
    assert names.param_text(None) == "null" and names.param_text(3) == "3"
