"""Fluctuation family: hand-computed permutation sets, probability metrics, PriDe, and the |R| = 2 claim."""

import itertools
import math

import numpy as np
import pytest

from src.metrics import answer_fluctuation, compute_metrics, fluctuation_metrics, pride_acc, probability_fluctuation

from .records_factory import cyclic_orders, permuted, records

IDENTITY, REVERSED = (0, 1, 2, 3), (3, 2, 1, 0)


def oi_table():
    return records(
        permuted("q1", "oi", [IDENTITY, REVERSED], [0, 0])  # stable and right
        + permuted("q2", "oi", [IDENTITY, REVERSED], [0, 3])  # right, then flips
        + permuted("q3", "oi", [IDENTITY, REVERSED], [2, 0])  # wrong, then right
        + permuted("q4", "oi", [IDENTITY, REVERSED], [None, None])  # INVALID twice: agrees, never right
    )


@pytest.mark.promise(
    "docs/metrics.md", "fr, aacc, sacc, wacc, bacc and sensg follow their formulas on a hand-computed set"
)
def test_hand_computed_oi_set():
    m = fluctuation_metrics(oi_table())
    expected = {"fr": 0.5, "aacc": 0.5, "sacc": 0.375, "wacc": 0.25, "bacc": 0.75, "sensg": 0.5, "one_minus_sensg": 0.5}
    assert m == pytest.approx({f"{name}@oi": value for name, value in expected.items()})


@pytest.mark.promise(
    "docs/metrics.md", "two answers agree when they pick the same original option, whatever its letter"
)
def test_answers_are_compared_by_option_identity_not_letter():
    # the same letter "A" on the reversed order is option 3: a change of answer
    m = answer_fluctuation(records(permuted("q", "oi", [IDENTITY, REVERSED], [0, 3])))
    assert m["fr"] == 1.0
    m = answer_fluctuation(records(permuted("q", "oi", [IDENTITY, REVERSED], [1, 1])))  # letters B then C
    assert m["fr"] == 0.0 and m["aacc"] == 0.0


def test_cyclic_set_hand_computed():
    m = answer_fluctuation(records(permuted("q", "cyclic", cyclic_orders(3), [0, 0, 1], correct_option=0)))
    assert m == pytest.approx(
        {"fr": 1.0, "aacc": 2 / 3, "sacc": 2 / 3, "wacc": 0.0, "bacc": 1.0, "sensg": 1.0, "one_minus_sensg": 0.0}
    )


def test_wacc_equals_sacc_only_for_one_order_and_halves_the_gap_for_two():
    # The paper (section 3.4) says WAcc and SAcc "are equal if |R| = 2". By their eqs 3 and 7 they are not:
    # m1 = a, m2 != m1 gives SAcc = 1/2, WAcc = 0. What holds: equal at |R| = 1, SAcc = (1[m1=a] + WAcc)/2 at |R| = 2.
    m = fluctuation_metrics(oi_table())
    assert m["sacc@oi"] != m["wacc@oi"]
    first_right = np.mean([1, 1, 0, 0])
    assert m["sacc@oi"] == pytest.approx((first_right + m["wacc@oi"]) / 2)
    single = fluctuation_metrics(
        records(permuted("q1", "original", [IDENTITY], [0]) + permuted("q2", "original", [IDENTITY], [1]))
    )
    assert single["sacc@original"] == single["wacc@original"] == single["aacc@original"] == 0.5
    assert single["fr@original"] == 0.0


@pytest.mark.promise("docs/metrics.md", "prob_mass, one_minus_brier and one_minus_entropy follow their formulas")
def test_probability_metrics_hand_computed():
    rows = permuted(
        "q", "oi", [(0, 1), (1, 0)], [0, 1], correct_option=0, probs=[[0.4, 0.1], [0.3, 0.7]]
    )  # first renormalises to 0.8/0.2
    m = probability_fluctuation(records(rows))
    entropy = lambda p: -sum(x * math.log2(x) for x in p)  # noqa: E731
    assert m["prob_mass"] == pytest.approx((0.8 + 0.7) / 2)  # the correct option sits in slot 0, then slot 1
    assert m["one_minus_brier"] == pytest.approx(1 - (0.08 + 0.18) / 2)
    assert m["one_minus_entropy"] == pytest.approx(1 - (entropy([0.8, 0.2]) + entropy([0.3, 0.7])) / 2)


def test_probability_metrics_need_probabilities_on_every_row():
    rows = permuted("q", "oi", [IDENTITY, REVERSED], [0, 0], probs=[[0.7, 0.1, 0.1, 0.1], None])
    m = fluctuation_metrics(records(rows))
    assert "fr@oi" in m and not any(
        name.startswith(("prob_mass", "one_minus_brier", "one_minus_entropy")) for name in m
    )


@pytest.mark.promise("docs/metrics.md", "full_fr is fr on all A! orders")
def test_full_set_gives_full_fr():
    orders = list(itertools.permutations(range(3)))
    rows = permuted("q1", "full", orders, [0] * 6) + permuted("q2", "full", orders, [0] * 5 + [2])
    m = fluctuation_metrics(records(rows))
    assert m["full_fr"] == m["fr@full"] == 0.5


def biased_model_rows(n_questions=20, bias=(3.0, 0.0, 0.0, 0.0), knowledge=2.0):
    """Label logits = position bias + knowledge on the correct option; answers follow argmax."""
    rows = []
    for i in range(n_questions):
        correct = 1 + i % 3 if i % 5 else 0
        probs, answers = [], []
        for order in cyclic_orders(4):
            logits = np.array(bias) + knowledge * (np.array(order) == correct)
            p = np.exp(logits) / np.exp(logits).sum()
            probs.append(list(p))
            answers.append(order[int(np.argmax(p))])
        rows += permuted(f"q{i:02d}", "cyclic", cyclic_orders(4), answers, correct_option=correct, probs=probs)
    return records(rows)


@pytest.mark.promise("docs/metrics.md", "PriDe removes a position prior estimated on a seeded calibration share")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pride_removes_a_position_bias(seed):
    table = biased_model_rows()
    plain = fluctuation_metrics(table)
    reference_accuracy = np.mean([1 if i % 5 == 0 else 0 for i in range(20)])  # the bias wins unless the answer is A
    assert plain["sacc@cyclic"] <= reference_accuracy
    assert pride_acc(table, seed=seed) == 1.0
    assert plain["pride_acc@cyclic"] == 1.0


def test_pride_needs_probabilities_and_enough_questions():
    no_probs = records(
        permuted("q1", "cyclic", cyclic_orders(4), [0] * 4) + permuted("q2", "cyclic", cyclic_orders(4), [0] * 4)
    )
    with pytest.raises(ValueError, match="label_probs"):
        pride_acc(no_probs)
    assert "pride_acc@cyclic" not in fluctuation_metrics(no_probs)
    one = biased_model_rows(n_questions=1)
    with pytest.raises(ValueError, match="more questions"):
        pride_acc(one)


def test_family_only_with_perm_set_column_and_chosen_automatically():
    table = oi_table()
    assert fluctuation_metrics(table.drop(columns=["perm_set", "perm_pos"])) == {}
    m = compute_metrics(table)
    assert m["wacc@oi"] == 0.25 and m["invalid_rate"] == 0.25
    assert "fr@oi" not in compute_metrics(table.drop(columns=["perm_set", "perm_pos"]))


# --- PriDe as the paper defines it and as its authors' code scores it ---------------------------------------
# Hand table: six questions, a position bias b over the four label positions, and what the model believes
# (the option it multiplies by 3). In cyclic order j the label probabilities are p_j(l) ∝ b(l) · 3^[option at l
# is believed]. Over the four cyclic orders every position holds the believed option once, so a calibration
# question's prior softmax(mean_j log p_j) is exactly b, and on a scored question log p - log b keeps only
# the belief: PriDe predicts the believed option. The calibration questions, read as the authors do (each
# option's probability averaged over the orders), also give the believed option.
PRIDE_BIAS = (0.4, 0.3, 0.2, 0.1)
PRIDE_TABLE = {  # question: (right option, believed option)
    "q0": (1, 1),
    "q1": (3, 3),
    "q2": (0, 2),
    "q3": (2, 2),
    "q4": (2, 2),
    "q5": (1, 0),
}
# seed 0 calibrates on q3 (believes right) and q5 (wrong): paper scores q0 q1 q2 q4 -> 3/4; authors all six,
# 3 + 1 right -> 4/6. seed 1 calibrates on q1 and q4 (both right): paper q0 q2 q3 q5 -> 2/4; authors 4/6.
PRIDE_EXPECTED = {0: {"paper": 3 / 4, "authors": 4 / 6}, 1: {"paper": 2 / 4, "authors": 4 / 6}}


def pride_hand_table():
    rows, probs_of = [], {}
    for qid, (right, believed) in PRIDE_TABLE.items():
        probs = []
        for order in cyclic_orders(4):
            weights = np.array(PRIDE_BIAS) * np.where(np.array(order) == believed, 3.0, 1.0)
            probs.append(list(weights / weights.sum()))
        probs_of[qid] = np.array(probs)
        answers = [order[int(np.argmax(p))] for order, p in zip(cyclic_orders(4), probs)]
        rows += permuted(qid, "cyclic", cyclic_orders(4), answers, correct_option=right, probs=probs)
    return records(rows), probs_of


def authors_evaluation(probs_of: dict, calibration: set[str]) -> float:
    """The evaluation of chujiezheng/LLM-MCQ-Bias (commit da14c48, code/debias_pride.py with
    code/debias_utils.py `simple`), restated for one split: each calibration question's rows (cyclic order j
    shows option (j + i) mod 4 at position i) are renormalised; its prediction is the option whose
    probability, gathered over the orders, is highest on average, and its prior is
    softmax(mean_j log(p_j + 1e-10)); every other question is predicted as
    argmax(log(p_0 + 1e-10) - log(mean prior + 1e-10)) on its first order; accuracy is over all questions."""
    predictions, labels, priors = [], [], []
    for qid in sorted(calibration):
        observed = probs_of[qid] / (probs_of[qid].sum(axis=1, keepdims=True) + 1e-10)
        gathered = [[] for _ in range(4)]
        for j in range(4):
            for i in range(4):
                gathered[(j + i) % 4].append(observed[j, i])
        predictions.append(int(np.argmax(np.mean(gathered, axis=1))))
        mean_log = np.log(observed + 1e-10).mean(axis=0)
        prior = np.exp(mean_log - mean_log.max())
        priors.append(prior / (prior.sum() + 1e-10))
        labels.append(PRIDE_TABLE[qid][0])
    prior = np.mean(priors, axis=0)
    for qid in sorted(set(PRIDE_TABLE) - calibration):
        predictions.append(int(np.argmax(np.log(probs_of[qid][0] + 1e-10) - np.log(prior + 1e-10))))
        labels.append(PRIDE_TABLE[qid][0])
    return float(np.mean(np.array(predictions) == np.array(labels)))


@pytest.mark.promise(
    "README.md", "pride_acc@cyclic: paper scores outside the calibration share, authors also scores it"
)
@pytest.mark.parametrize("seed", [0, 1])
def test_pride_protocols_equal_the_hand_table_and_the_authors_evaluation(seed):
    import random

    table, probs_of = pride_hand_table()
    calibration = set(random.Random(seed).sample(sorted(PRIDE_TABLE), 2))  # pride_acc's draw: 2 of 6 (share 1/3)
    for protocol, expected in PRIDE_EXPECTED[seed].items():
        got = pride_acc(table, calibration_share=1 / 3, seed=seed, protocol=protocol)
        assert got == pytest.approx(expected, abs=1e-9)
        assert fluctuation_metrics(table, pride_share=1 / 3, pride_seed=seed, pride_protocol=protocol)[
            "pride_acc@cyclic"
        ] == pytest.approx(expected, abs=1e-9)
    assert pride_acc(table, calibration_share=1 / 3, seed=seed, protocol="authors") == pytest.approx(
        authors_evaluation(probs_of, calibration), abs=1e-9
    )
    # the paper's reading is the authors' evaluation with the calibration questions left out
    scored = set(PRIDE_TABLE) - calibration
    paper = np.mean([PRIDE_TABLE[q][0] == PRIDE_TABLE[q][1] for q in scored])
    assert pride_acc(table, calibration_share=1 / 3, seed=seed) == pytest.approx(paper, abs=1e-9)


def test_pride_protocol_is_checked():
    table, _ = pride_hand_table()
    with pytest.raises(ValueError, match="unknown PriDe protocol 'author'; choose one of paper, authors"):
        pride_acc(table, protocol="author")
    logged = compute_metrics(table, pride_protocol="authors", pride_share=1 / 3)
    assert logged["pride_acc@cyclic"] == pytest.approx(4 / 6)
