"""Names MLflow sees: the metric-name codec and the environment of a server this project starts."""
from __future__ import annotations

# Environment for an `mlflow server` or `mlflow ui` this project starts: without it MLflow also starts its GenAI job
# runner (a dozen huey worker processes, each importing MLflow), which this tool never uses; the server then
# answers in ~10 s instead of ~20 s on 2 cores (README "The MLflow UI").
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


# MLflow metric names allow only [/\w.\- :]; METRICS.md's per-set names use '@' (wacc@cyclic).
MLFLOW_AT = "_at_"


def mlflow_metric_name(name: str) -> str:
    """`wacc@cyclic` -> `wacc_at_cyclic`; other names unchanged."""
    return name.replace("@", MLFLOW_AT)


_OPENED: set[str] = set()


last_run: dict[str, str] = {}  # the run the latest JobTracker of this process made: run_id, uri, status
