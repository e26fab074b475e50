"""Answer-fluctuation family (answer-fluctuation paper, eqs 1-9) and PriDe accuracy.

Input: the records table plus `perm_set` (name of the permutation set, e.g. "cyclic") and `perm_pos`
(position of the order in its set, 0 = the reference order m_1). Repetition 0 only. Answers are option
identities; INVALID is its own answer (agrees with INVALID, never correct). Each metric is computed per
question and averaged over questions, then logged per set as `<name>@<perm_set>`.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from src.core.metric_choices import PRIDE_AUTHORS, PRIDE_PAPER, PRIDE_PROTOCOLS

from .answers import answer_keys, first_repetition
from .per_question import PerQuestion, mean_of, values_of

PRIOR_PREFIX = "pride_prior_"  # pride_prior_A: the position prior PriDe removes, slot A
PRIDE_SET = "cyclic"  # PriDe estimates its position prior from cyclic permutations (Zheng et al. 2024)
# Which questions PriDe accuracy scores: "paper" only the questions outside the calibration share (docs/metrics.md);
# "authors" every question, the calibration ones by their option probabilities averaged over the cyclic orders,
# as the authors' evaluation does (chujiezheng/LLM-MCQ-Bias code/debias_pride.py with debias_utils.simple).


def _ordered(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.sort_values(["question_id", "perm_pos"], kind="stable")


def complete_questions(rows: pd.DataFrame) -> pd.DataFrame:
    """One permutation set's rows of the questions that can be scored on it: those with the reference order
    (perm_pos 0: every metric compares with it) and, when some question of the set has two or more orders,
    two or more orders (one order cannot fluctuate; it is what remains when the option_refs policy fixes
    every slot but one). Questions with fewer orders than others (fewer free options) keep theirs.

    >>> rows = pd.DataFrame({"question_id": ["a", "a", "b", "c", "c"], "perm_pos": [0, 1, 0, 1, 2]})
    >>> sorted(complete_questions(rows)["question_id"].unique())
    ['a']
    """
    if rows.empty:
        return rows
    question = rows["question_id"]
    has_reference = (rows["perm_pos"] == 0).groupby(question).transform("any")
    size = question.map(question.value_counts())
    several = size >= 2
    keep = has_reference & (several if (several & has_reference).any() else True)
    return rows[keep.to_numpy()]


def _has_probs(rows: pd.DataFrame) -> bool:
    return "label_probs" in rows.columns and bool(rows["label_probs"].map(_is_vector).all())


def _is_vector(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and len(value) > 0


def _renormalised(probs: Sequence[float] | np.ndarray) -> np.ndarray:
    p: np.ndarray = np.clip(np.asarray(probs, dtype=float), 0.0, None)
    share: np.ndarray = p / p.sum()
    return share


def _one_minus(ratios: list[np.ndarray]) -> np.ndarray:
    return 1.0 - ratios[0]


def answer_fluctuation_statistics(rows: pd.DataFrame) -> dict[str, PerQuestion]:
    """`fr`, `aacc`, `sacc`, `wacc`, `bacc`, `sensg`, `one_minus_sensg` over one permutation set's rows, stated
    per question (each a mean over the set's complete questions; `answer_fluctuation` gives their values)."""
    rows = _ordered(complete_questions(rows))
    if rows.empty:
        return {}
    answers = pd.Series(answer_keys(rows), index=rows.index)
    question = rows["question_id"]
    reference = answers.groupby(question.to_numpy()).transform("first")
    frame = pd.DataFrame(
        {
            "question_id": question.to_numpy(),
            "agree": (answers == reference).to_numpy(),
            "right": (answers.to_numpy() == pd.to_numeric(rows["correct_option"]).to_numpy()),
        }
    )
    frame["reference_right"] = frame["right"].groupby(frame["question_id"]).transform("first")
    per_question = frame.groupby("question_id").agg(
        all_agree=("agree", "all"),
        agree_share=("agree", "mean"),
        aacc=("right", "mean"),
        bacc=("right", "any"),
        reference_right=("reference_right", "first"),
    )
    fr = 1.0 - per_question["all_agree"].astype(float)
    sacc = per_question["reference_right"] * per_question["agree_share"]
    wacc = (per_question["reference_right"] & per_question["all_agree"]).astype(float)
    bacc = per_question["bacc"].astype(float)
    sensg = mean_of(bacc - wacc)
    return {
        "fr": mean_of(fr, share=True),
        "aacc": mean_of(per_question["aacc"]),
        "sacc": mean_of(sacc),
        "wacc": mean_of(wacc, share=True),
        "bacc": mean_of(bacc),
        "sensg": sensg,
        "one_minus_sensg": PerQuestion(sensg.ratios, _one_minus),
    }


def answer_fluctuation(rows: pd.DataFrame) -> dict[str, float]:
    """`fr`, `aacc`, `sacc`, `wacc`, `bacc`, `sensg`, `one_minus_sensg` over one permutation set's rows.

    >>> rows = pd.DataFrame({"question_id": "q", "perm_pos": [0, 1], "parsed_label": ["A", "B"],
    ...     "chosen_option": [0, 1], "correct_option": 0})
    >>> answer_fluctuation(rows)["sacc"], answer_fluctuation(rows)["wacc"]
    (0.5, 0.0)
    """
    return values_of(answer_fluctuation_statistics(rows))


def probability_fluctuation(rows: pd.DataFrame) -> dict[str, float]:
    """`prob_mass`, `one_minus_brier`, `one_minus_entropy` over one permutation set's rows ({} without label_probs).

    `label_probs` are in displayed-label order; the correct label of each order is the slot showing
    `correct_option`. Entropy is normalised by log2 |L|, so orders with a single label are left out of it.
    """
    rows = complete_questions(rows)
    if rows.empty or not _has_probs(rows):
        return {}
    mass, brier, entropy = [], [], []
    for probs, order, correct in zip(rows["label_probs"], rows["option_order"], rows["correct_option"]):
        p = _renormalised(probs)
        target = np.zeros_like(p)
        target[list(order).index(int(correct))] = 1.0
        mass.append(float(p @ target))
        brier.append(float(((target - p) ** 2).sum()))
        nonzero = p[p > 0]
        entropy.append(float(-(nonzero * np.log2(nonzero)).sum() / math.log2(len(p))) if len(p) > 1 else np.nan)
    per_row = pd.DataFrame(
        {"question_id": rows["question_id"].to_numpy(), "mass": mass, "brier": brier, "entropy": entropy}
    )
    per_question = per_row.groupby("question_id")[["mass", "brier", "entropy"]].mean()
    out = {
        "prob_mass": float(per_question["mass"].mean()),
        "one_minus_brier": float(1.0 - per_question["brier"].mean()),
    }
    if per_question["entropy"].notna().any():
        out["one_minus_entropy"] = float(1.0 - per_question["entropy"].mean())
    return out


def _pride_rows(records: pd.DataFrame, perm_set: str) -> pd.DataFrame:
    rows = first_repetition(records)
    return rows[rows["perm_set"] == perm_set]


def _n_calibration(n_questions: int, share: float) -> int:
    return max(1, round(share * n_questions))


def _pride_problem(rows: pd.DataFrame, perm_set: str, share: float) -> str | None:
    """Why PriDe cannot be computed on these rows, or None."""
    if rows.empty or not _has_probs(rows):
        return f"pride_acc needs label_probs on the '{perm_set}' permutation set"
    n_questions = rows["question_id"].nunique()
    if _n_calibration(n_questions, share) >= n_questions:
        return f"pride_acc needs more questions than the {_n_calibration(n_questions, share)} it calibrates on"
    if not _full_cycles(rows):
        return f"pride_acc needs a question with every cyclic order on the '{perm_set}' set"
    return None


def _full_cycles(rows: pd.DataFrame) -> list[str]:
    """Sorted ids of the questions with all their cyclic orders (one per label) and the reference order: the
    only ones whose mean over orders is a position prior (fixed options would bias it)."""
    out: list[str] = []
    for question_id, group in rows.groupby("question_id", sort=True):
        n_labels = len(group["label_probs"].iloc[0])
        if len(group) == n_labels and (group["perm_pos"] == 0).any() and set(group["perm_pos"]) == set(range(n_labels)):
            out.append(str(question_id))
    return out


def _calibration(rows: pd.DataFrame, share: float, seed: int) -> set[str]:
    """The seeded calibration questions PriDe estimates its prior on (`pride_acc`)."""
    n_calibration = _n_calibration(rows["question_id"].nunique(), share)
    pool = _full_cycles(rows)  # every question, unless some lack cyclic orders (option_refs)
    return set(random.Random(seed).sample(pool, min(n_calibration, len(pool))))


def _calibration_priors(rows: pd.DataFrame, calibration: set[str]) -> dict[int, np.ndarray]:
    """PriDe's position prior per label count: per calibration question the softmax of its mean log p(label) over
    the cyclic orders, averaged over the calibration questions."""
    priors: dict[int, list[np.ndarray]] = {}
    for question_id, group in rows.groupby("question_id", sort=True):
        if question_id not in calibration:
            continue
        probs = np.stack([_renormalised(p) for p in group["label_probs"]])
        mean_logp = np.log(np.clip(probs, 1e-12, None)).mean(axis=0)
        prior = np.exp(mean_logp - mean_logp.max())
        priors.setdefault(probs.shape[1], []).append(prior / prior.sum())
    return {size: np.mean(found, axis=0) for size, found in priors.items()}


def pride_prior(
    records: pd.DataFrame, *, perm_set: str = PRIDE_SET, calibration_share: float = 0.05, seed: int = 0
) -> dict[str, float]:
    """PriDe's estimated position prior as `pride_prior_<slot>` (slots A, B, ... as in src/metrics/slots.py), for
    the label count most calibration questions have; {} where `pride_acc` cannot be computed (no `perm_set`
    column: the tidy rows of `src.metrics.families.tidy_permutations` hold it)."""
    if "perm_set" not in records.columns:
        return {}
    rows = _ordered(_pride_rows(records, perm_set))
    if _pride_problem(rows, perm_set, calibration_share) is not None:
        return {}
    calibration = _calibration(rows, calibration_share, seed)
    sizes = rows[rows["question_id"].isin(calibration)].groupby("question_id")["label_probs"].first().map(len)
    prior = _calibration_priors(rows, calibration).get(int(sizes.mode().min()))
    if prior is None:
        return {}
    return {f"{PRIOR_PREFIX}{string.ascii_uppercase[slot]}": float(value) for slot, value in enumerate(prior)}


def pride_acc(
    records: pd.DataFrame,
    *,
    perm_set: str = PRIDE_SET,
    calibration_share: float = 0.05,
    seed: int = 0,
    protocol: str = PRIDE_PAPER,
) -> float:
    """PriDe accuracy (Zheng et al. 2024) as docs/metrics.md defines it (`protocol="paper"`), or as the authors'
    code scores it (`protocol="authors"`): the calibration questions count too, each predicted as the option
    whose probability, averaged over its cyclic orders, is highest.

    A seeded `calibration_share` of the questions (at least one, drawn with `random.Random(seed)` from
    the sorted question ids) estimate a label-position prior: per question, the mean of log p(label)
    over its `perm_set` orders, softmaxed; priors are averaged over calibration questions. Every other
    question is predicted as argmax_l(log p(l | x) - log prior(l)) on its reference order (perm_pos 0)
    and scored. Priors are kept per label count |L|; a question whose |L| no calibration question has
    is scored without debiasing. Only questions with every cyclic order are drawn for calibration (the
    same draw as before when all have them); a question without its reference order is not scored.
    Raises ValueError when label_probs or questions are missing, or for an unknown protocol.
    """
    if protocol not in PRIDE_PROTOCOLS:
        raise ValueError(f"unknown PriDe protocol {protocol!r}; choose one of {', '.join(PRIDE_PROTOCOLS)}")
    rows = _ordered(_pride_rows(records, perm_set))
    problem = _pride_problem(rows, perm_set, calibration_share)
    if problem:
        raise ValueError(problem)
    calibration = _calibration(rows, calibration_share, seed)
    mean_prior = _calibration_priors(rows, calibration)
    scored = []
    hits = []
    for question_id, group in rows.groupby("question_id", sort=True):
        probs = np.stack([_renormalised(p) for p in group["label_probs"]])
        logp = np.log(np.clip(probs, 1e-12, None))
        if question_id in calibration:
            if protocol == PRIDE_AUTHORS:  # each option's probability wherever it was shown, averaged over the orders
                by_option = np.zeros(probs.shape[1])
                for order, p in zip(group["option_order"], probs):
                    by_option[list(order)] += p
                hits.append(int(np.argmax(by_option)) == int(group["correct_option"].iloc[0]))
        elif (group["perm_pos"] == 0).any():  # scored on its reference order; without one it is left out
            first = group.iloc[0]
            scored.append((logp[0], list(first["option_order"]), int(first["correct_option"])))
    for logp, order, correct in scored:
        prior = mean_prior.get(len(logp))
        debiased = logp if prior is None else logp - np.log(prior)
        hits.append(order[int(np.argmax(debiased))] == correct)
    return float(np.mean(hits))


def _permutation_rows(records: pd.DataFrame) -> pd.DataFrame | None:
    """Repetition 0 of the rows in a permutation set; None without a `perm_set` column."""
    if "perm_set" not in records.columns or records.empty:
        return None
    rows = first_repetition(records)
    return rows[rows["perm_set"].notna()]


def fluctuation_statistics(records: pd.DataFrame) -> dict[str, PerQuestion]:
    """Every answer-fluctuation metric per permutation set (`wacc@cyclic`, ...) stated per question, and
    `full_fr` (`fr@full`, the fluctuation paper's reference)."""
    rows = _permutation_rows(records)
    if rows is None:
        return {}
    out: dict[str, PerQuestion] = {}
    for perm_set, group in rows.groupby("perm_set", sort=True):
        for name, statement in answer_fluctuation_statistics(group).items():
            out[f"{name}@{perm_set}"] = statement
    if "fr@full" in out:
        out["full_fr"] = out["fr@full"]
    return out


def fluctuation_metrics(
    records: pd.DataFrame, *, pride_share: float = 0.05, pride_seed: int = 0, pride_protocol: str = PRIDE_PAPER
) -> dict[str, float]:
    """Every fluctuation metric per permutation set (`wacc@cyclic`, ...), `full_fr` and `pride_acc@cyclic`.

    {} without a `perm_set` column. Probability metrics appear only for sets whose rows all carry
    label_probs; `pride_acc@cyclic` only with label_probs on a cyclic set of at least two questions.
    """
    rows = _permutation_rows(records)
    if rows is None:
        return {}
    answers = values_of(fluctuation_statistics(rows))
    out: dict[str, float] = {}
    for perm_set, group in rows.groupby("perm_set", sort=True):
        out.update((name, value) for name, value in answers.items() if name.endswith(f"@{perm_set}"))
        for name, value in probability_fluctuation(group).items():
            out[f"{name}@{perm_set}"] = value
    if "full_fr" in answers:
        out["full_fr"] = answers["full_fr"]
    if _pride_problem(_pride_rows(rows, PRIDE_SET), PRIDE_SET, pride_share) is None:
        out[f"pride_acc@{PRIDE_SET}"] = pride_acc(
            rows, calibration_share=pride_share, seed=pride_seed, protocol=pride_protocol
        )
        out.update(pride_prior(rows, calibration_share=pride_share, seed=pride_seed))
    return out
