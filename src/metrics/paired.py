"""Paired comparisons of two runs on the same questions, and how many questions a comparison needs.

**Paired cluster bootstrap (every headline metric, one method for all).** Two runs A and B that asked the same
questions are reduced to per-question quantities (`intervals.decompose`, each run with its own options). One
resample draws the n question ids with replacement, once, and the SAME count vector weights both runs
(`Decomposition.values`), so each replicate's difference d* = metric_A* - metric_B* keeps the pairing: a question
both models get right (or wrong) moves both runs alike and adds nothing to the spread, as in McNemar's test, whose
bootstrap analogue this is for a share metric (only the discordant questions move d*). The difference gets

- its percentile interval at `level` (the replicates where the metric is undefined on either run are left out;
  with more than 1% of them undefined, or fewer than `MIN_BOOTSTRAP_QUESTIONS` questions behind it, no interval
  and no p-value), and
- a two-sided bootstrap p-value, p = min(1, 2 min((1 + #{d* <= 0}) / (B + 1), (1 + #{d* >= 0}) / (B + 1))) over
  the B defined replicates: about the smallest level at which the percentile interval would exclude 0 (the +1
  keeps it above 0 with a finite B: the smallest p-value of 1000 resamples is 2/1001).

Within one table the p-values of every pair and metric are Holm-adjusted (`holm`), which controls the chance of
any false "significant" in the table at `alpha`. Resamples are the run's own intervals' (`intervals.resample_chunks`)
seeded from `seed`: deterministic, and each run's marginal replicates are exactly its own `bootstrap_values` with
that seed.

**How many questions are enough.** The per-question standard deviation of a metric is sd = sqrt(n) * SE, with SE
the standard deviation of its bootstrap replicates over the run's n questions (for a 0/1 share this is
sqrt(p (1 - p)); for a paired difference it is the sd of the per-question differences, smaller the more the two
models agree). By the normal approximation, a difference `delta` is detected by a two-sided test at level `alpha`
with probability `power` once

    n = ((z_{1 - alpha/2} + z_{power}) * sd / delta)^2

questions are asked (`questions_needed`; z the standard normal quantile). With one run, sd is that run's and n is
what detects a shift of `delta` in the metric against a fixed reference (the same model after a change measured
on the same questions is the paired case: give both runs); two models answering independently would need twice
as many, two models compared on the same questions need the paired figure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .intervals import MIN_BOOTSTRAP_QUESTIONS, Decomposition, percentile_interval, resample_chunks


@dataclass(frozen=True)
class PairedDifference:
    """One metric of a pair of runs: `difference` = a - b, its interval and p-value (None when undefined), and
    `sd`, the per-question standard deviation of the difference (sqrt(n) x its bootstrap standard error)."""

    metric: str
    a: float
    b: float
    difference: float
    lo: float | None
    hi: float | None
    p: float | None
    n_questions: int
    sd: float | None


def question_mismatch(ids_a: Iterable[str], ids_b: Iterable[str]) -> str | None:
    """None when both runs asked the same question ids, else what differs, for an error message.

    >>> question_mismatch(["q1", "q2"], ["q2", "q1"]) is None
    True
    >>> question_mismatch(["q1", "q2", "q3"], ["q2", "q4"])
    '3 and 2 questions, 1 shared'
    """
    a, b = set(map(str, ids_a)), set(map(str, ids_b))
    if a == b:
        return None
    return f"{len(a)} and {len(b)} questions, {len(a & b)} shared"


def paired_values(
    decompositions: Sequence[Decomposition], names: Sequence[str], *, n_resamples: int, seed: int = 0
) -> list[dict[str, np.ndarray]]:
    """Each metric of `names` on `n_resamples` resamples of the questions, for every decomposition under the SAME
    count vector per resample (the decompositions must share `question_ids`). Deterministic in `seed`."""
    if not decompositions:
        return []
    ids = decompositions[0].question_ids
    for other in decompositions[1:]:
        if len(other.question_ids) != len(ids) or not (other.question_ids == ids).all():
            raise ValueError("paired resamples need the same question ids in every run (question_mismatch)")
    n = len(ids)
    found: list[dict[str, list[np.ndarray]]] = [{name: [] for name in names} for _ in decompositions]
    if n == 0 or n_resamples < 1 or not names:
        return [{name: np.array([]) for name in names} for _ in decompositions]
    for counts in resample_chunks(n, n_resamples, seed):
        for decomposition, out in zip(decompositions, found):
            values = decomposition.values(counts, names)
            for name in names:
                out[name].append(values[name])
    return [{name: np.concatenate(parts) for name, parts in out.items()} for out in found]


def bootstrap_p_value(differences: np.ndarray) -> float | None:
    """Two-sided bootstrap p-value of a difference from its replicates (NaN left out): None with none defined.

    >>> bootstrap_p_value(np.array([0.1, 0.2, 0.3, -0.1]))
    0.8
    >>> round(bootstrap_p_value(np.full(999, 0.05)), 4)
    0.002
    """
    d = differences[np.isfinite(differences)]
    if len(d) == 0:
        return None
    below = (1 + np.count_nonzero(d <= 0)) / (len(d) + 1)
    above = (1 + np.count_nonzero(d >= 0)) / (len(d) + 1)
    return float(min(1.0, 2 * min(below, above)))


def paired_differences(
    a: Decomposition,
    b: Decomposition,
    names: Sequence[str] | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, PairedDifference]:
    """The difference a - b of each metric both runs have (default: the overall metrics, no subjects), with its
    paired bootstrap interval, p-value and per-question sd. The runs must share their question ids."""
    if names is None:
        names = [name for name in a.names if "/" not in name and name in set(b.names)]
    ones = np.ones((1, len(a.question_ids)))
    point_a, point_b = a.values(ones, names), b.values(ones, names)
    names = [name for name in names if np.isfinite(point_a[name][0]) and np.isfinite(point_b[name][0])]
    values_a, values_b = paired_values([a, b], names, n_resamples=n_resamples, seed=seed)
    n = len(a.question_ids)
    out = {}
    for name in names:
        behind = min(a.parts(name).n_questions, b.parts(name).n_questions)
        difference = float(point_a[name][0] - point_b[name][0])
        lo = hi = p = sd = None
        if behind >= MIN_BOOTSTRAP_QUESTIONS and n_resamples > 0:
            d = values_a[name] - values_b[name]
            interval = percentile_interval(d, level)
            if interval is not None:
                lo, hi = interval
                p = bootstrap_p_value(d)
                sd = float(np.std(d[np.isfinite(d)], ddof=1) * math.sqrt(n))
        out[name] = PairedDifference(
            name, float(point_a[name][0]), float(point_b[name][0]), difference, lo, hi, p, behind, sd
        )
    return out


def per_question_sd(
    decomposition: Decomposition, names: Sequence[str] | None = None, *, n_resamples: int = 1000, seed: int = 0
) -> dict[str, float]:
    """sqrt(n) x the bootstrap standard error of each metric of one run (default: the overall metrics), for
    metrics with at least `MIN_BOOTSTRAP_QUESTIONS` questions behind them and at most 1% undefined resamples."""
    if names is None:
        names = [name for name in decomposition.names if "/" not in name]
    names = [name for name in names if decomposition.parts(name).n_questions >= MIN_BOOTSTRAP_QUESTIONS]
    (values,) = paired_values([decomposition], names, n_resamples=n_resamples, seed=seed)
    n = len(decomposition.question_ids)
    out = {}
    for name in names:
        if percentile_interval(values[name], 0.95) is None:  # too many undefined resamples
            continue
        finite = values[name][np.isfinite(values[name])]
        out[name] = float(np.std(finite, ddof=1) * math.sqrt(n))
    return out


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (None stays None and is not counted).

    >>> holm([0.01, 0.04, None, 0.03])
    [0.03, 0.06, None, 0.06]

    An adjusted p-value is at most 1:

    >>> holm([0.6, 0.9])
    [1.0, 1.0]
    """
    present = [(p, i) for i, p in enumerate(p_values) if p is not None]
    m = len(present)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = round(running, 12)
    return out


def detectable_difference(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest difference n questions detect two-sided at `alpha` with probability `power` (the inverse of
    `questions_needed`): (z_{1-alpha/2} + z_{power}) * sd / sqrt(n).

    >>> round(detectable_difference(0.5, 4906), 4)
    0.02
    """
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return z * sd / math.sqrt(n)


def questions_needed(sd: float, delta: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """n = ((z_{1-alpha/2} + z_{power}) * sd / delta)^2, rounded up: questions to detect `delta` two-sided at
    `alpha` with probability `power` (normal approximation), for a per-question standard deviation `sd`.

    >>> questions_needed(0.5, 0.02)
    4906
    >>> questions_needed(0.0, 0.02)
    1
    """
    if not delta > 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be between 0 and 1, got {alpha} and {power}")
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return max(1, math.ceil((z * sd / delta) ** 2 - 1e-9))


SD_FLOOR = 1e-12  # a per-question sd at or below this: the metric did not vary, no n can be estimated


@dataclass(frozen=True)
class QuestionsVerdict:
    """Whether n questions tell a difference `delta`, capped by the benchmark's `size`: the one rule of the report's
    questions-needed table and bottom line and of `python -m src.plan`. `needed` None: the metric did not vary.

    >>> v = QuestionsVerdict.of(20, 0.3, 100, delta=0.02)
    >>> v.needed, v.enough_cell()
    (1766, 'no: not reachable on this benchmark; 0.084 detectable with all 100 questions')
    >>> head, tail = v.sentence().split(": ")
    >>> head
    'no number of its 100 questions tells a difference of 0.02 (power 0.8; these runs asked 20)'
    >>> tail
    '0.084 detectable with all 100 questions'
    >>> QuestionsVerdict.of(20, 0.3, 2000, delta=0.02).sentence()
    '1766 questions would tell a difference of 0.02 (power 0.8; these runs asked 20)'
    """

    n: int
    sd: float
    needed: int | None
    size: int | None  # the questions the benchmark holds; None: not known (no cap)
    delta: float
    alpha: float
    power: float

    @classmethod
    def of(
        cls, n: int, sd: float, size: int | None, *, delta: float, alpha: float = 0.05, power: float = 0.8
    ) -> QuestionsVerdict:
        """The verdict for n questions of per-question sd; sd 0 (no variation) gives no count."""
        needed = questions_needed(sd, delta, alpha=alpha, power=power) if sd > SD_FLOOR else None
        return cls(n, sd, needed, size, delta, alpha, power)

    @property
    def reachable(self) -> bool:
        return self.needed is None or self.size is None or self.needed <= self.size

    @property
    def detectable(self) -> float | None:
        """The difference all of the benchmark's questions detect."""
        if self.size is None:
            return None
        return detectable_difference(self.sd, self.size, alpha=self.alpha, power=self.power)

    def _with_all(self) -> str:
        return f"{self.detectable:.3f} detectable with all {self.size} questions"

    def enough_cell(self) -> str:
        """yes; no (N more); or, beyond the benchmark's size, what all of it would detect."""
        if self.needed is None:
            return "– (no variation in this run)"
        if self.n >= self.needed:
            return "yes"
        if not self.reachable:
            return f"no: not reachable on this benchmark; {self._with_all()}"
        return f"no ({self.needed - self.n} more)"

    def sentence(self) -> str:
        """What a bottom line says after `no model is better`."""
        power = f"(power {self.power:g}; these runs asked {self.n})"
        if self.needed is None:
            return f"the difference did not vary over the resamples {power}"
        if not self.reachable:
            return (
                f"no number of its {self.size} questions tells a difference of {self.delta:g} {power}: "
                + self._with_all()
            )
        return f"{self.needed} questions would tell a difference of {self.delta:g} {power}"
