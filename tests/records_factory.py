"""Hand-built records tables for metric tests: columns as in src/core/records.py, unneeded ones filled with defaults.

An answer is given as the original option the model chose (or None for INVALID); labels, `correct` and the
other derived columns follow from the displayed `order` the way the pipeline derives them.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import pandas as pd

from src.core.records import COLUMNS

LETTERS = string.ascii_uppercase
INVALID_ANSWER = None  # readability alias in tests


def trial(
    question_id: str = "q1",
    *,
    answer: int | None = 0,
    kind: str = "original",
    variant_id: str | None = None,
    repetition: int = 0,
    order: Sequence[int] = (0, 1, 2, 3),
    correct_option: int = 0,
    probs: Sequence[float] | None = None,
    subject: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One records row. `answer` is an original option index shown in `order`, or None (INVALID)."""
    order = tuple(order)
    correct_label = LETTERS[order.index(correct_option)]
    parsed = None if answer is None else LETTERS[order.index(answer)]
    row = {
        "run_id": "run",
        "model": "model",
        "benchmark": "bench",
        "variant_set": "test",
        "question_id": question_id,
        "subject": subject,
        "variant_kind": kind,
        "variant_id": variant_id if variant_id is not None else kind,
        "repetition": repetition,
        "temperature": 0.0,
        "seed": 0,
        "scoring": "generate",
        "n_options": len(order),
        "option_order": list(order),
        "correct_label": correct_label,
        "correct_option": correct_option,
        "raw_output": parsed or "???",
        "parsed_label": parsed,
        "chosen_option": answer,
        "correct": parsed is not None and parsed == correct_label,
        "label_probs": None if probs is None else list(probs),
        "label_mass": None if probs is None else 1.0,
        "option_loglik": None,
        "option_loglik_norm": None,
        "prompt_hash": "0" * 16,
        "cache_hit": False,
        "fmt": "mcq",
        "variant_level": None,
        "perm_sets": [],
        "asked_option": None,
        "parsed_labels": None,
        "chosen_options": None,
        "answer_dist": None,
        "parse_rule": "first_token",
        "truncated": False,
        "decision_margin": None,
    }
    row.update(extra)
    return row


def records(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """A records DataFrame from trial() rows, records columns first."""
    frame = pd.DataFrame(list(rows))
    extra = [column for column in frame.columns if column not in COLUMNS]
    return frame[[*COLUMNS, *extra]] if len(frame) else pd.DataFrame(columns=[*COLUMNS, *extra])


def divergent(
    question_id: str, right: Sequence[bool], *, subject: str | None = None, repetition: int = 0
) -> list[dict]:
    """A divergent set answered once per variant: right[0] is the original, the rest are NOTA variants."""
    rows = []
    for j, ok in enumerate(right):
        kind = "original" if j == 0 else "nota"
        rows.append(
            trial(
                question_id,
                answer=0 if ok else 1,
                kind=kind,
                variant_id=kind if j == 0 else f"nota_{j}",
                subject=subject,
                repetition=repetition,
            )
        )
    return rows


def repeated(
    question_id: str,
    answers: Sequence[int | None],
    *,
    correct_option: int = 0,
    kind: str = "original",
    variant_id: str | None = None,
    order: Sequence[int] = (0, 1, 2, 3),
) -> list[dict]:
    """One variant asked len(answers) times, repetition r answering answers[r]."""
    return [
        trial(
            question_id,
            answer=a,
            repetition=r,
            correct_option=correct_option,
            kind=kind,
            variant_id=variant_id,
            order=order,
        )
        for r, a in enumerate(answers)
    ]


def permuted(
    question_id: str,
    perm_set: str,
    orders: Sequence[Sequence[int]],
    answers: Sequence[int | None],
    *,
    correct_option: int = 0,
    probs: Sequence[Sequence[float]] | None = None,
) -> list[dict]:
    """One permutation set of a question: orders[0] is the reference order, answers are option identities."""
    return [
        trial(
            question_id,
            answer=a,
            kind=f"perm_{perm_set}",
            variant_id=f"{perm_set}_{pos}",
            order=order,
            correct_option=correct_option,
            probs=None if probs is None else probs[pos],
            perm_set=perm_set,
            perm_pos=pos,
        )
        for pos, (order, a) in enumerate(zip(orders, answers))
    ]


def cyclic_orders(n: int) -> list[tuple[int, ...]]:
    base = tuple(range(n))
    return [base[i:] + base[:i] for i in range(n)]
