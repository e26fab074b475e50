"""mcq-consistency: how reliably language models answer multiple-choice benchmarks."""

import os as _os

# The tool runs offline by design: MLflow's usage telemetry would only try (and fail) to reach the internet.
_os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
