"""End to end through the CLI with the simulated model: records, metrics and MLflow agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from src.variants import REASONS

from .conftest import mlflow_runs, needs_data

ALL_BENCHMARKS = (
    "mmlu,mmlu_redux,arc_challenge,arc_easy,truthfulqa_mc1,medqa,medqa_4,medmcqa,"
    "commonsenseqa,hellaswag,winogrande,synthetic"
)


def recompute_cora(records: pd.DataFrame) -> dict[str, float]:
    """An independent reading of METRICS.md's CoRA family, for checking the logged numbers."""
    r0 = records[records.repetition == 0]
    per_q = r0.groupby("question_id").agg(
        orig=("correct", lambda s: bool(s[r0.loc[s.index, "variant_kind"] == "original"].iloc[0])),
        rc=("correct", "mean"),
    )
    out = {"mcqa": per_q.orig.mean(), "mcqa_plus": per_q.rc.mean(), "mv": (per_q.rc > 0.5).mean()}
    for c in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        out[f"bmca_{c}"] = (per_q.rc >= c - 1e-12).mean()
    out["ci"] = 1 - (out["mcqa"] - out["bmca_1.0"])
    out["cora"] = out["mcqa"] * out["ci"]
    out["invalid_rate"] = records.parsed_label.isna().mean()
    out["n_questions"] = float(len(per_q))
    out["n_trials"] = float(len(records))
    return out


def load_artifacts(client, run) -> tuple[pd.DataFrame, Path]:
    local = Path(client.download_artifacts(run.info.run_id, ""))
    return pd.read_parquet(local / "records.parquet"), local


@pytest.mark.promise("README.md", "every logged metric can be re-derived from the logged records")
@needs_data
@pytest.mark.slow
def test_simulated_medqa_cora_matches_binomial_and_recomputes(run_job_in):
    run_job_in("model=simulated", "model.success_rate=0.9", "benchmark=medqa", "variants=cora", "limit=200")
    client, runs = mlflow_runs(run_job_in.store_uri)
    (run,) = runs
    records, local = load_artifacts(client, run)
    assert {"records.parquet", "prompts.parquet", "metrics.json", "config.yaml"} <= {p.name for p in local.iterdir()}
    assert len(records) == 200 * 26
    assert records.groupby("question_id").size().eq(26).all()
    m = run.data.metrics
    assert abs(m["bmca_1.0"] - 0.9**26) <= 0.05
    assert abs(m["mcqa"] - 0.9) <= 0.06
    for name, value in recompute_cora(records).items():
        assert m[name] == pytest.approx(value, abs=1e-9), name
    assert run.data.tags["model"] == "simulated" and run.data.tags["benchmark"] == "medqa"
    assert {"git_commit", "prompt_hash", "variants", "temperature"} <= set(run.data.tags)
    assert run.data.params["benchmark.name"] == "medqa"


@needs_data
@pytest.mark.slow
def test_every_benchmark_runs_in_one_sweep(run_job_in):
    # HellaSwag's endings complete their context, so the contract refuses cora's NOTA for it: it asks its rotations
    cora_benchmarks = ",".join(b for b in ALL_BENCHMARKS.split(",") if b != "hellaswag")
    run_job_in.sweep("model=simulated", f"benchmark={cora_benchmarks}", "variants=cora", "limit=20")
    run_job_in("model=simulated", "benchmark=hellaswag", "variants=perm_cyclic", "limit=20")
    client, runs = mlflow_runs(run_job_in.store_uri)
    by_bench = {r.data.tags["benchmark"]: r for r in runs}
    assert set(by_bench) == set(ALL_BENCHMARKS.split(","))
    for name, run in by_bench.items():
        assert run.info.status == "FINISHED", name
        assert run.data.metrics["n_questions"] == 20, name
        records, _ = load_artifacts(client, run)
        if name == "hellaswag":  # one rotation per option
            assert len(records) == int(records.groupby("question_id").n_options.first().sum()), name
            continue
        n_opts = records[records.variant_kind == "original"].groupby("question_id").n_options.first()
        # the divergent set, less the variants the option_refs and duplicate rules leave out (logged per reason)
        left_out = sum(run.data.metrics[f"n_excluded_{reason}"] for reason in REASONS)
        assert len(records) <= int((2 + 6 * (n_opts - 1)).sum()), name
        assert (len(records) == int((2 + 6 * (n_opts - 1)).sum())) == (left_out == 0), name


@pytest.mark.promise(
    "README.md",
    "each trial is a records.parquet row: order, raw output, parsed label, chosen option, scores, prompt hash",
)
def test_records_columns_and_option_maps(run_job_in):
    run_job_in(
        "model=simulated",
        "model.success_rate=0.7",
        "model.invalid_rate=0.1",
        "benchmark=synthetic",
        "benchmark.n_questions=15",
        "variants=cora",
        "repetitions=3",
        "temperature=0.7",
        "scoring=generate",
    )
    client, (run,) = mlflow_runs(run_job_in.store_uri)
    records, _ = load_artifacts(client, run)
    from src.core.records import COLUMNS

    assert list(records.columns) == list(COLUMNS)
    assert set(records.repetition) == {0, 1, 2}
    valid = records[records.parsed_label.notna()]
    slots = valid.parsed_label.map(lambda s: ord(s) - ord("A"))
    chosen = [order[s] for order, s in zip(valid.option_order, slots)]
    assert list(valid.chosen_option) == chosen  # labels map back through the displayed order
    assert (valid.correct == (valid.parsed_label == valid.correct_label)).all()
    invalid = records[records.parsed_label.isna()]
    assert len(invalid) > 0 and not invalid.correct.any() and invalid.chosen_option.isna().all()
    assert run.data.metrics["invalid_rate"] == pytest.approx(len(invalid) / len(records))
    assert np.isclose(run.data.metrics["n_trials"], len(records))
