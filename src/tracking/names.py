"""Names MLflow sees: the metric-name codec, the default tracking URI, the environment of a server this project starts.

Written once here, below every layer that reads or writes runs (the job tracker, `src.compare`, `src.assess`,
`src.plan`, `src.ingest`, the config's default).
"""

from __future__ import annotations

# Environment for an `mlflow server` or `mlflow ui` this project starts: without it MLflow also starts its GenAI job
# runner (a dozen huey worker processes, each importing MLflow), which this tool never uses; the server then
# answers in ~10 s instead of ~20 s on 2 cores (docs/review.md, "The MLflow UI").
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


# MLflow metric names allow only [/\w.\- :]; docs/metrics.md's per-set names use '@' (wacc@cyclic).
MLFLOW_AT = "_at_"


def mlflow_metric_name(name: str) -> str:
    """`wacc@cyclic` -> `wacc_at_cyclic`; other names unchanged."""
    return name.replace("@", MLFLOW_AT)


def metric_name(mlflow_name: str) -> str:
    """`wacc_at_cyclic` -> `wacc@cyclic`: the name docs/metrics.md gives a metric MLflow stores."""
    return mlflow_name.replace(MLFLOW_AT, "@")


PARAM_LIMIT = 6000  # MLflow's MAX_PARAM_VAL_LENGTH (mlflow.utils.validation, checked by a test): characters it keeps


def param_text(value: object) -> str:
    """A param's value as every run of this tool logs it: text, None as "null", cut at PARAM_LIMIT characters (MLflow
    would refuse a longer one).

    >>> param_text(None), param_text(0.5), len(param_text("x" * 7000))
    ('null', '0.5', 6000)
    """
    return "null" if value is None else str(value)[:PARAM_LIMIT]


# where runs go unless tracking.uri / --tracking-uri says otherwise (a SQLite file beside the working folder)
DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
DEFAULT_EXPERIMENT = "mcq-consistency"  # tracking.experiment unless a config or --experiment says otherwise
