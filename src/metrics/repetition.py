"""Repetition-trials family (non-determinism paper, section 3): SURE/UNSURE shares, RWS | S/T, accuracy spread.

Uses every repetition of one variant per question: the `original` variant when the run has one, or the
only variant when every question has exactly one; with several variants per question and no original it
returns {}. R is the planned repetition count, max(repetition) + 1, so early-stopped questions (fewer rows)
are judged against the same p*. Answers are option identities with INVALID as its own category.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .answers import ORIGINAL, answer_keys, correct_flags
from .guessing import p_star


def _one_variant_per_question(records: pd.DataFrame) -> pd.DataFrame:
    original = records[records["variant_kind"] == ORIGINAL]
    if not original.empty:
        return original
    if (records.groupby("question_id")["variant_id"].nunique() == 1).all():
        return records
    return records.iloc[0:0]


def question_outcomes(records: pd.DataFrame, *, consistency: float = 0.99, conf: float = 0.999) -> pd.DataFrame:
    """Per question: n_max, n_correct, p_star, sure, right (indexed by question_id)."""
    rows = _one_variant_per_question(records)
    R = int(records["repetition"].max()) + 1  # noqa: N806 - the papers' name
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
    return per_question


def repetition_metrics(records: pd.DataFrame, *, consistency: float = 0.99, conf: float = 0.999) -> dict[str, float]:
    """`sure_right`, `unsure_right`, `unsure_wrong`, `sure_wrong`, `rws`, `st`, `acc_mean`, `acc_std`.

    The four shares are over questions and sum to 1; `rws` is NaN when nothing is SURE. `acc_mean` and
    `acc_std` (ddof=1) are over the R per-repetition accuracies (each over the trials made at that repetition).
    {} when R == 1 or no single variant per question can be chosen.
    """
    if records.empty or int(records["repetition"].max()) < 1:
        return {}
    rows = _one_variant_per_question(records)
    if rows.empty:
        return {}
    outcomes = question_outcomes(records, consistency=consistency, conf=conf)
    sure, right = outcomes["sure"].to_numpy(), outcomes["right"].to_numpy()
    out = {
        "sure_right": float(np.mean(sure & right)),
        "unsure_right": float(np.mean(~sure & right)),
        "unsure_wrong": float(np.mean(~sure & ~right)),
        "sure_wrong": float(np.mean(sure & ~right)),
    }
    n_sure = out["sure_right"] + out["sure_wrong"]
    out["rws"] = out["sure_right"] / n_sure if n_sure > 0 else float("nan")
    out["st"] = float(np.mean(sure))
    per_repetition = pd.Series(correct_flags(rows), index=rows["repetition"].to_numpy()).groupby(level=0).mean()
    out["acc_mean"] = float(per_repetition.mean())
    out["acc_std"] = float(per_repetition.std(ddof=1))
    return out


def rws_st_string(metrics: dict[str, float]) -> str:
    """The paper's human-readable `RWS | S/T`.

    >>> rws_st_string({"rws": 0.8113, "st": 0.53})
    '0.81 | 53%'
    """
    rws = metrics["rws"]
    rws_text = "n/a" if rws is None or math.isnan(rws) else f"{rws:.2f}"
    return f"{rws_text} | {metrics['st'] * 100:.0f}%"
