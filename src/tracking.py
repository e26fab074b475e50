"""MLflow: one run per job, with the flattened config, metrics, tags and the records as artifacts.

Kept apart from the pipeline so metrics and records never import mlflow.
"""
from __future__ import annotations

import json
import subprocess
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


def log_run(mlflow, *, params: Mapping[str, Any], metrics: Mapping[str, float], tags: Mapping[str, str],
            artifacts_dir: Path) -> None:
    """Log into the active run. Non-finite metrics (NaN: undefined, e.g. RWS with nothing SURE) are skipped
    in MLflow and kept in metrics.json."""
    mlflow.log_params({k: ("null" if v is None else str(v)[:6000]) for k, v in params.items()})
    finite = {mlflow_metric_name(k): float(v) for k, v in metrics.items()
              if isinstance(v, (int, float)) and v == v and abs(v) != float("inf")}
    mlflow.log_metrics(finite)
    mlflow.set_tags(dict(tags))
    mlflow.log_artifacts(str(artifacts_dir))


