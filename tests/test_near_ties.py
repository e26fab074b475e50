"""Near-ties: every decision of a ranking scoring carries its margin over the next option, and the
closing block, the run's tags and the comparison report count the decisions within NEAR_TIE_MARGIN of a tie."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from src.core.records import NEAR_TIE_MARGIN, near_ties
from src.presentation.closing import near_tie_line

pytestmark = pytest.mark.filterwarnings("ignore")
# the simulated model answers INVALID with a uniform distribution: those decisions are exact ties
SIMULATED = ["model=simulated", "model.invalid_rate=0.3", "variants=cora", "limit=6"]


def _records(result) -> pd.DataFrame:
    return pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")


def _top_two_gap(scores) -> float:
    first, second = sorted(scores, reverse=True)[:2]
    return first - second


@pytest.mark.promise(
    "docs/reproducibility.md",
    "a logprob decision's margin is the log-probability gap; the closing block and tags count near-ties",
)
def test_logprob_records_carry_the_log_probability_gap_and_the_run_counts_its_near_ties(run_job_in):
    from mlflow.tracking import MlflowClient

    result = run_job_in(*SIMULATED, "scoring=logprob")
    records = _records(result)
    for row in records.itertuples():
        expected = _top_two_gap([math.log(p) for p in row.label_probs])
        assert math.isclose(row.decision_margin, expected, abs_tol=1e-12), row
    expected_ties = sum(_top_two_gap(row.label_probs) == 0 for row in records.itertuples())
    assert expected_ties > 0  # the exact ties are there, and counted
    assert result.near_ties == (expected_ties, len(records)) == near_ties(records)
    assert near_tie_line(*result.near_ties) in result.closing().splitlines()
    tags = MlflowClient(tracking_uri=run_job_in.store_uri).get_run(result.run_id).data.tags
    assert (tags["near_ties"], tags["ranked_decisions"]) == (str(expected_ties), str(len(records)))


@pytest.mark.promise(
    "docs/reproducibility.md",
    "a cloze decision's margin is in the score that decided: log-likelihood, or per byte when normalised",
)
def test_cloze_margins_are_in_the_score_that_decided(run_job_in):
    raw = _records(run_job_in(*SIMULATED, "scoring=cloze_shown"))  # lm-eval's acc: the default
    normalised = _records(run_job_in(*SIMULATED, "scoring=cloze_shown", "cloze_normalise=true", "resume=false"))
    for records, column in ((normalised, "option_loglik_norm"), (raw, "option_loglik")):
        gaps = records[column].map(_top_two_gap)
        assert (records["decision_margin"] - gaps).abs().max() < 1e-12


@pytest.mark.promise(
    "docs/reproducibility.md", "generated and sampled answers have no decision margin and no near-tie line"
)
def test_generated_and_sampled_decisions_have_no_margin_and_no_near_tie_line(run_job_in):
    generated = run_job_in(*SIMULATED)
    assert _records(generated)["decision_margin"].isna().all()
    assert generated.near_ties is None and "near-ties" not in generated.closing()
    sampled = _records(run_job_in(*SIMULATED, "scoring=logprob", "temperature=0.7", "repetitions=2"))
    assert sampled["decision_margin"].isna().all()  # a draw, not a ranking


@pytest.mark.promise("docs/reproducibility.md", "the comparison report counts near-ties over the runs and per run")
def test_the_report_counts_the_near_ties_of_the_runs(run_job_in):
    from src.compare.load import load_runs
    from src.compare.sections import build_sections

    ranked = run_job_in(*SIMULATED, "scoring=logprob")
    run_job_in(*SIMULATED)  # generated: no margins, not counted
    runs = load_runs(tracking_uri=run_job_in.store_uri, experiment="mcq-consistency")
    notes = build_sections(runs, paired=False)[0].notes
    near, total = ranked.near_ties
    assert (
        f"near-ties (decision margin below {NEAR_TIE_MARGIN:g}: another CPU, dtype or batch size may flip them): "
        f"{near} of {total} ranked decisions of 1 runs; run {ranked.run_id[:8]}: {near} of {total}"
    ) in notes
