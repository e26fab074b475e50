"""CoRA family (CoRA paper, eqs 1-7): MCQA, MCQA+, MV, BMCA(c), CI, CoRA, and the variant-slot bootstrap (section 6.1).

Reads repetition 0 of every variant. A question's divergent set is every variant it has, the original included.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .answers import ORIGINAL, correct_flags, first_repetition, metric_suffix, natural_key

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


def mcqa_score(records: pd.DataFrame) -> float | None:
    """Question-weighted accuracy on the `original` variant (repetition 0); None when no original rows exist."""
    frame = _correct_frame(records)
    original = frame[frame["variant_kind"] == ORIGINAL]
    if original.empty:
        return None
    return float(original.groupby("question_id")["correct"].mean().mean())


def mcqa_metrics(records: pd.DataFrame) -> dict[str, float]:
    """`{"mcqa": ...}`, or `{}` when the run has no `original` variant."""
    score = mcqa_score(records)
    return {} if score is None else {"mcqa": score}


def _consistency_index(mcqa: float, bmca_full: float) -> float:
    return 1.0 - (mcqa - bmca_full)


def cora_metrics(records: pd.DataFrame, *, bmca_levels: Sequence[float] = BMCA_LEVELS) -> dict[str, float]:
    """`mcqa`, `mcqa_plus`, `mv`, `bmca_<c>` for each level, `ci`, `cora`.

    `mcqa`, `ci` and `cora` need an `original` variant and are left out without one. CI compares MCQA with
    BMCA(1.0) over the same questions: those that have an original row.

    >>> df = pd.DataFrame({"question_id": ["q1", "q1", "q2", "q2"], "variant_kind": ["original", "nota"] * 2,
    ...     "variant_id": ["o", "n", "o", "n"], "repetition": 0, "parsed_label": "A",
    ...     "correct": [True, True, True, False]})
    >>> m = cora_metrics(df)
    >>> m["mcqa"], m["mcqa_plus"], m["bmca_1.0"], m["ci"], m["cora"]
    (1.0, 0.75, 0.5, 0.5, 0.5)
    """
    frame = _correct_frame(records)
    if frame.empty:
        return {}
    rc = response_consistency(records)
    out: dict[str, float] = {"mcqa_plus": float(rc.mean()), "mv": float((rc > 0.5).mean())}
    for level in bmca_levels:
        out[f"bmca_{metric_suffix(level)}"] = float((rc >= level).mean())
    originals = frame.loc[frame["variant_kind"] == ORIGINAL, "question_id"].unique()
    if len(originals):
        mcqa = mcqa_score(records)
        bmca_full = float((rc.loc[np.sort(originals)] >= 1.0).mean())
        ci = _consistency_index(mcqa, bmca_full)
        out.update(mcqa=mcqa, ci=ci, cora=mcqa * ci)  # eq. 7: MCQA x CI, not MCQA+ x CI
    return dict(sorted(out.items()))


def _slot_matrices(frame: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per divergent-set size M: (question ids, correct matrix N_M x M) with variants in natural variant_id order."""
    per_variant = frame.groupby(["question_id", "variant_id"], sort=False)["correct"].mean()
    by_question: dict[str, list[tuple[tuple, float]]] = {}
    for (question_id, variant_id), value in per_variant.items():
        by_question.setdefault(question_id, []).append((natural_key(variant_id), value))
    groups: dict[int, tuple[list, list]] = {}
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
        for size, (ids, matrix) in groups.items():
            slots = np.minimum((u * size).astype(np.int64), size - 1)
            offsets = (np.arange(stop - start) * size)[:, None]
            counts = np.bincount((slots + offsets).ravel(), minlength=(stop - start) * size)
            counts = counts.reshape(stop - start, size).astype(float)
            hits = matrix @ counts.T  # questions x resamples: right answers among the k drawn slots
            plus[start:stop] += hits.sum(axis=0) / k_slots
            mv[start:stop] += (2 * hits > k_slots).sum(axis=0)
            full_original[start:stop] += (hits[has_original_row[size]] >= k_slots - 1e-9).sum(axis=0)
    stats = {"mcqa_plus": plus / n_questions, "mv": mv / n_questions}
    if mcqa is not None:
        bmca_full = full_original / len(original_ids)
        stats["cora"] = mcqa * _consistency_index(mcqa, bmca_full)
    out: dict[str, float] = {}
    for name, values in stats.items():
        out[f"{name}_boot_mean"] = float(values.mean())
        out[f"{name}_boot_std"] = float(values.std(ddof=1)) if n_resamples > 1 else float("nan")
    return out
