"""CoRA family (CoRA paper, eqs 1-7): MCQA, MCQA+, MV, BMCA(c), CI, CoRA, and the variant-slot bootstrap (section 6.1).

Reads repetition 0 of every variant. A question's divergent set is every variant it has, the original included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import pandas as pd

from .answers import ORIGINAL, correct_flags, first_repetition, metric_suffix, natural_key
from .draws import draw_counts
from .per_question import PerQuestion, mean_of, values_of

BMCA_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # the paper's six consistency levels


def _correct_frame(records: pd.DataFrame) -> pd.DataFrame:
    rows = first_repetition(records)
    return pd.DataFrame(
        {
            "question_id": rows["question_id"].to_numpy(),
            "variant_kind": rows["variant_kind"].to_numpy(),
            "variant_id": rows["variant_id"].to_numpy(),
            "correct": correct_flags(rows),
        }
    )


def response_consistency(records: pd.DataFrame) -> pd.Series:
    """`rc_i`: share of question i's variants answered right (repetition 0), indexed by question_id.

    >>> df = pd.DataFrame({"question_id": ["q", "q", "q", "q"], "variant_kind": ["original"] + ["nota"] * 3,
    ...     "variant_id": ["o", "n1", "n2", "n3"], "repetition": 0, "parsed_label": "A",
    ...     "correct": [True, True, False, True]})
    >>> response_consistency(df).to_dict()
    {'q': 0.75}
    """
    frame = _correct_frame(records)
    grouped = frame.groupby("question_id", sort=True)["correct"]
    # one division per question keeps rc exact enough that rc >= c agrees with the rational comparison
    return grouped.sum() / grouped.count()


def _original_correct(frame: pd.DataFrame) -> pd.Series:
    """Per question with an `original` row: its share of original rows answered right (one row: 0 or 1)."""
    original = frame[frame["variant_kind"] == ORIGINAL]
    return original.groupby("question_id")["correct"].mean()


def mcqa_statistics(records: pd.DataFrame) -> dict[str, PerQuestion]:
    """MCQA stated per question: the mean over the questions with an `original` variant of its accuracy there
    (repetition 0); {} when no original rows exist."""
    per_question = _original_correct(_correct_frame(records))
    return {} if per_question.empty else {"mcqa": mean_of(per_question, share=True)}


def mcqa_score(records: pd.DataFrame) -> float | None:
    """Question-weighted accuracy on the `original` variant (repetition 0); None when no original rows exist."""
    stated = mcqa_statistics(records)
    return stated["mcqa"].value() if stated else None


def mcqa_metrics(records: pd.DataFrame) -> dict[str, float]:
    """`{"mcqa": ...}`, or `{}` when the run has no `original` variant."""
    return values_of(mcqa_statistics(records))


def _consistency_index(ratios: list[np.ndarray]) -> np.ndarray:
    mcqa, bmca_full = ratios
    index: np.ndarray = 1.0 - (mcqa - bmca_full)
    return index


def _cora_value(ratios: list[np.ndarray]) -> np.ndarray:
    value: np.ndarray = ratios[0] * _consistency_index(ratios)  # eq. 7: MCQA x CI, not MCQA+ x CI
    return value


def cora_statistics(records: pd.DataFrame, *, bmca_levels: Sequence[float] = BMCA_LEVELS) -> dict[str, PerQuestion]:
    """The CoRA family stated per question: rc_i (`response_consistency`) for MCQA+, MV and BMCA(c); MCQA and
    BMCA(1.0) over the questions with an original row for CI = 1 - (MCQA - BMCA(1.0)) and CoRA = MCQA x CI."""
    frame = _correct_frame(records)
    if frame.empty:
        return {}
    grouped = frame.groupby("question_id", sort=True)["correct"]
    rc = grouped.sum() / grouped.count()  # as response_consistency
    out = {"mcqa_plus": mean_of(rc), "mv": mean_of(rc > 0.5)}
    for level in bmca_levels:
        out[f"bmca_{metric_suffix(level)}"] = mean_of(rc >= level, share=level == 1.0)
    per_question = _original_correct(frame)
    if len(per_question):
        ones = pd.Series(1.0, index=per_question.index)
        full = (rc.loc[per_question.index] >= 1.0).astype(float)
        pair = ((per_question.astype(float), ones), (full, ones))
        out["mcqa"] = mean_of(per_question, share=True)
        out["ci"] = PerQuestion(pair, _consistency_index)
        out["cora"] = PerQuestion(pair, _cora_value)
    return out


def cora_metrics(records: pd.DataFrame, *, bmca_levels: Sequence[float] = BMCA_LEVELS) -> dict[str, float]:
    """`mcqa`, `mcqa_plus`, `mv`, `bmca_<c>` for each level, `ci`, `cora` (`cora_statistics`).

    `mcqa`, `ci` and `cora` need an `original` variant and are left out without one. CI compares MCQA with
    BMCA(1.0) over the same questions: those that have an original row.

    >>> df = pd.DataFrame({"question_id": ["q1", "q1", "q2", "q2"], "variant_kind": ["original", "nota"] * 2,
    ...     "variant_id": ["o", "n", "o", "n"], "repetition": 0, "parsed_label": "A",
    ...     "correct": [True, True, True, False]})
    >>> m = cora_metrics(df)
    >>> m["mcqa"], m["mcqa_plus"], m["bmca_1.0"], m["ci"], m["cora"]
    (1.0, 0.75, 0.5, 0.5, 0.5)
    """
    return dict(sorted(values_of(cora_statistics(records, bmca_levels=bmca_levels)).items()))


def _slot_matrices(frame: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per divergent-set size M: (question ids, correct matrix N_M x M) with variants in natural variant_id order."""
    per_variant = frame.groupby(["question_id", "variant_id"], sort=False)["correct"].mean()
    by_question: dict[str, list[tuple[tuple[int | str, ...], float]]] = {}
    for key, value in per_variant.items():
        question_id, variant_id = cast(tuple[str, str], key)  # the two keys grouped by
        by_question.setdefault(question_id, []).append((natural_key(variant_id), value))
    groups: dict[int, tuple[list[str], list[list[float]]]] = {}
    for question_id in sorted(by_question):
        slots = [value for _, value in sorted(by_question[question_id], key=lambda item: item[0])]
        ids, rows = groups.setdefault(len(slots), ([], []))
        ids.append(question_id)
        rows.append(slots)
    return {size: (np.array(ids, dtype=object), np.array(rows, dtype=float)) for size, (ids, rows) in groups.items()}


def cora_bootstrap(
    records: pd.DataFrame, *, n_resamples: int = 10_000, k_slots: int = 100, seed: int = 0, chunk: int = 1_000
) -> dict[str, float]:
    """Variant-slot bootstrap of MCQA+, MV and CoRA (CoRA paper, section 6.1).

    One resample draws `k_slots` variant slots with replacement from the divergent set and gives *every*
    question the variants in those slots (the paper's "100 altered questions selected from the 26
    divergent questions"): rc_i is then the share of the drawn slots that question i answered right.
    Slots are the variants in natural `variant_id` order; a question with M_i variants maps a drawn
    uniform u to slot floor(u * M_i), so questions of equal M share slots exactly. MCQA is not resampled.
    Returns `<name>_boot_mean` and `<name>_boot_std` (ddof=1) for mcqa_plus, mv and cora (cora only
    with an original variant). Opt-in: `compute_metrics(..., bootstrap=True)`.
    """
    frame = _correct_frame(records)
    if frame.empty or n_resamples < 1 or k_slots < 1:
        return {}
    groups = _slot_matrices(frame)
    n_questions = sum(len(ids) for ids, _ in groups.values())
    original_ids = set(frame.loc[frame["variant_kind"] == ORIGINAL, "question_id"])
    mcqa = mcqa_score(records)
    has_original_row = {
        size: np.fromiter((qid in original_ids for qid in ids), dtype=bool, count=len(ids))
        for size, (ids, _) in groups.items()
    }
    rng = np.random.default_rng(seed)
    plus, mv, full_original = (np.zeros(n_resamples) for _ in range(3))
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        u = rng.random((stop - start, k_slots))
        for size, (_ids, matrix) in groups.items():
            slots = np.minimum((u * size).astype(np.int64), size - 1)
            counts = draw_counts(slots, size)
            hits = matrix @ counts.T  # questions x resamples: right answers among the k drawn slots
            plus[start:stop] += hits.sum(axis=0) / k_slots
            mv[start:stop] += (2 * hits > k_slots).sum(axis=0)
            full_original[start:stop] += (hits[has_original_row[size]] >= k_slots - 1e-9).sum(axis=0)
    stats = {"mcqa_plus": plus / n_questions, "mv": mv / n_questions}
    if mcqa is not None:
        bmca_full = full_original / len(original_ids)
        stats["cora"] = _cora_value([np.full(n_resamples, mcqa), bmca_full])
    out: dict[str, float] = {}
    for name, values in stats.items():
        out[f"{name}_boot_mean"] = float(values.mean())
        out[f"{name}_boot_std"] = float(values.std(ddof=1)) if n_resamples > 1 else float("nan")
    return out
