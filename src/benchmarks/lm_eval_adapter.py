"""The one module of src that names lm-evaluation-harness's private API, with the versions it was checked with.

- `lm_eval.tasks._yaml_loader.load_yaml`: a task's YAML with its `include`s merged, as lm-eval's TaskManager reads
  it, without building the task. lm-eval 0.4 has no public reader of a task's config before the task is built, and
  building a Hub-backed task reaches for the network: the config's `dataset_path` says first whether the task needs
  the Hub, so that an offline machine gets one line naming what to do instead of a download that hangs
  (src/benchmarks/lm_eval.py).

lm-eval is an optional extra (`bench`): importing this module imports nothing of it, and checks the installed
version (when there is one) against `SUPPORTED`, the extra's pin, with one `warning:` line when it is outside
(src/common/versions.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from src.common import versions

ADAPTER = "src/benchmarks/lm_eval_adapter.py"
SUPPORTED = ">=0.4,<0.5"  # pyproject.toml's `bench` extra; checked with 0.4.13


def task_yaml(path: str | Path) -> dict[str, Any]:
    """The task YAML at `path` with its includes merged, `!function` tags left unresolved (lm-eval's own reader)."""
    from lm_eval.tasks._yaml_loader import load_yaml  # local: an optional extra

    loaded: dict[str, Any] = load_yaml(Path(path), resolve_func=False, recursive=True)  # an extra: Any to mypy
    return loaded


versions.warn_if_outside("lm-eval", SUPPORTED, ADAPTER)
