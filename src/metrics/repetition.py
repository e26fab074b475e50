"""Repetition-trials family (non-determinism paper, section 3): SURE/UNSURE shares, RWS | S/T, accuracy spread.

Uses every repetition of one variant per question: the `original` variant when the run has one, or the
only variant when every question has exactly one; with several variants per question and no original it
returns {}. R is the planned repetition count, `n_planned` in an adaptive run's records (src/answering/adaptive.py) or
max(repetition) + 1, so early-stopped questions (fewer rows) are judged against the same p*. Answers are option
identities with INVALID as its own category.

Two SURE rules (`sure_rule`, docs/metrics.md "What the paper's tables count"):

- `answer` (section 3.2, the default): SURE iff the most frequent answer is given at least p* times; SURE right
  iff that answer is the correct one, UNSURE right iff the correct answer is among the most frequent (ties).
- `correctness` (the paper's Tables 1-2, as its released outputs reproduce them): with c = the number of right
  trials out of R, SURE right iff c = R, SURE wrong iff c = 0, UNSURE right iff 0 < c < R and c >= R - c,
  UNSURE wrong otherwise. Only right/wrong counts, not which wrong answer: ten wrong answers spread over four
  options are SURE wrong. An INVALID or missing trial is a wrong one.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from src.core.metric_choices import (
    SURE_BY_ANSWER,
    SURE_BY_CORRECTNESS,
    SURE_RULES as SURE_RULES,  # check_sure_rule's; named in src/core/metric_choices.py
)

from .answers import ORIGINAL, answer_keys, correct_flags, invalid_mask
from .guessing import p_star
from .per_question import PerQuestion, mean_of, share_among, values_of


def check_sure_rule(sure_rule: str) -> str:
    """`sure_rule` if it is one of SURE_RULES, else ValueError naming them.

    >>> check_sure_rule("correctness")
    'correctness'
    """
    if sure_rule not in SURE_RULES:
        raise ValueError(f"sure_rule must be one of {', '.join(SURE_RULES)}, got {sure_rule!r}")
    return sure_rule


def planned_repetitions(records: pd.DataFrame) -> int:
    """R: `n_planned` in the records of an adaptive run (src/answering/adaptive.py), else max(repetition) + 1."""
    if "n_planned" in records.columns and records["n_planned"].notna().any():
        return int(records["n_planned"].max())
    return int(records["repetition"].max()) + 1


def skipped_trials(rows: pd.DataFrame) -> bool:
    """True when an adaptive run stopped some of these rows' prompts before R (`n_asked` < `n_planned`)."""
    if "n_asked" not in rows.columns or "n_planned" not in rows.columns:
        return False
    return bool((rows["n_asked"] < rows["n_planned"]).any())


def one_variant_per_question(records: pd.DataFrame) -> pd.DataFrame:
    """The rows of the one variant per question the family reads: `original`, or the only one (module docstring)."""
    original = records[records["variant_kind"] == ORIGINAL]
    if not original.empty:
        return original
    if (records.groupby("question_id")["variant_id"].nunique() == 1).all():
        return records
    return records.iloc[0:0]


def question_outcomes(
    records: pd.DataFrame, *, consistency: float = 0.99, conf: float = 0.999, sure_rule: str = SURE_BY_ANSWER
) -> pd.DataFrame:
    """Per question: n_max, n_correct, p_star, sure, right (indexed by question_id), SURE and right under
    `sure_rule` (`answer`: section 3.2; `correctness`: the paper's tables, see the module docstring)."""
    check_sure_rule(sure_rule)
    rows = one_variant_per_question(records)
    R = planned_repetitions(records)
    trials = pd.DataFrame(
        {"question_id": rows["question_id"].to_numpy(), "answer": answer_keys(rows), "correct": correct_flags(rows)}
    )
    counts = trials.groupby(["question_id", "answer"]).size()
    per_question = pd.DataFrame(
        {
            "n_max": counts.groupby(level="question_id").max(),
            # within one variant every right trial names the same option, so this is that answer's count
            "n_correct": trials.groupby("question_id")["correct"].sum(),
            "k": rows.groupby("question_id")["n_options"].max(),
        }
    )
    thresholds = {int(k): p_star(R=R, consistency=consistency, k=int(k), conf=conf) for k in per_question["k"].unique()}
    per_question["p_star"] = per_question["k"].map(thresholds)
    per_question["sure"] = per_question["n_max"] >= per_question["p_star"]
    # SURE right: the modal answer is correct; UNSURE right: the correct answer is among the most frequent
    per_question["right"] = (per_question["n_correct"] > 0) & (per_question["n_correct"] == per_question["n_max"])
    if sure_rule == SURE_BY_CORRECTNESS:
        c = per_question["n_correct"]  # right trials out of R; INVALID and missing trials are wrong ones
        per_question["sure"] = (c == R) | (c == 0)
        per_question["right"] = (c == R) | ((c > 0) & (c >= R - c))
    return per_question


def _mean_over_repetitions(ratios: list[np.ndarray]) -> np.ndarray:
    """The mean over repetitions of their accuracies (a repetition no question of a resample reached is left out)."""
    stacked = np.vstack(ratios)
    present = np.isfinite(stacked)
    count = present.sum(axis=0)
    total = np.where(present, stacked, 0.0).sum(axis=0)
    mean: np.ndarray = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
    return mean


def repetition_statistics(
    records: pd.DataFrame, *, consistency: float = 0.99, conf: float = 0.999, sure_rule: str = SURE_BY_ANSWER
) -> dict[str, PerQuestion]:
    """The family stated per question (`question_outcomes`): the four SURE/UNSURE shares and S/T as means of a
    question's 0/1 outcome, RWS as the share of SURE right among SURE, and `acc_mean` as the mean over repetitions
    r of the right trials over the trials made at r (each question contributes its own). `acc_mean` is left out
    when an adaptive run skipped trials (see `repetition_metrics`). {} when R == 1 or no single variant per
    question."""
    check_sure_rule(sure_rule)
    if records.empty or int(records["repetition"].max()) < 1:
        return {}
    rows = one_variant_per_question(records)
    if rows.empty:
        return {}
    outcomes = question_outcomes(records, consistency=consistency, conf=conf, sure_rule=sure_rule)
    sure, right = outcomes["sure"], outcomes["right"]
    out = {
        "sure_right": mean_of(sure & right),
        "unsure_right": mean_of(~sure & right),
        "unsure_wrong": mean_of(~sure & ~right),
        "sure_wrong": mean_of(sure & ~right),
        "rws": share_among(sure & right, sure & ~right),  # SURE right among SURE
        "st": mean_of(sure, share=True),
    }
    if skipped_trials(rows):  # later repetitions hold only the undecided questions: no per-repetition accuracy
        return out
    trials = pd.DataFrame(
        {
            "question_id": rows["question_id"].to_numpy(),
            "repetition": rows["repetition"].to_numpy(),
            "correct": correct_flags(rows).astype(float),
        }
    )
    per_repetition = trials.groupby(["question_id", "repetition"])["correct"].agg(["sum", "count"])
    hits = per_repetition["sum"].unstack(fill_value=0.0)  # type: ignore[arg-type]  # stubs: int or str; takes a float
    counts = per_repetition["count"].unstack(fill_value=0).astype(float)
    out["acc_mean"] = PerQuestion(tuple((hits[r], counts[r]) for r in hits.columns), _mean_over_repetitions)
    return out


def repetition_metrics(
    records: pd.DataFrame, *, consistency: float = 0.99, conf: float = 0.999, sure_rule: str = SURE_BY_ANSWER
) -> dict[str, float]:
    """`sure_right`, `unsure_right`, `unsure_wrong`, `sure_wrong`, `rws`, `st`, `acc_mean`, `acc_std`.

    `sure_rule` decides SURE and right (`answer`, section 3.2, or `correctness`, the paper's tables);
    `acc_mean` and `acc_std` do not depend on it.

    The four shares are over questions and sum to 1; `rws` is NaN when nothing is SURE. `acc_mean` and
    `acc_std` (ddof=1) are over the R per-repetition accuracies (each over the trials made at that repetition);
    left out when an adaptive run skipped trials (src/answering/adaptive.py), whose cells are the full run's but whose
    later repetitions hold only the questions still undecided.
    {} when R == 1 or no single variant per question can be chosen.
    """
    statements = repetition_statistics(records, consistency=consistency, conf=conf, sure_rule=sure_rule)
    out = values_of(statements)
    if "acc_mean" in out:  # the spread of the per-repetition accuracies: not a ratio of per-question sums
        rows = one_variant_per_question(records)
        per_repetition = pd.Series(correct_flags(rows), index=rows["repetition"].to_numpy()).groupby(level=0).mean()
        out["acc_std"] = float(per_repetition.std(ddof=1))
    return out


# The parts of a repetition run's trials, by the question's SURE/UNSURE class and the trial's outcome: the two
# right parts add up to `acc_mean`, INVALID is a part of its own (never inside a wrong part), and all five add up to 1.
TRIAL_PARTS = ("right_sure", "right_unsure", "wrong_unsure", "wrong_sure", "invalid")


def trial_parts(
    records: pd.DataFrame, *, consistency: float = 0.99, conf: float = 0.999, sure_rule: str = SURE_BY_ANSWER
) -> dict[str, float]:
    """The share of trials in each of TRIAL_PARTS, averaged over repetitions as `acc_mean` is (each repetition's
    shares over the trials made at it), so that right_sure + right_unsure == acc_mean; {} where `acc_mean` is
    not defined (R == 1, no single variant per question, an adaptive run that skipped trials).
    """
    check_sure_rule(sure_rule)
    if records.empty or int(records["repetition"].max()) < 1:
        return {}
    rows = one_variant_per_question(records)
    if rows.empty or skipped_trials(rows):
        return {}
    sure = question_outcomes(records, consistency=consistency, conf=conf, sure_rule=sure_rule)["sure"]
    on_sure = rows["question_id"].map(sure).fillna(False).to_numpy(dtype=bool)
    right, invalid = correct_flags(rows), invalid_mask(rows)
    wrong = ~right & ~invalid
    masks = {
        "right_sure": right & on_sure,
        "right_unsure": right & ~on_sure,
        "wrong_unsure": wrong & ~on_sure,
        "wrong_sure": wrong & on_sure,
        "invalid": invalid,
    }
    frame = pd.DataFrame(masks).astype(float)
    frame["repetition"] = rows["repetition"].to_numpy()
    per_repetition = frame.groupby("repetition").mean()  # each repetition: shares of the trials made at it
    return {name: float(per_repetition[name].mean()) for name in TRIAL_PARTS}


def rws_st_string(metrics: dict[str, float]) -> str:
    """The paper's human-readable `RWS | S/T`.

    >>> rws_st_string({"rws": 0.8113, "st": 0.53})
    '0.81 | 53%'
    """
    rws = metrics["rws"]
    rws_text = "n/a" if rws is None or math.isnan(rws) else f"{rws:.2f}"
    return f"{rws_text} | {metrics['st'] * 100:.0f}%"
