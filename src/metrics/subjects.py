"""Per-subject breakdown: any metric function applied to each subject's rows."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

MetricFn = Callable[[pd.DataFrame], dict[str, float]]


def by_subject(records: pd.DataFrame, metric_fn: MetricFn) -> dict[str, dict[str, float]]:
    """`{subject: metric_fn(rows of that subject)}`; rows without a subject are left out.

    >>> df = pd.DataFrame({"subject": ["law", "law", "art"], "correct": [True, False, True]})
    >>> by_subject(df, lambda rows: {"acc": float(rows["correct"].mean())})
    {'art': {'acc': 1.0}, 'law': {'acc': 0.5}}
    """
    if "subject" not in records.columns:
        return {}
    rows = records[records["subject"].notna()]
    return {str(subject): metric_fn(group) for subject, group in rows.groupby("subject", sort=True)}


def flatten_by_subject(breakdown: dict[str, dict[str, float]]) -> dict[str, float]:
    """`{"law": {"mcqa": 0.5}} -> {"mcqa/law": 0.5}`, the names logged per subject."""
    return {f"{name}/{subject}": value for subject, metrics in breakdown.items() for name, value in metrics.items()}
