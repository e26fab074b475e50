"""Stored records of fixed jobs, so that a refactoring can prove it changed no answer.

`JOBS` names each job by its overrides. `python -m tests.golden_records --write` runs each through the command
line (`python -m src.run`) and stores its records and metrics under tests/data/golden/; the test
`tests/test_records_unchanged.py` runs the same jobs in-process and compares (`--check` compares through the command line). Write the files anew only when a
change is meant to alter answers, and say so in the commit.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "golden"
# columns that differ between two runs of one config by design
VOLATILE_COLUMNS = ("run_id", "cache_hit")
VOLATILE_METRICS = ("seconds", "cache_hit_rate")


def stable_metrics(metrics: dict) -> dict:
    """The metrics a structural change must keep: not timings, not the intervals (`*_lo`/`*_hi`, added after
    these records were stored and tested in tests/test_intervals.py) and not the chance levels (added after them,
    computed from the records these tests compare, tested in tests/test_report_review.py)."""
    from src.metrics import is_interval_name
    from src.metrics.chance import CHANCE_NAMES

    return {k: v for k, v in metrics.items()
            if k not in VOLATILE_METRICS and k not in CHANCE_NAMES and not is_interval_name(k)}

SIMULATED = ["model=simulated", "model.invalid_rate=0.1"]
JOBS: dict[str, list[str]] = {
    "sim_cora_t07": [*SIMULATED, "variants=cora", "limit=6", "temperature=0.7", "repetitions=2"],
    "sim_revas_reorder": [*SIMULATED, "variants=revas_reorder", "limit=5"],
    "sim_revas_true_false_logprob": [*SIMULATED, "variants=revas_true_false", "limit=4", "scoring=logprob"],
    "sim_revas_multi_select": [*SIMULATED, "variants=revas_multi_select", "limit=4"],
    "sim_revas_option_count": [*SIMULATED, "variants=revas_option_count", "limit=4"],
    "sim_revas_nota": [*SIMULATED, "variants=revas_nota", "limit=4"],
    "sim_perm_cyclic_logprob": [*SIMULATED, "variants=perm_cyclic", "limit=5", "scoring=logprob"],
    "smollm2_cora_cloze_shown": ["variants=cora", "limit=2"],
    "smollm2_perm_cyclic_generate": ["variants=perm_cyclic", "limit=3", "scoring=generate"],
    "smollm2_original_logprob": ["variants=original", "limit=5", "scoring=logprob"],
}
REAL_MODEL_JOBS = frozenset(name for name in JOBS if name.startswith("smollm2"))
FLOAT_TOLERANCE = 1e-4  # real-model scores differ in the last digits between CPU kernels; decisions must not


def canonical(records: pd.DataFrame) -> list[dict[str, Any]]:
    """The records as plain JSON values, volatile columns left out."""
    return json.loads(records.drop(columns=list(VOLATILE_COLUMNS)).to_json(orient="records", double_precision=15))


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def stored(name: str) -> dict[str, Any]:
    return json.loads(golden_path(name).read_text())


def differences(expected: Any, actual: Any, where: str = "", tol: float = 0.0) -> list[str]:
    """Where two JSON values differ (floats within `tol`, relative or absolute), as readable paths."""
    if isinstance(expected, float) or isinstance(actual, float):
        if isinstance(expected, (int, float)) and isinstance(actual, (int, float)) and \
                math.isclose(expected, actual, rel_tol=tol, abs_tol=tol):
            return []
        return [f"{where}: {expected!r} != {actual!r}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            return [f"{where}: keys {sorted(set(expected) ^ set(actual))} differ"]
        return [d for k in expected for d in differences(expected[k], actual[k], f"{where}.{k}", tol)]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(expected)} != {len(actual)} items"]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in differences(e, a, f"{where}[{i}]", tol)]
    return [] if expected == actual else [f"{where}: {expected!r} != {actual!r}"]


def _cli_job(name: str) -> dict[str, Any]:
    """Run one golden job through `python -m src.run`; its overrides, metrics and canonical records."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "src.run", *JOBS[name], f"tracking.uri=sqlite:///{tmp}/mlflow.db",
               "cache.enabled=false", f"hydra.run.dir={tmp}/out"]
        subprocess.run(cmd, cwd=repo, check=True, env={**os.environ, "TQDM_DISABLE": "1"})
        artifacts = Path(tmp) / "out" / "artifacts"
        records = pd.read_parquet(artifacts / "records.parquet")
        metrics = json.loads((artifacts / "metrics.json").read_text())
    metrics = stable_metrics(metrics)
    return {"overrides": JOBS[name], "metrics": metrics, "records": canonical(records)}


def _write(names: list[str]) -> None:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name in names:
        job = _cli_job(name)
        golden_path(name).write_text(json.dumps(job, indent=0, sort_keys=True) + "\n")
        print(f"wrote {golden_path(name)} ({len(job['records'])} records)")


def _check(names: list[str]) -> int:
    failed = 0
    for name in names:
        tol = FLOAT_TOLERANCE if name in REAL_MODEL_JOBS else 0.0
        diff = differences(stored(name), _cli_job(name), name, tol)
        failed += bool(diff)
        print(f"{name}: {'same' if not diff else f'{len(diff)} differences, e.g. ' + '; '.join(diff[:5])}")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] not in (["--write"], ["--check"]):
        sys.exit("usage: python -m tests.golden_records --write|--check [NAME ...]")
    if sys.argv[1] == "--write":
        _write(sys.argv[2:] or list(JOBS))
    else:
        sys.exit(_check(sys.argv[2:] or list(JOBS)))
