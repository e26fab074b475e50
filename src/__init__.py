"""mcq-consistency: how reliably language models answer multiple-choice benchmarks."""

import os as _os

# Defaults for every process that imports the tool (commands, test workers, Slurm jobs, Ray workers): the tool runs
# offline by design, so MLflow's usage telemetry would only try (and fail) to reach the internet; and MLflow's
# "Downloading artifacts" bar for the small files a command reads back (a finished run's metrics, records) is noise
# on a job's stderr. A user's own setting of either wins.
_os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
_os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
