"""The chance verdict (src/metrics/chance.py `ChanceVerdict`): a run whose accuracy interval lies wholly below
chance, one whose interval contains it and one wholly above, each from hand-built records through
`compute_metrics` and `chance_levels` as a job logs them, and what the closing block and the report's tables say
of each; the interval's two ends count as containing chance."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from src.compare.tables import chance_mark
from src.metrics import compute_metrics
from src.metrics.chance import (
    AT_CHANCE,
    ChanceVerdict,
    chance_levels,
    chance_tags,
    chance_verdict,
    option_count_chance,
    trial_chance,
)
from src.presentation.closing import judged_lines

from .records_factory import records, trial

N_QUESTIONS = 80


def run_metrics(n_right: int) -> dict[str, float]:
    """The metrics of a one-variant run on N_QUESTIONS four-option questions (chance 1/4), right on the first
    `n_right`, with its 95% intervals and chance levels, as a job logs them."""
    rows = records([trial(f"q{i:03d}", answer=0 if i < n_right else 1) for i in range(N_QUESTIONS)])
    return {**compute_metrics(rows, intervals=200), **chance_levels(rows)}


@pytest.fixture(scope="module")
def three_runs() -> dict[str, dict[str, float]]:
    return {"below": run_metrics(2), "at": run_metrics(20), "above": run_metrics(60)}


@pytest.mark.promise(
    "docs/mlflow_ui.md", "the chance tag says above or indistinguishable from chance, by the one rule of chance.py"
)
def test_a_run_below_at_and_above_chance_is_judged_each_its_own_way(three_runs):
    for where, metrics in three_runs.items():
        assert metrics["chance"] == pytest.approx(0.25, abs=1e-12), where
    below, at, above = (three_runs[k] for k in ("below", "at", "above"))
    # the preconditions: the three intervals lie below, around and above chance
    assert below["mcqa_lo"] < below["mcqa_hi"] < 0.25
    assert at["mcqa_lo"] < 0.25 < at["mcqa_hi"]
    assert 0.25 < above["mcqa_lo"] < above["mcqa_hi"]

    verdicts = {where: chance_verdict(metrics) for where, metrics in three_runs.items()}
    assert {where: v.metric for where, v in verdicts.items()} == dict.fromkeys(three_runs, "mcqa")
    assert {where: v.at_chance for where, v in verdicts.items()} == {"below": False, "at": True, "above": False}
    assert {where: v.short() for where, v in verdicts.items()} == {
        "below": "below chance",
        "at": AT_CHANCE,
        "above": "above chance",
    }
    assert chance_tags(below) == {"chance": "0.250: mcqa below chance"}
    assert chance_tags(above) == {"chance": "0.250: mcqa above chance"}
    # only the run at chance gets the sentence on what its consistency numbers mean
    assert verdicts["below"].sentence() == "" and verdicts["above"].sentence() == ""
    assert f"this run is {AT_CHANCE}" in verdicts["at"].sentence()
    # the closing block and the report's † say the same
    assert judged_lines(below, ["mcqa"])[-1].endswith("(mcqa: below chance)")
    assert judged_lines(at, ["mcqa"])[-2].endswith(f"(mcqa: {AT_CHANCE})")
    assert {where: chance_mark(metrics, "mcqa") for where, metrics in three_runs.items()} == {
        "below": "",
        "at": " †",
        "above": "",
    }


@pytest.mark.parametrize(
    "lo, hi, at_chance",
    [
        (0.10, 0.25, True),  # the upper end at chance: contains it
        (0.25, 0.40, True),  # the lower end at chance
        (0.25, 0.25, True),  # a point interval at chance
        (0.10, 0.2499, False),  # wholly below, just
        (0.2501, 0.40, False),  # wholly above, just
    ],
)
@pytest.mark.promise(
    "docs/metrics.md",
    "a run is indistinguishable from chance when its interval contains the chance level, ends included",
)
def test_the_interval_ends_count_as_containing_chance(lo, hi, at_chance):
    value = (lo + hi) / 2
    verdict = ChanceVerdict("mcqa", value, 0.25, lo, hi)
    assert verdict.at_chance is at_chance
    if not at_chance:
        assert verdict.short() == ("below chance" if hi < 0.25 else "above chance")


def test_a_run_without_an_interval_is_undecided():
    verdict = chance_verdict({"mcqa": 0.1, "chance": 0.25})
    assert verdict.at_chance is None and verdict.short() == "" and verdict.tag() == "0.250"
    assert chance_mark({"mcqa": 0.1, "chance": 0.25}, "mcqa") == ""


def test_a_run_that_logged_only_one_end_of_an_interval_is_undecided():
    for lo, hi in ((None, 0.3), (0.1, None)):
        verdict = ChanceVerdict("mcqa", 0.2, 0.25, lo, hi)
        assert verdict.at_chance is None and verdict.short() == ""


def test_the_verdict_falls_back_to_the_accuracy_over_every_variant_with_its_own_chance_level():
    """A run without MCQA or acc mean (a REVAS true/false run, say) is judged by its accuracy over every trial,
    against the chance level over every variant, not the reference order's."""
    metrics = {"accuracy": 0.3, "accuracy_lo": 0.1, "accuracy_hi": 0.45, "chance": 0.25, "chance_variants": 0.5}
    verdict = chance_verdict(metrics)
    assert (verdict.metric, verdict.chance, verdict.short()) == ("accuracy", 0.5, "below chance")
    assert chance_verdict({"accuracy": 0.3, "chance": 0.25}) is None  # no chance level over every variant


def test_the_reference_order_is_each_questions_first_variant_where_no_original_was_asked():
    """REVAS re-orders and permutation sets ask no `original` variant: the reference chance is the mean over
    questions of the first variant each was asked in, the other over every variant; a repetition counts once."""
    rows = []
    for question, counts in (("a", (4, 2, 2)), ("b", (5, 5, 2))):
        for j, k in enumerate(counts):
            for repetition in (0, 1):
                rows.append(
                    {
                        "question_id": question,
                        "variant_kind": "reorder",
                        "variant_id": f"v{j}",
                        "repetition": repetition,
                        "n_options": k,
                    }
                )
    levels = chance_levels(pd.DataFrame(rows))
    assert levels["chance"] == pytest.approx((1 / 4 + 1 / 5) / 2, abs=1e-12)
    assert levels["chance_variants"] == pytest.approx(
        ((1 / 4 + 1 / 2 + 1 / 2) / 3 + (1 / 5 + 1 / 5 + 1 / 2) / 3) / 2, abs=1e-12
    )
    assert chance_levels(pd.DataFrame(rows).iloc[:0]) == {}  # no trials: no chance level
    assert chance_levels(pd.DataFrame(rows).drop(columns="n_options")) == {}  # records without option counts


@pytest.mark.promise("docs/metrics.md", "a trial's chance is 1/k, 1/2 for true/false and 1/(2^k - 1) for multi-select")
def test_one_shown_option_is_always_right_and_none_has_no_chance():
    assert trial_chance(1) == 1.0 and trial_chance(2) == 0.5 and math.isnan(trial_chance(0))
    assert option_count_chance(5) == pytest.approx(0.2, abs=1e-12)
    assert trial_chance(2, "multi_select") == pytest.approx(1 / 3, abs=1e-12)
    assert trial_chance(4, "multi_select") == pytest.approx(1 / 15, abs=1e-12)  # 1/(2^k - 1)
    assert trial_chance(5) == pytest.approx(0.2, abs=1e-12) and trial_chance(4, "true_false") == 0.5


@pytest.mark.promise(
    "docs/mlflow_ui.md",
    "the chance tag adds the INVALID share above 0.10; a run with repetitions is judged by acc_mean",
)
def test_a_high_invalid_share_and_an_undefined_metric_are_said_where_the_verdict_is(monkeypatch):
    """A repetition run whose answers are mostly unparsed and never SURE: the closing block names its INVALID share
    (above INVALID_FLAG) and says why RWS has no value instead of printing nan; the review view's chance column and
    the run's description say the same; in a sweep the meaning of 'indistinguishable from chance' is said once."""
    from src.metrics.chance import INVALID_FLAG
    from src.presentation import closing
    from src.presentation.description import run_description

    rows = []
    for i in range(N_QUESTIONS):  # four repetitions: INVALID twice, then two different options: nothing SURE
        for r, answer in enumerate([None, None, 0, 1]):
            rows.append(trial(f"q{i:03d}", answer=answer, repetition=r))
    metrics = compute_metrics(records(rows), intervals=200)
    metrics.update(chance_levels(records(rows)))
    assert metrics["invalid_rate"] == pytest.approx(0.5) and metrics["invalid_rate"] > INVALID_FLAG
    assert math.isnan(metrics["rws"])
    lines = judged_lines(metrics, ["acc_mean", "rws", "st"])
    assert "  rws       undefined: no question was SURE (RWS is the share right among the SURE questions)" in lines
    assert not any("nan" in line for line in lines)
    assert any(line.startswith(f"  INVALID 0.500 of trials (above {INVALID_FLAG:.2f})") for line in lines)
    assert chance_tags(metrics)["chance"].endswith(f"; INVALID 0.50 (above {INVALID_FLAG:.2f})")
    assert chance_verdict(metrics).metric == "acc_mean"  # a run with repetitions is judged by their mean
    note = run_description(
        model="m",
        benchmark="b",
        variants="original",
        scoring="generate",
        temperature=1.0,
        repetitions=4,
        n_questions=N_QUESTIONS,
        limit=None,
        metrics=metrics,
        level=0.95,
    )
    assert "INVALID 0.500 of trials" in note and "rws undefined: no question was SURE" in note

    at = {"mcqa": 0.23, "mcqa_lo": 0.158, "mcqa_hi": 0.322, "chance": 0.226}
    monkeypatch.setattr(closing, "_EXPLAINED", [])
    first, second = (judged_lines(at, ["mcqa"], once=True)[-1] for _ in range(2))
    assert "consistency metrics" in first and "consistency metrics" not in second and "said above" in second
    assert "consistency metrics" in judged_lines(at, ["mcqa"])[-1]  # a single job always says it
