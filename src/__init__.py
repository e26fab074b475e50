"""mcq-consistency: how reliably language models answer multiple-choice benchmarks."""

import os as _os

# The tool runs offline by design: MLflow's usage telemetry would only try (and fail) to reach the internet.
_os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

# Every command of the project (`python -m src.run`, `src.compare`, launcher workers) is a batch process whose heap
# is mostly what its imports made: garbage collection tuned for that before anything else is imported.
from src.common import gc_tuning as _gc_tuning  # noqa: E402

_gc_tuning.tune_for_batch()
