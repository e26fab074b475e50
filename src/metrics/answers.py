"""Answer identities shared by every metric family.

Answers are compared by option identity (`chosen_option`, the original option the label points to),
with INVALID (`parsed_label` null) as one more category: equal to other INVALIDs, never correct.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from src.core.variant import ORIGINAL as ORIGINAL  # variant_kind of the unaltered option order (read by the families)

INVALID = -100  # answer key of an unparsed trial; option keys are >= -2 (NOTA -1, filler -2), so it never matches one


def invalid_mask(records: pd.DataFrame) -> np.ndarray:
    """True where the answer could not be parsed."""
    return records["parsed_label"].isna().to_numpy()


def answer_keys(records: pd.DataFrame) -> np.ndarray:
    """One int per trial: the chosen original option, or INVALID.

    >>> df = pd.DataFrame({"parsed_label": ["A", None], "chosen_option": [2, None]})
    >>> answer_keys(df).tolist()
    [2, -100]
    """
    chosen = pd.to_numeric(records["chosen_option"], errors="coerce").to_numpy(dtype=float)
    # a parsed label with no option behind it is a records bug; count it as INVALID rather than as option 0
    invalid = invalid_mask(records) | np.isnan(chosen)
    return np.where(invalid, INVALID, np.nan_to_num(chosen, nan=INVALID)).astype(np.int64)


def correct_flags(records: pd.DataFrame) -> np.ndarray:
    """The records' `correct` column as bools, forced False for INVALID trials."""
    correct = records["correct"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    flags: np.ndarray = correct & ~invalid_mask(records)
    return flags


def first_repetition(records: pd.DataFrame) -> pd.DataFrame:
    """Repetition 0 of every variant: what the CoRA and fluctuation families read at any R."""
    if "repetition" not in records.columns:
        return records
    return records[records["repetition"] == 0]


def metric_suffix(value: float) -> str:
    """`0.5 -> "0.5"`, `1 -> "1.0"`: the level as docs/metrics.md writes it in a name like `bmca_1.0`."""
    return str(float(value))


def natural_key(text: str) -> tuple[int | str, ...]:
    """Sort key that orders "nota_2" before "nota_10"."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text)))
