"""A metric added as one function, its per-question statement (src/metrics/per_question.py), gets its value, its
interval and its paired test from the shared machinery with nothing else written; and every family's logged
headline values are its statements' values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from src.metrics import METRIC_FAMILIES, applicable_families
from src.metrics.families import FAMILY_STATISTICS, call_family
from src.metrics.intervals import (
    bootstrap_values,
    decomposition_intervals,
    decomposition_of,
    percentile_interval,
    resample_counts,
    resample_records,
    wilson_interval,
)
from src.metrics.paired import paired_differences
from src.metrics.per_question import PerQuestion, mean_of, ratio_of, values_of

from .records_factory import records, trial


def said_a(records: pd.DataFrame) -> dict[str, PerQuestion]:
    """The toy metric, the one function: per question, the share of its original-order trials answered with
    label A (a position-bias reading), averaged over the questions."""
    rows = records[records["variant_kind"] == "original"]
    per_question = rows["parsed_label"].eq("A").groupby(rows["question_id"]).mean()
    return {"said_a": mean_of(per_question, share=True)}


def run(n: int, said_a_share: float, seed: int) -> pd.DataFrame:
    """n questions asked once each; about `said_a_share` of them answered A (option 0), the rest B (option 1)."""
    rng = np.random.default_rng(seed)
    return records([trial(f"q{i:03d}", answer=0 if rng.random() < said_a_share else 1) for i in range(n)])


def test_a_toy_metric_gets_its_value_interval_and_paired_test_from_its_statement():
    table = run(60, 0.4, seed=1)
    statements = said_a(table)
    k = int((table["parsed_label"] == "A").sum())
    assert 10 < k < 50

    # the value: A answers over questions, exactly
    (value,) = values_of(statements).values()
    assert value == k / 60

    # the interval: a share of 0/1 outcomes gets Wilson's; asked for the bootstrap, the percentile interval of the
    # resampled values, each of which is the toy function on that resample's records
    decomposition = decomposition_of(statements)
    assert decomposition.names == ["said_a"]
    wilson = decomposition_intervals(decomposition, {"said_a": value}, n_resamples=500)
    assert (wilson["said_a_lo"], wilson["said_a_hi"]) == pytest.approx(wilson_interval(k, 60), abs=1e-12)
    boot = decomposition_intervals(decomposition, {"said_a": value}, n_resamples=500, closed_form=False)
    replicates = bootstrap_values(decomposition, n_resamples=500)["said_a"]
    assert (boot["said_a_lo"], boot["said_a_hi"]) == percentile_interval(replicates, 0.95)
    assert boot["said_a_lo"] < value < boot["said_a_hi"]
    assert boot["said_a_lo"] == pytest.approx(wilson["said_a_lo"], abs=0.05)  # the two agree at n = 60
    counts = resample_counts(np.random.default_rng(3), 60, 1)
    resampled = resample_records(table, counts[0].astype(int), decomposition.question_ids)
    assert decomposition.values(counts)["said_a"][0] == pytest.approx(values_of(said_a(resampled))["said_a"], rel=1e-12)

    # the paired test: against itself a zero difference with p = 1; against a run on the same questions that
    # says A far more often, a negative difference whose interval excludes 0
    same = paired_differences(decomposition, decomposition, n_resamples=500)["said_a"]
    assert (same.difference, same.lo, same.hi, same.p) == (0.0, 0.0, 0.0, 1.0)
    other = run(60, 0.9, seed=2)
    versus = paired_differences(
        decomposition, decomposition_of(said_a(other), decomposition.question_ids), n_resamples=500
    )["said_a"]
    assert versus.difference == pytest.approx(value - (other["parsed_label"] == "A").mean(), abs=1e-12)
    assert versus.hi < 0 and versus.p < 0.01
    with pytest.raises(ValueError, match="question_ids lacks"):  # a run on other questions cannot be paired
        decomposition_of(said_a(run(61, 0.9, seed=2)), decomposition.question_ids)


@pytest.mark.parametrize("family", sorted(FAMILY_STATISTICS))
def test_a_family_logs_its_statements_values(family):
    """What a family logs for a stated metric is that statement's value (one definition, not two in step)."""
    from tests.golden_records import JOBS, REAL_MODEL_JOBS, stored

    compared = 0
    for name in sorted(set(JOBS) - REAL_MODEL_JOBS):
        table = pd.DataFrame(stored(name)["records"])
        if family not in applicable_families(table):
            continue
        logged = call_family(METRIC_FAMILIES[family], family, table, {})
        stated = values_of(call_family(FAMILY_STATISTICS[family], family, table, {}))
        assert stated and set(stated) <= set(logged), name
        for metric, value in stated.items():
            assert value == logged[metric] or (np.isnan(value) and np.isnan(logged[metric])), (name, metric)
            compared += 1
    assert compared, f"no simulated golden job has the {family} family"


def test_rws_is_the_ratio_of_the_logged_shares_and_its_interval_wilsons_on_the_sure_questions():
    """RWS, stated as the share of SURE right among SURE (`share_among`): its logged value is the ratio of the two
    logged shares, bit for bit as before the statements (3/5 over 3/5 + 1/5 is 0.7499999999999999, not the 0.75 of
    3/4), and its interval is Wilson's on the 4 SURE questions, 3 of them right."""
    from src.metrics import compute_metrics

    outcomes = [(0, 0)] * 3 + [(1, 1), (0, 1)]  # 3 SURE right, 1 SURE wrong, 1 UNSURE (the correctness rule)
    table = records(
        [
            trial(f"q{i}", answer=answer, repetition=r)
            for i, answers in enumerate(outcomes)
            for r, answer in enumerate(answers)
        ]
    )
    m = compute_metrics(table, families=["repetition"], sure_rule="correctness", intervals=200)
    assert (m["sure_right"], m["sure_wrong"]) == (0.6, 0.2)
    assert m["rws"] == 0.6 / (0.6 + 0.2) == 0.7499999999999999
    assert (m["rws_lo"], m["rws_hi"]) == pytest.approx(wilson_interval(3, 4), abs=1e-12)


def test_a_ratio_is_a_share_only_where_its_family_says_so():
    """`ratio_of` of 0/1 numerators over 0/1 counts: the bootstrap's interval by default (its data look like a share,
    its definition does not say so), Wilson's on the counted questions with `share=True`."""
    rng = np.random.default_rng(4)
    index = [f"q{i:02d}" for i in range(40)]
    counted = pd.Series((rng.random(40) < 0.8).astype(float), index=index)
    right = counted * (rng.random(40) < 0.5)
    k, n = int(right.sum()), int(counted.sum())
    value = k / n
    plain = decomposition_of({"r": ratio_of(right, counted)})
    boot = decomposition_intervals(plain, {"r": value}, n_resamples=300)
    assert (boot["r_lo"], boot["r_hi"]) == percentile_interval(bootstrap_values(plain, n_resamples=300)["r"], 0.95)
    share = decomposition_of({"r": ratio_of(right, counted, share=True)})
    wilson = decomposition_intervals(share, {"r": value}, n_resamples=300)
    assert (wilson["r_lo"], wilson["r_hi"]) == pytest.approx(wilson_interval(k, n), abs=1e-12)
    assert (boot["r_lo"], boot["r_hi"]) != pytest.approx((wilson["r_lo"], wilson["r_hi"]), abs=1e-12)
