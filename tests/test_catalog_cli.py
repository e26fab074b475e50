"""End to end through the CLI with the simulated model: every REVAS and permutation set logs its metrics,
the misleading second stage reads a finished run, the assessment CLI logs its tables, and the repetition
family matches binomial theory."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from src.common.errors import UserError
from src.tracking.records import read_run_records
from src.variants import PERM_SETS, VARIANT_SETS  # the code's sets, each permutation set `perm_<name>`

from .conftest import REPO, mlflow_runs, needs_data

REVAS_SETS = {
    "revas_reorder": ["mcqa", "sc_mean", "acc_h", "sc_bin_5_of_5_share", "sc_bin_5_of_5_acc", "acc_h/step1"],
    "revas_option_count": [f"{name}@{n}" for n in (2, 3, 5, 6, 8, 10) for name in ("acc", "sc_mean", "acc_h")],
    "revas_nota": ["nota_acc", "nota_acc_h"],
    "revas_true_false": [
        "tf_correct_yes",
        "tf_distractor_no",
        "tf_correct_yes_all",
        "tf_distractor_no_all",
        "tf_subset_share",
        "conf_correct",
        "conf_distractor",
        "conf_ratio",
    ],
    "revas_multi_select": ["multi_rate", "recall_correct", "recall_misleading"],
}
FLUCTUATION = ("fr", "aacc", "sacc", "wacc", "bacc", "sensg", "one_minus_sensg", "prob_mass", "one_minus_brier")
PERM_METRICS = {f"perm_{s}": [f"{m}@{s}" for m in FLUCTUATION] for s in PERM_SETS}
PERM_METRICS["perm_full"] += ["full_fr"]
PERM_METRICS["perm_cyclic"] += ["pride_acc@cyclic"]
PERM_METRICS["perm_all"] = [f"{m}@{s}" for s in PERM_SETS for m in FLUCTUATION] + [
    "full_fr",
    "pride_acc@cyclic",
    "mcqa",
]
GROUPS = {"revas": REVAS_SETS, "permutations": PERM_METRICS}


def test_every_revas_and_permutation_set_of_the_code_is_run():
    """GROUPS runs every REVAS and permutation set in VARIANT_SETS (a new set cannot escape
    test_every_set_logs_its_metrics), but the misleading second stage, which needs a finished run (its own test)."""
    in_code = {name for name in VARIANT_SETS if name.startswith(("revas_", "perm_"))} - {"revas_misleading"}
    assert in_code == {name for sets in GROUPS.values() for name in sets}


def logged(run, client) -> set[str]:
    """The run's metric names in MLflow, and its per-subject values (`acc_h/step1`) from its `subjects.csv`."""
    import pandas as pd

    from src.tracking.names import MLFLOW_AT
    from src.tracking.review import SUBJECTS_FILE

    names = {name.replace(MLFLOW_AT, "@") for name in run.data.metrics}
    if any(a.path == SUBJECTS_FILE for a in client.list_artifacts(run.info.run_id)):
        table = pd.read_csv(client.download_artifacts(run.info.run_id, SUBJECTS_FILE))
        names |= {f"{column}/{subject}" for subject in table["subject"] for column in table.columns[1:]}
    return names


@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_set_logs_its_metrics(run_job_in, group):
    """One multirun per group (one process), scoring=logprob so that probability metrics appear too. Every metric
    is logged from a few questions on (each set's records are per question), so 10 questions (the fluctuation
    metrics of 7 perm_all jobs over 120 orders a question cost most of this test's time)."""
    expected = GROUPS[group]
    n = 10
    run_job_in.sweep(
        "model=simulated", "benchmark=medqa", f"variants={','.join(expected)}", f"limit={n}", "scoring=logprob"
    )
    client, runs = mlflow_runs(run_job_in.store_uri)
    by_set = {r.data.tags["variants"]: r for r in runs if "variants" in r.data.tags}
    assert set(expected) <= set(by_set)
    for name, metrics in expected.items():
        run = by_set[name]
        assert run.info.status == "FINISHED", name
        missing = set(metrics) - logged(run, client)
        assert not missing, f"{name} did not log {sorted(missing)}"
        assert run.data.metrics["n_questions"] == n, name
        if name.startswith("perm_") or name == "revas_reorder":
            assert "cora" not in run.data.metrics, name  # reorders are not a CoRA divergent set
    records = _records(client, by_set["perm_all" if group == "permutations" else "revas_option_count"])
    if group == "permutations":
        assert len(records) == n * 120 and records.perm_sets.map(len).min() >= 1
    else:
        assert len(records) == n * (5 + 6 + 8 + 10 + 3 + 2)
        assert set(records.variant_level.dropna().astype(int)) == {2, 3, 5, 6, 8, 10}


def _records(client, run):
    return read_run_records(run.info.run_id, client.tracking_uri)


@needs_data
@pytest.mark.slow
def test_misleading_second_stage_reads_the_source_run(run_job_in):
    source_id = run_job_in(
        "model=simulated", "benchmark=medqa", "variants=revas_true_false", "limit=30", "scoring=generate"
    ).run_id
    client, (source,) = mlflow_runs(run_job_in.store_uri)
    assert {"tf_correct_yes_all", "tf_distractor_no_all"} <= logged(source, client)  # Yes/No parsed from generated text
    source_records = _records(client, source)
    original = source_records[(source_records.variant_kind == "original")]
    wrong = original[original.parsed_label.notna() & ~original.correct.astype(bool)]
    run_job_in(
        "model=simulated",
        "benchmark=medqa",
        "variants=revas_misleading",
        f"variants.source_run={source_id}",
        "limit=30",
    )
    client, runs = mlflow_runs(run_job_in.store_uri)
    (second,) = [r for r in runs if r.data.tags["variants"] == "revas_misleading"]
    assert "misleading_fix_rate" in logged(second, client)
    records = _records(client, second)
    assert set(records.question_id) == set(wrong.question_id) and len(records) == len(wrong)
    chosen = dict(zip(wrong.question_id, wrong.chosen_option))
    assert all(int(a) == int(chosen[q]) for q, a in zip(records.question_id, records.asked_option))
    assert all(order[int(a)] == -2 for order, a in zip(records.option_order, records.asked_option))

    with pytest.raises(UserError, match="variants.source_run"):
        run_job_in("model=simulated", "benchmark=medqa", "variants=revas_misleading", "limit=30")


@needs_data
@pytest.mark.slow
def test_assessment_cli_logs_r2_and_stability_tables(run_job_in, capsys):
    run_job_in.sweep(
        "model=simulated",
        "model.name=sim_${model.success_rate}",
        "model.success_rate=0.99,0.95,0.9",
        "benchmark=mmlu",
        "variants=perm_all",
        "limit=12",
        "scoring=logprob",
    )
    from src.assess import main

    # the CLI's main in this process: a `python -m src.assess` process would spend seconds importing MLflow again
    assert main(["--experiment", "mcq-consistency", "--tracking-uri", run_job_in.store_uri, "--draws", "4"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["n_points"] == 3
    client, (assessment,) = mlflow_runs(run_job_in.store_uri, kind="assessment")
    local = Path(client.download_artifacts(assessment.info.run_id, ""))
    assert {"points.csv", "r2.csv", "r2.md", "stability.csv", "stability.md"} <= {p.name for p in local.iterdir()}
    assert "(c) targets: full fluctuation rate and original accuracy" in (local / "r2.md").read_text()
    import pandas as pd

    table = pd.read_csv(local / "r2.csv")
    assert set(table.target) == {"full_fr", "accuracy", "both"}
    assert table.loc[(table.perm_set == "cyclic") & (table.metric == "wacc"), "r2"].notna().all()
    stability = pd.read_csv(local / "stability.csv")
    assert set(stability.draw) == {"pairs", "tuples"} and len(stability.run_id.unique()) == 3

    assert main(["--experiment", "nope", "--tracking-uri", run_job_in.store_uri]) == 2
    assert "no experiment 'nope'" in capsys.readouterr().err
    # the module runs that main: its usage, which needs none of the assessment's imports
    proc = subprocess.run(
        [sys.executable, "-m", "src.assess", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m src.assess"), proc.stderr[-3000:]


@needs_data
@pytest.mark.slow
def test_repetitions_match_binomial_theory(run_job_in):
    """st ~ P(Bin(10, 0.8) >= 9); rws ~ P(sure right) / P(sure): a wrong label repeated 9 times is ~1e-9."""
    run_job_in(
        "model=simulated",
        "model.success_rate=0.8",
        "benchmark=mmlu",
        "limit=300",
        "repetitions=10",
        "temperature=0.7",
        "scoring=generate",
    )
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    from src.metrics import p_star

    threshold = p_star(R=10, consistency=0.99, k=4)
    assert threshold == 9

    def tail(p):
        return sum(math.comb(10, j) * p**j * (1 - p) ** (10 - j) for j in range(threshold, 11))

    sure_right, sure_wrong = tail(0.8), 3 * tail(0.2 / 3)
    m = run.data.metrics
    assert abs(m["st"] - (sure_right + sure_wrong)) <= 0.05
    assert abs(m["rws"] - sure_right / (sure_right + sure_wrong)) <= 0.05
    assert abs(m["acc_mean"] - 0.8) <= 0.03
