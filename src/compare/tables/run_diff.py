"""Per-question disagreements between two runs, trial by trial (`--diff RUN_A RUN_B`)."""

from __future__ import annotations

import pandas as pd

from src.metrics.answers import answer_keys, correct_flags


def diff_records(a: pd.DataFrame, b: pd.DataFrame) -> tuple[dict[str, float], pd.DataFrame, pd.DataFrame]:
    """Compare two runs' answers trial by trial on the (question, variant, repetition) both asked.

    Returns (summary, per-question table of questions with a disagreement, trial-level disagreements).
    Answers are option identities (INVALID its own answer), as in every metric.

    >>> base = {"question_id": ["q1", "q2"], "variant_id": "original", "repetition": 0, "parsed_label": ["A", "B"]}
    >>> a = pd.DataFrame({**base, "chosen_option": [0, 1], "correct": [True, False]})
    >>> b = pd.DataFrame({**base, "chosen_option": [0, 2], "correct": [True, True]})
    >>> diff_records(a, b)[0]["disagreement_rate"]
    0.5
    """
    keys = ["question_id", "variant_id", "repetition"]

    def prepared(records: pd.DataFrame) -> pd.DataFrame:
        frame = records[keys].copy()
        frame["answer"] = answer_keys(records)
        frame["correct"] = correct_flags(records)
        frame["label"] = records["parsed_label"].fillna("INVALID").astype(str).to_numpy()
        if "subject" in records.columns:
            frame["subject"] = records["subject"].to_numpy()
        return frame.drop_duplicates(keys)

    joined = prepared(a).merge(prepared(b).drop(columns="subject", errors="ignore"), on=keys, suffixes=("_a", "_b"))
    if joined.empty:
        return {"shared_trials": 0.0}, pd.DataFrame(), pd.DataFrame()
    joined["disagree"] = joined["answer_a"] != joined["answer_b"]
    summary = {
        "shared_trials": float(len(joined)),
        "shared_questions": float(joined["question_id"].nunique()),
        "disagreement_rate": float(joined["disagree"].mean()),
        "both_right": float((joined["correct_a"] & joined["correct_b"]).mean()),
        "only_a_right": float((joined["correct_a"] & ~joined["correct_b"]).mean()),
        "only_b_right": float((~joined["correct_a"] & joined["correct_b"]).mean()),
        "both_wrong": float((~joined["correct_a"] & ~joined["correct_b"]).mean()),
    }
    per_question = joined.groupby("question_id", sort=True).agg(
        trials=("disagree", "size"),
        disagreements=("disagree", "sum"),
        a_right=("correct_a", "sum"),
        b_right=("correct_b", "sum"),
    )
    per_question = per_question[per_question["disagreements"] > 0].reset_index()
    trials = joined.loc[joined["disagree"], keys + ["label_a", "correct_a", "label_b", "correct_b"]]
    return summary, per_question, trials.reset_index(drop=True)
