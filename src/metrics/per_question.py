"""A metric stated once: the per-question statistics it is made of, and how they combine.

Every metric with an interval is a function of question-weighted ratios (docs/metrics.md, "Uncertainty"): each
question i contributes a numerator `num_i` and a denominator `den_i` to each of the metric's ratios, and the
metric combines the ratios `sum_i w_i num_i / sum_i w_i den_i` (a plain mean over questions is one ratio with
`den_i = 1`). A family states this once per metric (`PerQuestion`, built by `mean_of`, `ratio_of`, `share_among`),
in its `*_statistics` function; from that one statement come

- the value the family logs (`value`: every weight 1),
- its interval (src/metrics/intervals.py: the weights of a cluster resample of the questions, or Wilson for a
  share of 0/1 outcomes), and
- the paired test of two runs (src/metrics/paired.py: the same resample weights both runs).

The point value is summed as pandas sums a column (numpy's pairwise sum over the questions in index order), so
that a metric moved into a statement logs the very number it logged before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

Combine = Callable[[list[np.ndarray]], np.ndarray]  # the ratios' values (one array each, one entry per weighting)


@dataclass(frozen=True)
class PerQuestion:
    """One metric as per-question statistics: `ratios`, each a (numerator, denominator) pair of Series indexed
    by question id, and `combine`, how the metric is made of the ratios' values (None: it is the one ratio).
    `share`: by definition the share of its questions with a 0/1 outcome (its interval may then be Wilson's);
    that outcome is the one ratio's, or `outcome` (the per-question outcome and whether the question counts) for
    a share whose value combines several ratios (RWS, `share_among`)."""

    ratios: tuple[tuple[pd.Series, pd.Series], ...]
    combine: Combine | None = None
    share: bool = False
    outcome: tuple[pd.Series, pd.Series] | None = None

    def value(self) -> float:
        """The metric with every question weighted 1: NaN where a ratio has no denominator.

        >>> mean_of(pd.Series([1.0, 0.0, 0.5], index=["a", "b", "c"])).value()
        0.5
        >>> ratio_of(pd.Series([1.0, 0.0]), pd.Series([0.0, 0.0])).value()
        nan
        """
        ratios = [np.array([_ratio(float(num.sum()), float(den.sum()))]) for num, den in self.ratios]
        return float(ratios[0][0] if self.combine is None else self.combine(ratios)[0])


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else float("nan")


def mean_of(values: pd.Series, *, share: bool = False) -> PerQuestion:
    """The mean over the questions of `values`' index (each contributes its value over 1)."""
    values = values.astype(float)
    return PerQuestion(((values, pd.Series(1.0, index=values.index)),), None, share)


def ratio_of(numerator: pd.Series, denominator: pd.Series, *, share: bool = False) -> PerQuestion:
    """sum of `numerator` / sum of `denominator` over the questions of their (shared) index."""
    return PerQuestion(((numerator.astype(float), denominator.astype(float)),), None, share)


def _share_of_first(ratios: list[np.ndarray]) -> np.ndarray:
    first, second = ratios
    both = first + second
    share: np.ndarray = np.divide(first, both, out=np.full(both.shape, np.nan), where=both > 0)
    return share


def share_among(part: pd.Series, rest: pd.Series) -> PerQuestion:
    """The share of the questions with `part` among those with `part` or `rest` (two disjoint 0/1 outcomes per
    question, e.g. SURE right among SURE = SURE right or SURE wrong): a share of 0/1 outcomes whose value is the
    ratio of the two means, mean(part) / (mean(part) + mean(rest)), as the shares it is read beside are logged
    (NaN when neither occurs).

    >>> share_among(pd.Series([1.0, 0.0, 0.0]), pd.Series([0.0, 1.0, 0.0])).value()
    0.5
    """
    part, rest = part.astype(float), rest.astype(float)
    ones = pd.Series(1.0, index=part.index)
    return PerQuestion(((part, ones), (rest, ones)), _share_of_first, share=True, outcome=(part, part + rest))


def values_of(statements: Mapping[str, PerQuestion]) -> dict[str, float]:
    """Each stated metric's value (`PerQuestion.value`), in the statements' order."""
    return {name: statement.value() for name, statement in statements.items()}
