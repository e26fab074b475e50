"""A run logged through MLflow's active run (its fluent API), for runs that no job made: the ingested answers of
another tool (src/ingest/run_log.py), logged as a job run would be (metrics as `review_view` shows them, subjects,
artifacts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from src.tracking import names, review, store


def log_run(
    mlflow: Any,
    *,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    artifacts_dir: Path,
) -> None:
    """Log into the active run, the metrics as `review_view` shows them (non-finite ones, NaN: undefined, e.g. RWS
    with nothing SURE, are skipped in MLflow and kept in metrics.json; per-subject values in subjects.csv)."""
    finite, subjects = review.review_view(metrics)
    review.write_subjects(subjects, artifacts_dir)
    store.with_retries(lambda: mlflow.log_params({k: names.param_text(v) for k, v in params.items()}))
    store.with_retries(lambda: mlflow.log_metrics(finite))
    store.with_retries(lambda: mlflow.set_tags(dict(tags)))
    store.log_artifacts(mlflow.MlflowClient(), mlflow.active_run().info.run_id, artifacts_dir)
