"""One MLflow store holding the smoke sweep, shared by tests/test_sweeps.py and tests/test_compare.py.

The sweep (24 simulated jobs) is the slow part (its store is a copy of the session's empty one, src/tracking/store.py
`store_template`), so one pytest session makes it once; each test adds its own experiment (smoke_joblib, ...)
beside `smoke`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import DATA_DIR, REPO

_MADE: dict[str, Store] = {}


@dataclass(frozen=True)
class Store:
    root: Path

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.root}/mlflow.db"


def run_module(module: str, *args: str, timeout: int = 300, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` in the repo, reading the benchmark files from DATA_DIR, without progress bars."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "MCQ_DATA_DIR": str(DATA_DIR), "TQDM_DISABLE": "1"},
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"python -m {module} exit {proc.returncode}\nSTDOUT:\n{proc.stdout[-3000:]}\nSTDERR:\n{proc.stderr[-5000:]}"
        )
    return proc


def run_sweep(store: Store, experiment: str, *extra: str, sweep: str = "smoke", timeout: int = 300):
    """A committed sweep into `store` under its own experiment, sweep folder and response cache."""
    return run_module(
        "src.run",
        "-m",
        "-cd",
        "sweeps",
        "-cn",
        sweep,
        f"tracking.uri={store.uri}",
        f"tracking.experiment={experiment}",
        f"hydra.sweep.dir={store.root}/{experiment}",
        f"cache.path={store.root}/{experiment}-cache.db",
        *extra,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def smoke_store(tmp_path_factory) -> Store:
    """The smoke sweep with the basic launcher, run once per session, in experiment `smoke`."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"benchmark files absent: {DATA_DIR} (../shared/data) not found")
    if "smoke" not in _MADE:
        store = Store(tmp_path_factory.mktemp("smoke_store"))
        run_sweep(store, "smoke")
        _MADE["smoke"] = store
    return _MADE["smoke"]
