"""Which displayed slot a trial chose and which held the right answer: what the position-bias metrics
(src/metrics/slots.py) count, and what decides whether a run has them (src/metrics/families.py). A module of its own
so that the family rules read it without the intervals the metrics need."""

from __future__ import annotations

import string

import numpy as np
import pandas as pd

SLOT_NAMES = string.ascii_uppercase


def slot_index(label: object) -> int | None:
    """The displayed slot (0 = first) a label names: a letter's place in the alphabet, a number minus one; None
    for anything else (INVALID, a multi-select list, Yes/No).

    >>> slot_index("A"), slot_index("c"), slot_index("3"), slot_index("Yes"), slot_index(None)
    (0, 2, 2, None, None)
    """
    if not isinstance(label, str):
        return None
    text = label.strip()
    if len(text) == 1 and text.upper() in SLOT_NAMES:
        return SLOT_NAMES.index(text.upper())
    if text.isdigit() and 1 <= int(text) <= len(SLOT_NAMES):
        return int(text) - 1
    return None


def _slot_indices(labels: pd.Series) -> pd.Series:
    """`slot_index` of every label, as a float Series (NaN: no slot), computed once per distinct label: a run's
    labels are a handful, its trials many."""
    codes, uniques = pd.factorize(labels, use_na_sentinel=True)
    slots = np.array([slot_index(u) for u in uniques] + [None], dtype=float)  # the last: NA's code, -1
    return pd.Series(slots[codes], index=labels.index)


def slot_trials(records: pd.DataFrame) -> pd.DataFrame:
    """The trials the slot metrics count: multiple-choice, a parsed label and a right label that name a slot;
    columns question_id, chosen (slot), right (slot)."""
    if records.empty or "parsed_label" not in records.columns:
        return pd.DataFrame(columns=["question_id", "chosen", "right"])
    rows = records
    if "fmt" in rows.columns:
        rows = rows[rows["fmt"].fillna("mcq") == "mcq"]
    chosen = _slot_indices(rows["parsed_label"])
    right = _slot_indices(rows["correct_label"])
    keep = chosen.notna() & right.notna()
    return pd.DataFrame(
        {
            "question_id": rows["question_id"][keep].astype(str).to_numpy(),
            "chosen": chosen[keep].astype(int).to_numpy(),
            "right": right[keep].astype(int).to_numpy(),
        }
    )
