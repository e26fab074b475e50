"""Metric families: pure functions from the records table (src/core/records.py) to flat `{name: float}` dicts.

Definitions follow docs/metrics.md. `METRIC_FAMILIES` is the registry of the families' metrics (tests iterate it);
a metric that is a mean or ratio over questions is stated once per question in its family's `*_statistics`
(`families.FAMILY_STATISTICS`, src/metrics/per_question.py), which gives its value here, its interval and its paired
test. `compute_metrics` picks the families a run's records support and adds the run-level counts.
A family that lacks its inputs returns {} or leaves out what it cannot compute, never a 0 for an unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from .answers import INVALID, ORIGINAL, correct_flags, invalid_mask
from .cora import BMCA_LEVELS, cora_bootstrap, cora_metrics, mcqa_metrics, response_consistency
from .expected import expected_metrics, outcome_probs
from .families import (
    HEADLINE_METRICS,
    HEADLINE_PREFIXES,
    applicable_families,
    call_family,
    keyword_options,
    metric_subject,
    tidy_permutations,
)
from .fluctuation import answer_fluctuation, fluctuation_metrics, pride_acc, probability_fluctuation
from .guessing import T, can_stop, msgr, p_star
from .intervals import interval_names, is_interval_name, metric_intervals, wilson_interval
from .repetition import question_outcomes, repetition_metrics, rws_st_string
from .revas import order_outcomes, revas_metrics, sc_distribution
from .slots import FAR_MARGIN, SLOT_SHARE, slot_metrics, slot_summary, slot_tag
from .subjects import by_subject, flatten_by_subject

MetricFamily = Callable[[pd.DataFrame], dict[str, float]]

METRIC_FAMILIES: dict[str, MetricFamily] = {
    "mcqa": mcqa_metrics,
    "cora": cora_metrics,
    "repetition": repetition_metrics,
    "fluctuation": fluctuation_metrics,
    "revas": revas_metrics,
    "expected": expected_metrics,
    "slots": slot_metrics,
}
# Families with no headline metric: not computed again per subject (`subject_metrics` keeps headlines only)
NO_SUBJECT_FAMILIES = frozenset({"slots"})

REQUIRED_COLUMNS = (
    "question_id",
    "variant_kind",
    "variant_id",
    "repetition",
    "parsed_label",
    "chosen_option",
    "correct",
)


def base_metric(name: str) -> str:
    """A metric name without its subject and interval bound: `mcqa_lo/law` -> `mcqa`, `wacc@cyclic` unchanged."""
    metric = name.partition("/")[0]
    return metric[:-3] if is_interval_name(metric) else metric


def is_headline(name: str) -> bool:
    """Whether a metric (bounds and subjects aside) is a headline metric: HEADLINE_METRICS, HEADLINE_PREFIXES."""
    metric = base_metric(name)
    return metric in HEADLINE_METRICS or metric.startswith(HEADLINE_PREFIXES)


def headline_order(names: Sequence[str]) -> list[str]:
    """The run-level headline metrics among `names`, in HEADLINE_METRICS order (`mcqa` first, then each study's),
    per-set and per-count names (`acc@6`) after them; no bounds, no subjects.

    >>> headline_order(["st", "n_trials", "rws_lo", "rws", "acc@6", "mcqa/law", "mcqa"])
    ['mcqa', 'rws', 'st', 'acc@6']
    """

    def rank(name: str) -> tuple[int, int]:
        if name in HEADLINE_METRICS:
            return 0, HEADLINE_METRICS.index(name)
        return 1, next(i for i, prefix in enumerate(HEADLINE_PREFIXES) if name.startswith(prefix))

    chosen = [n for n in names if "/" not in n and not is_interval_name(n) and is_headline(n)]
    return sorted(chosen, key=rank)


def subject_metrics(records: pd.DataFrame, families: Sequence[str], options: dict[str, Any]) -> dict[str, float]:
    """`<headline metric>/<subject>` for each subject of the records (none without subjects); NaN values left out."""

    def headline(rows: pd.DataFrame) -> dict[str, float]:
        found: dict[str, float] = {}
        for name in families:
            if name in NO_SUBJECT_FAMILIES:
                continue
            found.update(call_family(METRIC_FAMILIES[name], name, rows, options))
        return {
            key: value
            for key, value in found.items()
            if (key in HEADLINE_METRICS or key.startswith(HEADLINE_PREFIXES)) and not math.isnan(value)
        }

    breakdown = by_subject(records, headline)
    return flatten_by_subject({metric_subject(subject): values for subject, values in breakdown.items()})


def compute_metrics(
    records: pd.DataFrame,
    *,
    families: Sequence[str] | None = None,
    bootstrap: bool = False,
    by_subjects: bool = True,
    intervals: int = 0,
    level: float = 0.95,
    interval_seed: int = 0,
    **options: Any,
) -> dict[str, float]:
    """All metrics of the chosen families (default: `applicable_families`) plus run-level counts.

    Always present: `n_questions`, `n_trials`, `invalid_rate` (share of trials with no parsed label) and
    `accuracy` (mean `correct` over all trials, INVALID counted wrong); the last two are NaN with no trials.
    `options` go to every family (and to `cora_bootstrap`) whose keyword-only parameters name them,
    e.g. `consistency=0.95`, `bmca_levels=(0.5, 1.0)`. `bootstrap=True` adds the CoRA variant-slot
    bootstrap (`n_resamples`, `k_slots`, `seed`) when the `cora` family is computed; it is opt-in because
    10,000 resamples cost about a second on a large run. The fluctuation family reads `tidy_permutations(records)`.
    With subjects in the records (`by_subjects`), the headline metrics are also logged per subject as
    `<name>/<subject>` (HEADLINE_METRICS, HEADLINE_PREFIXES).
    `intervals=B` (B > 0) adds `<name>_lo` / `<name>_hi` for every headline metric, per subject too
    (`mcqa_lo/<subject>`): Wilson for a share of questions, else a cluster bootstrap over questions with B
    resamples seeded by `interval_seed`, at `level` (src/metrics/intervals.py), and the slot shares' own bounds
    (`slot_share_A_lo`, src/metrics/slots.py); 0, the default, adds none (the slot family's flag reads its bounds
    either way).

    >>> df = pd.DataFrame({"question_id": ["q1", "q2"], "variant_kind": "original", "variant_id": "original",
    ...     "repetition": 0, "parsed_label": ["A", None], "chosen_option": [0, None], "correct": [True, False]})
    >>> compute_metrics(df, families=["mcqa"])
    {'n_questions': 2.0, 'n_trials': 2.0, 'invalid_rate': 0.5, 'accuracy': 0.5, 'mcqa': 0.5}
    """
    missing = [column for column in REQUIRED_COLUMNS if column not in records.columns]
    if missing:
        raise ValueError(
            f"records lack column(s) {', '.join(missing)}; build them with the columns of src/core/records.py"
        )
    chosen = applicable_families(records) if families is None else list(families)
    unknown = [name for name in chosen if name not in METRIC_FAMILIES]
    if unknown:
        raise ValueError(f"unknown metric families {unknown}; choose from {sorted(METRIC_FAMILIES)}")
    accepted = set().union(*(keyword_options(fn) for fn in [*METRIC_FAMILIES.values(), cora_bootstrap]))
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
        out.update(call_family(METRIC_FAMILIES[name], name, records, options))
    if by_subjects:
        out.update(subject_metrics(records, chosen, options))
    if bootstrap and "cora" in chosen:
        out.update(call_family(cora_bootstrap, "cora", records, options))
    if not intervals:  # the slot shares' bounds are intervals like the others: logged only when asked
        out = {k: v for k, v in out.items() if not (k.startswith(SLOT_SHARE) and is_interval_name(k))}
    if intervals:
        out.update(
            metric_intervals(
                records,
                out,
                n_resamples=intervals,
                level=level,
                seed=interval_seed,
                families=chosen,
                by_subjects=by_subjects,
                **options,
            )
        )
    return out


__all__ = [
    "BMCA_LEVELS",
    "INVALID",
    "ORIGINAL",
    "METRIC_FAMILIES",
    "T",
    "answer_fluctuation",
    "applicable_families",
    "base_metric",
    "headline_order",
    "is_headline",
    "by_subject",
    "can_stop",
    "compute_metrics",
    "cora_bootstrap",
    "cora_metrics",
    "expected_metrics",
    "FAR_MARGIN",
    "slot_metrics",
    "slot_summary",
    "slot_tag",
    "flatten_by_subject",
    "fluctuation_metrics",
    "interval_names",
    "is_interval_name",
    "mcqa_metrics",
    "metric_intervals",
    "msgr",
    "p_star",
    "pride_acc",
    "probability_fluctuation",
    "question_outcomes",
    "repetition_metrics",
    "response_consistency",
    "revas_metrics",
    "rws_st_string",
    "order_outcomes",
    "outcome_probs",
    "sc_distribution",
    "subject_metrics",
    "tidy_permutations",
    "wilson_interval",
]
