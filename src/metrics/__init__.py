"""Metric families: pure functions from the records table (src/records.py) to flat `{name: float}` dicts.

Definitions follow METRICS.md. `METRIC_FAMILIES` is the one registry (tests iterate it);
`compute_metrics` picks the families a run's records support and adds the run-level counts.
A family that lacks its inputs returns {} or leaves out what it cannot compute, never a 0 for an unknown.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import pandas as pd

from .answers import INVALID, ORIGINAL, correct_flags, invalid_mask
from .cora import BMCA_LEVELS, cora_bootstrap, cora_metrics, mcqa_metrics, response_consistency
from .fluctuation import answer_fluctuation, fluctuation_metrics, pride_acc, probability_fluctuation
from .guessing import T, can_stop, msgr, p_star
from .repetition import question_outcomes, repetition_metrics, rws_st_string
from .subjects import by_subject, flatten_by_subject

MetricFamily = Callable[[pd.DataFrame], dict[str, float]]

METRIC_FAMILIES: dict[str, MetricFamily] = {
    "mcqa": mcqa_metrics,
    "cora": cora_metrics,
    "repetition": repetition_metrics,
    "fluctuation": fluctuation_metrics,
}

REQUIRED_COLUMNS = ("question_id", "variant_kind", "variant_id", "repetition", "parsed_label", "chosen_option", "correct")


def applicable_families(records: pd.DataFrame) -> list[str]:
    """The families whose inputs the records hold.

    - `mcqa`: an `original` variant exists;
    - `cora`: more than one variant kind, one of them `original`;
    - `repetition`: max(repetition) >= 1;
    - `fluctuation`: the records have a `perm_set` column (added by the permutation-set generator).
    """
    if records.empty:
        return []
    kinds = set(records["variant_kind"].dropna())
    chosen = []
    if ORIGINAL in kinds:
        chosen.append("mcqa")
        if len(kinds) > 1:
            chosen.append("cora")
    if int(records["repetition"].max()) >= 1:
        chosen.append("repetition")
    if "perm_set" in records.columns:
        chosen.append("fluctuation")
    return chosen


def _keyword_options(fn: Callable) -> set[str]:
    return {
        name for name, param in inspect.signature(fn).parameters.items() if param.kind is inspect.Parameter.KEYWORD_ONLY
    }


def compute_metrics(
    records: pd.DataFrame, *, families: Sequence[str] | None = None, bootstrap: bool = False, **options: Any
) -> dict[str, float]:
    """All metrics of the chosen families (default: `applicable_families`) plus run-level counts.

    Always present: `n_questions`, `n_trials`, `invalid_rate` (share of trials with no parsed label) and
    `accuracy` (mean `correct` over all trials, INVALID counted wrong); the last two are NaN with no trials.
    `options` go to every family (and to `cora_bootstrap`) whose keyword-only parameters name them,
    e.g. `consistency=0.95`, `bmca_levels=(0.5, 1.0)`. `bootstrap=True` adds the CoRA variant-slot
    bootstrap (`n_resamples`, `k_slots`, `seed`) when the `cora` family is computed; it is opt-in because
    10,000 resamples cost about a second on a large run.

    >>> df = pd.DataFrame({"question_id": ["q1", "q2"], "variant_kind": "original", "variant_id": "original",
    ...     "repetition": 0, "parsed_label": ["A", None], "chosen_option": [0, None], "correct": [True, False]})
    >>> compute_metrics(df)
    {'n_questions': 2.0, 'n_trials': 2.0, 'invalid_rate': 0.5, 'accuracy': 0.5, 'mcqa': 0.5}
    """
    missing = [column for column in REQUIRED_COLUMNS if column not in records.columns]
    if missing:
        raise ValueError(f"records lack column(s) {', '.join(missing)}; build them with the columns of src/records.py")
    chosen = applicable_families(records) if families is None else list(families)
    unknown = [name for name in chosen if name not in METRIC_FAMILIES]
    if unknown:
        raise ValueError(f"unknown metric families {unknown}; choose from {sorted(METRIC_FAMILIES)}")
    accepted = set().union(*(_keyword_options(fn) for fn in [*METRIC_FAMILIES.values(), cora_bootstrap]))
    stray = sorted(set(options) - accepted)
    if stray:
        raise TypeError(f"unknown metric option(s) {stray}; known: {sorted(accepted)}")

    n_trials = len(records)
    out: dict[str, float] = {
        "n_questions": float(records["question_id"].nunique()),
        "n_trials": float(n_trials),
        "invalid_rate": float(invalid_mask(records).mean()) if n_trials else float("nan"),
        "accuracy": float(correct_flags(records).mean()) if n_trials else float("nan"),
    }
    for name in chosen:
        fn = METRIC_FAMILIES[name]
        wanted = _keyword_options(fn)
        out.update(fn(records, **{key: value for key, value in options.items() if key in wanted}))
    if bootstrap and "cora" in chosen:
        wanted = _keyword_options(cora_bootstrap)
        out.update(cora_bootstrap(records, **{key: value for key, value in options.items() if key in wanted}))
    return out


__all__ = [
    "BMCA_LEVELS",
    "INVALID",
    "METRIC_FAMILIES",
    "T",
    "answer_fluctuation",
    "applicable_families",
    "by_subject",
    "can_stop",
    "compute_metrics",
    "cora_bootstrap",
    "cora_metrics",
    "flatten_by_subject",
    "fluctuation_metrics",
    "mcqa_metrics",
    "msgr",
    "p_star",
    "pride_acc",
    "probability_fluctuation",
    "question_outcomes",
    "repetition_metrics",
    "response_consistency",
    "rws_st_string",
]
