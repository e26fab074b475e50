"""Expected repetition-trial outcomes, exactly, from each question's answer distribution (no sampling noise).

With exact first-token sampling (`scoring=logprob`, a temperature, R repetitions) the records carry, per trial,
`answer_dist`: the probability of each displayed label and, last, of INVALID. The R answers are R independent
draws from it, so the chance that a question ends SURE (its modal answer given at least p* times) and right
(the correct answer among the most frequent) is a multinomial sum, computed here by dynamic programming over
the categories instead of estimated from one set of R draws. The shares are the repetition family's
(src/metrics/repetition.py) in expectation; `expected_rws` is the ratio of the expected SURE-right and SURE
shares (RWS of the expected shares, not the expectation of a ratio).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..answer_formats import FORMATS, MCQ
from .guessing import p_star
from .repetition import one_variant_per_question

OUTCOMES = ("sure_right", "sure_wrong", "unsure_right", "unsure_wrong")


def outcome_probs(  # `R`: the paper's name for the number of draws
    dist: Sequence[float], *, correct: int | None, R: int, threshold: int
) -> dict[str, float]:
    """P(SURE/UNSURE x right/wrong) after R independent draws from `dist` (categories: labels then INVALID).

    SURE: the most frequent category was drawn at least `threshold` (p*) times. Right: the `correct` category
    (None: no category is correct) was drawn at least once and at least as often as any other (ties count
    right, as in `repetition.question_outcomes`).

    >>> {k: round(v, 4) for k, v in outcome_probs([0.9, 0.1, 0.0], correct=0, R=10, threshold=9).items()}
    {'sure_right': 0.7361, 'sure_wrong': 0.0, 'unsure_right': 0.2638, 'unsure_wrong': 0.0001}
    """
    if not 1 <= R <= 170:  # R! stays a finite float
        raise ValueError(f"R must be in 1..170, got {R}")
    p = np.clip(np.asarray(dist, dtype=float), 0.0, None)
    if p.sum() <= 0:
        raise ValueError("an answer distribution needs positive mass")
    p = p / p.sum()
    p_correct = float(p[correct]) if correct is not None else 0.0
    others = [float(q) for k, q in enumerate(p) if k != correct]
    fact = np.array([math.factorial(n) for n in range(R + 1)], dtype=float)
    # ways[t, m]: sum over count vectors of the other categories with total t and largest count m of prod q^n / n!
    ways = np.zeros((R + 1, R + 1))
    ways[0, 0] = 1.0
    for q in others:
        terms = np.array([q**n for n in range(R + 1)]) / fact
        grown = np.zeros_like(ways)
        for n in range(R + 1):
            if terms[n] == 0.0:
                continue
            part = ways[: R + 1 - n] * terms[n]
            grown[n:, n] += part[:, : n + 1].sum(axis=1)  # the new category's n becomes the largest count
            grown[n:, n + 1 :] += part[:, n + 1 :]
        ways = grown
    out = dict.fromkeys(OUTCOMES, 0.0)
    for j in range(R + 1):  # j: times the correct category is drawn
        weight = fact[R] * p_correct**j / fact[j] if correct is not None else (fact[R] if j == 0 else 0.0)
        if weight == 0.0:
            continue
        for m in range(R + 1):
            prob = weight * ways[R - j, m]
            if prob == 0.0:
                continue
            sure = max(j, m) >= threshold
            right = correct is not None and j > 0 and j >= m
            out[f"{'sure' if sure else 'unsure'}_{'right' if right else 'wrong'}"] += prob
    return {k: float(v) for k, v in out.items()}


def _correct_category(row: pd.Series) -> int | None:
    """The category of the right answer in the row's `answer_dist`, as its answer format says (mcq without one)."""
    return FORMATS.get(str(row.get("fmt")), MCQ).correct_category(row)


def expected_metrics(records: pd.DataFrame, *, consistency: float = 0.99, conf: float = 0.999) -> dict[str, float]:
    """`expected_sure_right`, `expected_sure_wrong`, `expected_unsure_right`, `expected_unsure_wrong`,
    `expected_st`, `expected_rws`, `expected_acc` (mean probability of the right answer per draw) and
    `expected_invalid_rate`, averaged over questions, for the same variant per question as the repetition
    family. {} without `answer_dist` in the records, or with R == 1.

    >>> rows = pd.DataFrame({"question_id": ["q"] * 10, "variant_kind": "original", "variant_id": "original",
    ...     "repetition": range(10), "n_options": 2, "option_order": [[0, 1]] * 10, "correct_option": 0,
    ...     "correct_label": "A", "answer_dist": [[1.0, 0.0, 0.0]] * 10})
    >>> expected_metrics(rows)["expected_st"], expected_metrics(rows)["expected_rws"]
    (1.0, 1.0)
    """
    if records.empty or "answer_dist" not in records.columns or int(records["repetition"].max()) < 1:
        return {}
    R = int(records["repetition"].max()) + 1
    rows = one_variant_per_question(records)
    rows = rows[rows["answer_dist"].map(lambda d: d is not None and not (isinstance(d, float) and math.isnan(d)))]
    if rows.empty:
        return {}
    first = rows.sort_values(["question_id", "repetition"]).groupby("question_id", sort=True).head(1)
    per_question = []
    thresholds: dict[int, int] = {}
    for _, row in first.iterrows():
        k = int(row["n_options"])
        if k not in thresholds:
            thresholds[k] = p_star(R=R, consistency=consistency, k=k, conf=conf)  # as repetition.py
        dist = [float(x) for x in row["answer_dist"]]
        correct = _correct_category(row)
        outcome = outcome_probs(dist, correct=correct, R=R, threshold=thresholds[k])
        total = sum(dist)
        outcome["acc"] = dist[correct] / total if correct is not None else 0.0
        outcome["invalid_rate"] = dist[-1] / total
        per_question.append(outcome)
    mean = pd.DataFrame(per_question).mean()
    out = {f"expected_{name}": float(mean[name]) for name in (*OUTCOMES, "acc", "invalid_rate")}
    st = out["expected_sure_right"] + out["expected_sure_wrong"]
    out["expected_st"] = st
    out["expected_rws"] = out["expected_sure_right"] / st if st > 0 else float("nan")
    return out
