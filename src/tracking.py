"""MLflow: one run per job, with the flattened config, metrics, tags and the records as artifacts.

Kept apart from the pipeline so metrics and records never import mlflow.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Mapping

from .errors import UserError

# MLflow metric names allow only [/\w.\- :]; METRICS.md's per-set names use '@' (wacc@cyclic).
MLFLOW_AT = "_at_"


def mlflow_metric_name(name: str) -> str:
    """`wacc@cyclic` -> `wacc_at_cyclic`; other names unchanged."""
    return name.replace("@", MLFLOW_AT)


def flatten(node: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'model': {'name': 'x'}} -> {'model.name': 'x'}; lists become JSON strings."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else value
    return out


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


JOB_INDEPENDENT_KEYS = ("tracking", "cache", "resume", "data_dir")  # where things are, not what the job is


def config_hash(cfg: Mapping[str, Any]) -> str:
    """Identity of a job's work: the resolved config without the keys that only say where results go."""
    kept = {k: v for k, v in cfg.items() if k not in JOB_INDEPENDENT_KEYS}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def job_tracking_uri(tracking_cfg: Mapping[str, Any]) -> str:
    """The store a job logs to: `tracking.uri`, or with `tracking.offline=true` a local SQLite file under
    `tracking.offline_dir` that `python -m src.sync` uploads later."""
    if tracking_cfg.get("offline"):
        folder = Path(tracking_cfg.get("offline_dir") or "mlruns/offline")
        return f"sqlite:///{folder}/mlflow.db"
    return tracking_cfg["uri"]


def finished_run(mlflow, experiment: str, job_hash: str):
    """The latest FINISHED run of this experiment with the same config hash, or None."""
    runs = mlflow.search_runs(experiment_ids=[experiment], output_format="list", max_results=1,
                              filter_string=f"tags.config_hash = '{job_hash}' and attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    return runs[0] if runs else None


def mark_interrupted(mlflow, experiment: str, job_hash: str) -> None:
    """Runs of this job left RUNNING by a killed process are marked KILLED, so the UI shows what happened;
    the rerun that calls this resumes their work from the response cache."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    for run in mlflow.search_runs(experiment_ids=[experiment], output_format="list",
                                  filter_string=f"tags.config_hash = '{job_hash}' and attributes.status = 'RUNNING'"):
        client.set_tag(run.info.run_id, "interrupted", "true")
        client.set_terminated(run.info.run_id, "KILLED")


def check_tracking(uri: str) -> None:
    """Fail fast, before any compute, when the tracking store cannot be reached."""
    db = sqlite_path(uri)
    if db is not None:
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"config key tracking.uri: cannot create {db.parent} ({err.strerror}); "
                            "point tracking.uri at a writable sqlite:/// path") from None
        return
    if uri.startswith(("http://", "https://")):
        try:
            urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5).read()
        except OSError as err:
            raise UserError(f"config key tracking.uri: MLflow server {uri} is unreachable ({err}); "
                            "start it or set tracking.uri=sqlite:///mlruns/mlflow.db") from None
        return
    if uri.startswith("file:") or "://" not in uri:
        raise UserError(f"config key tracking.uri: {uri!r} is a file store, which current MLflow refuses; "
                        "use tracking.uri=sqlite:///mlruns/mlflow.db")


def experiment_id(mlflow, name: str, uri: str) -> str:
    """Get or create the experiment; local sqlite stores keep artifacts beside the database."""
    exp = mlflow.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    db = sqlite_path(uri)
    location = (db.parent / "artifacts").resolve().as_uri() if db is not None else None
    try:
        return mlflow.create_experiment(name, artifact_location=location)
    except Exception:  # another job of the same sweep created it first
        exp = mlflow.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def with_retries(op, *, attempts: int = 12):
    """Run `op`, retrying while a shared SQLite store is locked by a parallel job (joblib launcher)."""
    for attempt in range(attempts):
        try:
            return op()
        except Exception as err:  # MLflow wraps sqlite's OperationalError in its own exception types
            if "locked" not in str(err).lower() or attempt == attempts - 1:
                raise
            time.sleep(min(0.1 * 2 ** attempt, 5.0))


def log_run(mlflow, *, params: Mapping[str, Any], metrics: Mapping[str, float], tags: Mapping[str, str],
            artifacts_dir: Path) -> None:
    """Log into the active run. Non-finite metrics (NaN: undefined, e.g. RWS with nothing SURE) are skipped
    in MLflow and kept in metrics.json."""
    finite = {mlflow_metric_name(k): float(v) for k, v in metrics.items()
              if isinstance(v, (int, float)) and v == v and abs(v) != float("inf")}
    with_retries(lambda: mlflow.log_params({k: ("null" if v is None else str(v)[:6000]) for k, v in params.items()}))
    with_retries(lambda: mlflow.log_metrics(finite))
    with_retries(lambda: mlflow.set_tags(dict(tags)))
    mlflow.log_artifacts(str(artifacts_dir))


