"""A run no job made (another tool's answers, src/ingest/run_log.py) is logged through MLflow's active run as a job
run would be (src/tracking/active_run.py): params as text (None as "null", cut at MLflow's limit), run-level finite
metrics only, per-subject values in subjects.csv, tags, and the folder's files as artifacts."""

from __future__ import annotations

import math
import shutil

import mlflow
import pandas as pd
import pytest
from mlflow.utils.file_utils import local_file_uri_to_path

from src.tracking import active_run, names, review, store


@pytest.fixture
def uri(tmp_path, empty_mlflow_db, monkeypatch) -> str:
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    yield uri
    mlflow.set_tracking_uri(None)


def test_an_ingested_run_has_its_params_finite_run_metrics_subjects_tags_and_files(uri, tmp_path):
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "records.jsonl").write_text('{"question_id": "q1"}\n')
    exp = store.experiment_id(store.client(uri), "ingested", uri)
    metrics = {"mcqa": 0.5, "rws": math.nan, "mcqa/law": 1.0, "mcqa_lo/law": 0.25, "mcqa/art": 0.0}
    with mlflow.start_run(experiment_id=exp) as run:
        active_run.log_run(
            mlflow,
            params={"model": "m1", "seed": None, "long": "y" * (names.PARAM_LIMIT + 1)},
            metrics=metrics,
            tags={"kind": "job", "source": "lm-eval"},
            artifacts_dir=artifacts,
        )
    logged = store.client(uri).get_run(run.info.run_id)
    assert logged.data.params == {"model": "m1", "seed": "null", "long": "y" * names.PARAM_LIMIT}
    assert logged.data.metrics == {"mcqa": 0.5}  # NaN (undefined) is not sent; per-subject values go to the table
    assert {"kind": "job", "source": "lm-eval"}.items() <= logged.data.tags.items()
    stored = local_file_uri_to_path(logged.info.artifact_uri)
    subjects = pd.read_csv(f"{stored}/{review.SUBJECTS_FILE}")
    assert subjects.fillna(-1.0).to_dict("records") == [  # -1: the empty cell, art has no bound
        {"subject": "art", "mcqa": 0.0, "mcqa_lo": -1.0},
        {"subject": "law", "mcqa": 1.0, "mcqa_lo": 0.25},
    ]
    assert open(f"{stored}/records.jsonl").read() == '{"question_id": "q1"}\n'


def test_a_run_without_subjects_writes_no_subjects_table(uri, tmp_path):
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    with mlflow.start_run(experiment_id=store.experiment_id(store.client(uri), "plain", uri)):
        active_run.log_run(mlflow, params={}, metrics={"mcqa": 1.0}, tags={}, artifacts_dir=artifacts)
    assert not (artifacts / review.SUBJECTS_FILE).exists()
