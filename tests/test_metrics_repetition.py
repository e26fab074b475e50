"""Repetition family: SURE/UNSURE shares, RWS | S/T against the paper's Table 1, INVALID, accuracy spread."""

import math

import numpy as np
import pytest

from src.metrics import compute_metrics, question_outcomes, repetition_metrics, rws_st_string
from src.metrics.repetition import TRIAL_PARTS, trial_parts

from .records_factory import records, repeated, trial

# ten answers per question (correct option 0), one pattern per outcome
SURE_RIGHT = [0] * 10
UNSURE_RIGHT = [0] * 5 + [1] * 5  # tie at the top: the correct answer is among the most frequent
UNSURE_WRONG = [1] * 5 + [0] * 3 + [2] * 2
SURE_WRONG = [1] * 9 + [0]


def table_from_shares(sure_right, unsure_right, unsure_wrong, sure_wrong):
    rows, i = [], 0
    for count, pattern in zip(
        (sure_right, unsure_right, unsure_wrong, sure_wrong), (SURE_RIGHT, UNSURE_RIGHT, UNSURE_WRONG, SURE_WRONG)
    ):
        for _ in range(count):
            rows += repeated(f"q{i}", pattern)
            i += 1
    return records(rows)


@pytest.mark.parametrize(
    "shares, printed",
    [
        ((41, 8, 18, 33), "0.55 | 74%"),  # deepseek-llm-7b, T = 0.3, MMLU-Redux (Table 1)
        ((32, 17, 34, 17), "0.65 | 49%"),  # deepseek-llm-7b, T = 0.7
        ((58, 7, 14, 22), "0.72 | 79%"),  # Llama-3-8B-instruct, T = 0.3: 58/80 = 0.725 exactly; the paper printed 0.73
    ],
)
@pytest.mark.promise(
    "docs/metrics.md", "sure_right, unsure_right, unsure_wrong, sure_wrong, rws and st reproduce the paper's Table 1"
)
def test_table_1_rows(shares, printed):
    m = repetition_metrics(table_from_shares(*shares))
    total = sum(shares)
    for name, share in zip(("sure_right", "unsure_right", "unsure_wrong", "sure_wrong"), shares):
        assert m[name] == pytest.approx(share / total)
    assert m["rws"] == pytest.approx(shares[0] / (shares[0] + shares[3]))
    assert m["st"] == pytest.approx((shares[0] + shares[3]) / total)
    if printed.startswith("0.72"):
        assert round(m["rws"], 3) == 0.725
    else:
        assert rws_st_string(m) == printed


@pytest.mark.promise("docs/metrics.md", "for R = 10, c = 0.99, p* = 9: nine of ten is SURE, eight is not")
def test_nine_of_ten_is_sure_eight_is_not():
    table = records(repeated("a", [0] * 9 + [1]) + repeated("b", [0] * 8 + [1, 2]))
    outcomes = question_outcomes(table)
    assert outcomes.loc["a", "sure"] and not outcomes.loc["b", "sure"]
    assert (outcomes["p_star"] == 9).all()


@pytest.mark.promise("docs/metrics.md", "INVALID counts as its own answer when answers are compared and is never right")
def test_invalid_is_its_own_category_and_never_right():
    table = records(
        repeated("sure_invalid", [None] * 9 + [0])  # SURE of INVALID -> SURE wrong
        + repeated("tie", [None] * 5 + [0] * 5)  # correct among the most frequent -> UNSURE right
        + repeated("spread", [None] * 4 + [1] * 3 + [2] * 3)  # correct never given -> UNSURE wrong
    )
    bad = table["parsed_label"].isna()
    table.loc[bad, "correct"] = True  # corrupt rows: INVALID must still not count as right
    outcomes = question_outcomes(table)
    assert outcomes.loc["sure_invalid", "sure"] and not outcomes.loc["sure_invalid", "right"]
    assert not outcomes.loc["tie", "sure"] and outcomes.loc["tie", "right"]
    assert not outcomes.loc["spread", "sure"] and not outcomes.loc["spread", "right"]
    m = repetition_metrics(table)
    assert m["sure_wrong"] == m["unsure_right"] == m["unsure_wrong"] == pytest.approx(1 / 3)
    assert m["rws"] == 0.0


@pytest.mark.promise(
    "docs/metrics.md", "acc_mean and acc_std are the mean and sample standard deviation (ddof 1) over repetitions"
)
def test_accuracy_mean_and_sample_std_over_repetitions():
    # per-repetition accuracies over 2 questions: r0 = 1, r1 = 0.5, r2 = 0
    table = records(repeated("a", [0, 0, 1]) + repeated("b", [0, 1, 1]))
    m = repetition_metrics(table)
    assert m["acc_mean"] == pytest.approx(0.5)
    assert m["acc_std"] == pytest.approx(np.std([1.0, 0.5, 0.0], ddof=1))


@pytest.mark.parametrize("rule", ["answer", "correctness"])
def test_the_trial_parts_add_up_to_acc_mean_with_invalid_apart(rule):
    """The SURE/UNSURE bars' parts: right on SURE + right on UNSURE questions is acc_mean, INVALID trials are a part
    of their own, and the five parts are every trial."""
    table = records(
        repeated("sure_right", SURE_RIGHT)
        + repeated("sure_invalid", [None] * 9 + [0])
        + repeated("tie", [None] * 5 + [0] * 5)
        + repeated("sure_wrong", SURE_WRONG)
        + repeated("spread", UNSURE_WRONG)
    )
    parts, m = trial_parts(table, sure_rule=rule), repetition_metrics(table, sure_rule=rule)
    assert list(parts) == list(TRIAL_PARTS) and sum(parts.values()) == pytest.approx(1.0, abs=1e-12)
    assert parts["right_sure"] + parts["right_unsure"] == pytest.approx(m["acc_mean"], abs=1e-12)
    assert parts["invalid"] == pytest.approx(compute_metrics(table)["invalid_rate"], abs=1e-12)
    assert parts["invalid"] == pytest.approx(14 / 50, abs=1e-12)
    if rule == "answer":  # SURE: sure_right, sure_invalid (of INVALID), sure_wrong; right on them 10 + 1 + 1
        assert parts["right_sure"] == pytest.approx(12 / 50, abs=1e-12)


@pytest.mark.promise("docs/metrics.md", "rws is not logged when nothing is SURE")
def test_nothing_sure_gives_nan_rws():
    m = repetition_metrics(table_from_shares(0, 2, 3, 0))
    assert math.isnan(m["rws"]) and m["st"] == 0.0
    assert rws_st_string(m) == "n/a | 0%"


def test_single_repetition_gives_nothing():
    assert repetition_metrics(records([trial("q1"), trial("q2")])) == {}
    assert "rws" not in compute_metrics(records([trial("q1")]))


def test_uses_the_original_variant_when_several_exist():
    table = records(
        repeated("q", [0] * 10) + repeated("q", [2] * 10, kind="nota", variant_id="nota_1", order=(0, -1, 2, 3))
    )
    m = repetition_metrics(table)
    assert m["sure_right"] == 1.0 and m["acc_mean"] == 1.0


def test_sole_non_original_variant_is_used_and_ambiguous_runs_give_nothing():
    single = records(repeated("q", [0] * 10, kind="shuffled", order=(1, 0, 2, 3)))
    assert repetition_metrics(single)["sure_right"] == 1.0
    two = records(repeated("q", [0] * 10, kind="shuffled") + repeated("q", [0] * 10, kind="nota"))
    assert repetition_metrics(two) == {}


def test_early_stopped_questions_are_judged_against_the_planned_r():
    # R = 10 planned (from q_full); q_stop stopped after 9 identical answers, q_unsure after 3 different ones
    table = records(repeated("q_full", [0] * 10) + repeated("q_stop", [1] * 9) + repeated("q_unsure", [0, 1, 2]))
    outcomes = question_outcomes(table)
    assert outcomes["sure"].to_dict() == {"q_full": True, "q_stop": True, "q_unsure": False}
    assert outcomes["right"].to_dict() == {"q_full": True, "q_stop": False, "q_unsure": True}


def test_consistency_option_moves_the_threshold():
    table = records(repeated("q", [0] * 7 + [1, 2, 3]))
    assert repetition_metrics(table)["st"] == 0.0
    assert compute_metrics(table, consistency=0.9)["st"] == 1.0  # MSGR(6) ~ 0.910 >= 0.9 -> p* = 6


def test_repetition_family_is_chosen_automatically():
    m = compute_metrics(table_from_shares(1, 1, 1, 1))
    assert {"sure_right", "rws", "st", "acc_mean", "acc_std", "mcqa"} <= set(m)
    assert "cora" not in m and "ci" not in m  # the original order alone: no CoRA family (docs/validity.md)
