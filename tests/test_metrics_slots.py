"""Position bias (docs/metrics.md, "Position bias"): each displayed slot's share of the valid answers against the
share of right answers in it, its interval, the "far above" flag, and PriDe's prior beside them."""

from __future__ import annotations

import numpy as np
import pytest

from src.metrics import FAR_MARGIN, compute_metrics, slot_metrics, wilson_interval
from src.metrics.fluctuation import pride_prior

from .records_factory import INVALID_ANSWER, cyclic_orders, permuted, records, repeated, trial

pytestmark = pytest.mark.promise(
    "docs/metrics.md", "each slot's share of the valid answers is measured against the right answers' share in it"
)


def letter_habit_run():
    """158 valid answers, 127 of them A, where the right answer is A for a fifth of the questions (SmolLM2's
    habit), and 2 INVALID answers that count nowhere."""
    rows = []
    for i in range(158):
        correct = 0 if i < 32 else 1 + i % 3  # A right for 32 of 158 questions (0.2025)
        answer = 0 if i < 127 else correct  # A for 127 answers, the right one for the rest
        rows.append(trial(f"q{i:03d}", answer=answer, correct_option=correct))
    rows += [trial(f"x{i}", answer=INVALID_ANSWER, correct_option=1) for i in range(2)]
    return records(rows)


def test_a_letter_habit_is_measured_with_wilson_bounds_and_flagged_far_above():
    m = slot_metrics(letter_habit_run())
    assert m["n_slot_choices"] == 158  # the INVALID answers count nowhere
    assert m["slot_share_A"] == pytest.approx(127 / 158, abs=1e-12)
    assert m["slot_correct_A"] == pytest.approx(32 / 158, abs=1e-12)
    # one answer per question: the Wilson interval of 127 of 158
    assert (m["slot_share_A_lo"], m["slot_share_A_hi"]) == pytest.approx(wilson_interval(127, 158), abs=1e-12)
    assert m["slot_bias_max"] == pytest.approx((127 - 32) / 158, abs=1e-12)
    assert m["slot_share_A_lo"] - m["slot_correct_A"] > FAR_MARGIN and m["slot_bias_flag"] == 1.0
    shares = [m[f"slot_share_{s}"] for s in "ABCD"]
    assert sum(shares) == pytest.approx(1.0, abs=1e-12)
    assert sum(m[f"slot_correct_{s}"] for s in "ABCD") == pytest.approx(1.0, abs=1e-12)


def test_a_model_that_follows_the_answers_is_not_flagged():
    """Right answers spread evenly over the slots, 65 of 80 answered right, the others spread too: the most chosen
    slot is 6 points above its share, not far above."""
    rows = [trial(f"q{i}", answer=(i % 4) if i % 4 else (i // 4) % 4, correct_option=i % 4) for i in range(80)]
    m = slot_metrics(records(rows))
    assert m["slot_bias_flag"] == 0.0
    assert abs(m["slot_bias_max"]) < FAR_MARGIN


def test_the_flag_needs_the_lower_bound_above_the_margin_not_the_share_alone():
    """A slot chosen 0.45 where its right share is 0.25 (20 points above) on only 20 answers: its lower bound
    (Wilson, 0.26) is not 0.10 above 0.25, so it is not far above; on 400 answers it is."""
    few = [trial(f"q{i}", answer=0 if i < 9 else 1 + i % 3, correct_option=i % 4) for i in range(20)]
    m = slot_metrics(records(few))
    assert m["slot_share_A"] == pytest.approx(0.45, abs=1e-12) and m["slot_correct_A"] == 0.25
    assert m["slot_share_A_lo"] - 0.25 < FAR_MARGIN and m["slot_bias_flag"] == 0.0
    many = [trial(f"q{i}", answer=0 if i < 180 else 1 + i % 3, correct_option=i % 4) for i in range(400)]
    assert slot_metrics(records(many))["slot_bias_flag"] == 1.0


def test_repetitions_get_a_question_cluster_bootstrap_wider_than_a_wilson_over_the_trials():
    """20 questions answered 10 times each, each question always with the same slot (A for 8 of them): the 200
    trials are 20 independent answers, so the interval must be about as wide as 20 answers give, not 200."""
    rows = []
    for i in range(20):
        rows += repeated(f"q{i}", [0 if i < 8 else 1] * 10, correct_option=i % 4)
    m = slot_metrics(records(rows))
    assert m["slot_share_A"] == pytest.approx(0.4, abs=1e-12)
    lo, hi = m["slot_share_A_lo"], m["slot_share_A_hi"]
    naive = wilson_interval(80, 200)
    assert hi - lo > 1.5 * (naive[1] - naive[0])
    assert lo <= 0.4 <= hi
    assert slot_metrics(records(rows)) == m  # seeded: the same bounds every time


def test_only_multiple_choice_answers_count_and_numbered_labels_are_slots():
    rows = [trial("q1", answer=1, correct_option=1)]
    rows.append(trial("q2", answer=0, fmt="true_false", parsed_label="Yes", correct_label="No", n_options=1))
    rows.append(trial("q3", answer=None, fmt="multi_select", parsed_label="A, C", parsed_labels=["A", "C"]))
    rows.append(trial("q4", answer=2, parsed_label="3", correct_label="1"))  # prompt.label_style=1.
    m = slot_metrics(records(rows))
    assert m["n_slot_choices"] == 2
    assert (m["slot_share_B"], m["slot_share_C"]) == (0.5, 0.5)
    assert (m["slot_correct_A"], m["slot_correct_B"]) == (0.5, 0.5)
    only_yes_no = records([rows[1]])
    assert slot_metrics(only_yes_no) == {} and "slot_share_A" not in compute_metrics(only_yes_no)


def test_pride_prior_is_logged_beside_the_slot_shares_for_a_cyclic_set_with_label_probabilities():
    """Every order gives the same label probabilities, favouring the first label: PriDe's prior (the softmax of
    the mean log-probability over the cyclic orders) is then exactly those probabilities."""
    favour = [0.7, 0.1, 0.1, 0.1]
    rows = []
    for i in range(40):
        orders = cyclic_orders(4)
        rows += permuted(f"q{i:02d}", "cyclic", orders, [order[0] for order in orders], probs=[favour] * 4)
    table = records(rows)
    prior = pride_prior(table)
    assert list(prior) == ["pride_prior_A", "pride_prior_B", "pride_prior_C", "pride_prior_D"]
    assert np.allclose(list(prior.values()), favour, atol=1e-9)
    m = compute_metrics(table)
    assert {k: m[k] for k in prior} == pytest.approx(prior, abs=1e-12)
    assert m["slot_share_A"] == 1.0 and m["slot_bias_flag"] == 1.0  # the habit PriDe's prior describes
    assert pride_prior(records([trial("q1")])) == {}  # no cyclic set: no prior
