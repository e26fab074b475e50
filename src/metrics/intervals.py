"""Intervals for the headline metrics (docs/metrics.md, "Uncertainty"): a cluster bootstrap over questions, vectorised,
and the Wilson score interval where a metric is a proportion of independent questions.

**Cluster bootstrap.** A resample draws the run's n questions with replacement (a numpy Generator seeded from the
run's seed) and keeps every variant and repetition of each drawn question; a question drawn twice counts as two
questions. Every headline metric (`HEADLINE_METRICS`, `HEADLINE_PREFIXES` of `src.metrics`), overall and per
subject, is stated by its family as question-weighted ratios of per-question quantities (src/metrics/per_question.py:
`sum_i w_i num_i / sum_i w_i den_i` per ratio, and how the metric combines its ratios); this module knows no metric.

`w_i` is how often question i was drawn, so the records are reduced once to per-question quantities
(`decompose`, from the families' own statements) and 1000 resamples are one (resamples x questions) count matrix
times a (questions x quantities) matrix: seconds on a full MMLU CoRA run where calling the family functions on
resampled records takes minutes (`python -m devtools.perf --only intervals` prints both). With all weights 1 each
decomposition gives the family's point value, and with a resample's counts the family's value on that
resample's records (`resample_records`), which tests/test_intervals.py checks for every metric. The run-level
choices a family makes from the whole table (R and p* of the repetition family, which questions have two or
more orders) are the run's design and stay fixed across resamples; on the resampled table they come out the
same unless a resample happens to drop every question that sets them.

Percentile intervals at `level`; a resample on which a metric is undefined (it drew none of the metric's
questions) is left out, and with more than 1% of them undefined the metric gets no interval. Below 20 questions behind a
metric the percentile bootstrap covers far less than its level, so such a metric (a small subject, a small run) is
logged without an interval rather than with a wrong one.

**Closed form.** Where a metric is by definition the share of its questions with a 0/1 outcome (its statement's
`share`: MCQA with one original trial per question, BMCA(1.0), S/T, RWS among the SURE questions, acc_h, wacc, ...;
the data are checked to be 0/1) the count is binomial over independent questions (for RWS: given how many are SURE),
and the Wilson score interval is used instead: exact in its
model, no resampling, and unlike the bootstrap (or the normal interval) it keeps its coverage for a small n or
a share near 0 or 1. At n = 1000 it agrees with the bootstrap within the bootstrap's own noise.

**Names.** `<metric>_lo` and `<metric>_hi` beside each metric, before any subject: `mcqa_lo`, `bmca_1.0_hi`,
`wacc@cyclic_lo` (MLflow: `wacc_at_cyclic_lo`), and per subject `mcqa_lo/<subject>`, so that in a sorted
list the bounds sit next to their metric and the per-subject bounds next to each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from .draws import draw_counts
from .families import applicable_families, headline_statistics, metric_subject
from .per_question import Combine, PerQuestion

LO, HI = "_lo", "_hi"
MIN_BOOTSTRAP_QUESTIONS = 20  # fewer questions behind a metric: no bootstrap interval
MAX_UNDEFINED_SHARE = 0.01  # more resamples than this with the metric undefined: no interval
_STREAM = 0xB007  # the bootstrap's own random stream beside the run's other uses of its seed
_DRAWS_PER_CHUNK = 4_000_000  # resamples are drawn in chunks of about this many question draws (memory)


def interval_names(name: str) -> tuple[str, str]:
    """The names of a metric's bounds: `_lo`/`_hi` after the metric, before a subject.

    >>> (interval_names("mcqa"), interval_names("mcqa/high_school_physics"),
    ...  interval_names("wacc@cyclic"))  # doctest: +NORMALIZE_WHITESPACE
    (('mcqa_lo', 'mcqa_hi'), ('mcqa_lo/high_school_physics', 'mcqa_hi/high_school_physics'),
     ('wacc@cyclic_lo', 'wacc@cyclic_hi'))
    """
    metric, sep, subject = name.partition("/")
    return f"{metric}{LO}{sep}{subject}", f"{metric}{HI}{sep}{subject}"


def is_interval_name(name: str) -> bool:
    """Whether a metric name is a bound made here.

    >>> is_interval_name("mcqa_lo/law"), is_interval_name("mcqa_hi"), is_interval_name("mcqa")
    (True, True, False)
    """
    return name.partition("/")[0].endswith((LO, HI))


def wilson_interval(successes: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial share `successes / n` at `level`.

    >>> [round(x, 4) for x in wilson_interval(700, 1000)]
    [0.6709, 0.7276]
    >>> [round(x, 4) for x in wilson_interval(5, 5)]
    [0.5655, 1.0]
    """
    if n <= 0:
        raise ValueError("a Wilson interval needs n > 0")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denominator
    # at 0 or n successes the bound is exactly 0 or 1 (the formula leaves a rounding residue)
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return lo, hi


@dataclass(frozen=True)
class Parts:
    """One metric of one scope as a function of question-weighted ratios.

    `ratios[j]` = (numerator, denominator) per question of the scope; the metric under weights w (one row per
    resample) is `combine([w @ num_j / w @ den_j for j])`, or the single ratio when `combine` is None.
    """

    ratios: tuple[tuple[np.ndarray, np.ndarray], ...]
    combine: Combine | None = None
    # defined as a share of questions with a 0/1 outcome (`PerQuestion.share`): decided by the definition, not by
    # the data, so that a run logs the same interval names whatever its answers
    share: bool = False
    outcome: tuple[np.ndarray, np.ndarray] | None = None  # a share's outcome when it combines ratios (`PerQuestion`)

    @property
    def counted(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(outcome, counts) per question of a share: its `outcome`, or its one ratio; None for any other metric."""
        if self.outcome is not None:
            return self.outcome
        return self.ratios[0] if self.combine is None and len(self.ratios) == 1 else None

    @property
    def binary(self) -> bool:
        """A share of questions with a 0/1 outcome, by definition (`share`) and in the data: an outcome and counts
        of 0 or 1 (a hand-built table with two original rows of a question is not)."""
        if not self.share or self.counted is None:
            return False
        num, den = self.counted
        return bool(np.isin(num, (0.0, 1.0)).all() and np.isin(den, (0.0, 1.0)).all() and (num <= den).all())

    @property
    def n_questions(self) -> int:
        """Questions behind the metric (a share's counted questions, else the fewest over its ratios)."""
        if self.outcome is not None:
            return int(np.count_nonzero(self.outcome[1]))
        return min(int(np.count_nonzero(den)) for _, den in self.ratios)


@dataclass(frozen=True)
class Scope:
    """The decomposed metrics of the whole run (`subject` None) or of one subject's rows."""

    subject: str | None
    positions: np.ndarray  # the scope's questions, as positions in Decomposition.question_ids
    metrics: dict[str, Parts]

    def name(self, metric: str) -> str:
        return metric if self.subject is None else f"{metric}/{self.subject}"


@dataclass(frozen=True)
class Decomposition:
    """The run's headline metrics reduced to per-question quantities (see the module docstring)."""

    question_ids: np.ndarray
    scopes: tuple[Scope, ...]

    @property
    def names(self) -> list[str]:
        return [scope.name(metric) for scope in self.scopes for metric in scope.metrics]

    def parts(self, name: str) -> Parts:
        for scope in self.scopes:
            for metric, parts in scope.metrics.items():
                if scope.name(metric) == name:
                    return parts
        raise KeyError(name)

    def values(self, weights: np.ndarray, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Each metric (default: all) under question weights `weights` (resamples x questions, in
        `question_ids` order): one value per row, NaN where a resample leaves the metric undefined."""
        weights = np.atleast_2d(np.asarray(weights, dtype=float))
        wanted = set(self.names if names is None else names)
        out: dict[str, np.ndarray] = {}
        for scope in self.scopes:
            chosen = {m: p for m, p in scope.metrics.items() if scope.name(m) in wanted}
            if not chosen:
                continue
            columns = [column for parts in chosen.values() for ratio in parts.ratios for column in ratio]
            full = len(scope.positions) == weights.shape[1] and bool(
                (scope.positions == np.arange(weights.shape[1])).all()
            )
            sums = (weights if full else weights[:, scope.positions]) @ np.column_stack(columns)
            k = 0
            for metric, parts in chosen.items():
                ratios = []
                for _ in parts.ratios:
                    num, den = sums[:, k], sums[:, k + 1]
                    ratios.append(np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0))
                    k += 2
                out[scope.name(metric)] = ratios[0] if parts.combine is None else parts.combine(ratios)
        return out


def _question_ids(records: pd.DataFrame) -> np.ndarray:
    return np.sort(records["question_id"].dropna().unique())


def scope_of(statements: Mapping[str, PerQuestion], subject: str | None, index: pd.Index) -> Scope:
    """The stated metrics of one scope as arrays over the scope's questions (`index`: every question of the run)."""
    members = pd.Index(
        sorted(
            {
                q
                for statement in statements.values()
                for pair in statement.ratios
                for series in pair
                for q in series.index
            }
        )
    )

    def arrays(pair: tuple[pd.Series, pd.Series]) -> tuple[np.ndarray, np.ndarray]:
        first, second = (series.reindex(members, fill_value=0.0).to_numpy(dtype=float) for series in pair)
        return first, second

    metrics = {
        name: Parts(
            tuple(arrays(pair) for pair in statement.ratios),
            statement.combine,
            share=statement.share,
            outcome=None if statement.outcome is None else arrays(statement.outcome),
        )
        for name, statement in statements.items()
    }
    return Scope(subject, index.get_indexer(members).astype(np.int64), metrics)


def decomposition_of(statements: Mapping[str, PerQuestion], question_ids: Sequence[str] | None = None) -> Decomposition:
    """One scope's stated metrics as a `Decomposition` over `question_ids` (default: every question they name)."""
    if question_ids is None:
        question_ids = sorted(
            {
                q
                for statement in statements.values()
                for pair in statement.ratios
                for series in pair
                for q in series.index
            }
        )
    ids = np.asarray(question_ids)
    scope = scope_of(statements, None, pd.Index(ids))
    if (scope.positions < 0).any():
        raise ValueError("the statements name questions that question_ids lacks")
    return Decomposition(ids, (scope,) if scope.metrics else ())


def decompose(
    records: pd.DataFrame, *, families: Sequence[str] | None = None, by_subjects: bool = True, **options: Any
) -> Decomposition:
    """The headline metrics of `records` (overall and, with `by_subjects`, per subject as `<metric>/<subject>`)
    as per-question quantities, from the families' statements (`families.headline_statistics`). `families`
    defaults to `applicable_families(records)`; `options` as `compute_metrics` takes them (those of
    `question_outcomes`, e.g. `consistency`, reach the repetition family)."""
    chosen = applicable_families(records) if families is None else list(families)
    question_ids = _question_ids(records)
    index = pd.Index(question_ids)
    scopes = [scope_of(headline_statistics(records, chosen, options), None, index)]
    if by_subjects and "subject" in records.columns:
        rows = records[records["subject"].notna()]
        for subject, group in rows.groupby("subject", sort=True):  # as subject_metrics / by_subject
            scopes.append(scope_of(headline_statistics(group, chosen, options), metric_subject(str(subject)), index))
    return Decomposition(question_ids, tuple(scope for scope in scopes if scope.metrics))


def resample_counts(rng: np.random.Generator, n_questions: int, n_resamples: int) -> np.ndarray:
    """How often each of `n_questions` questions is drawn in each of `n_resamples` resamples (n draws with
    replacement each): an (n_resamples x n_questions) float matrix whose rows sum to n_questions.

    >>> resample_counts(np.random.default_rng(0), 4, 2).sum(axis=1).tolist()
    [4.0, 4.0]
    """
    return draw_counts(rng.integers(0, n_questions, size=(n_resamples, n_questions)), n_questions)


def resample_chunks(n_questions: int, n_resamples: int, seed: int = 0) -> Iterator[np.ndarray]:
    """The count matrices (`resample_counts`) of `n_resamples` cluster resamples of `n_questions` questions, chunk
    by chunk (memory), from the bootstrap's own random stream seeded by `seed`: every interval and every paired
    test draws its resamples here, so a run's paired replicates are exactly its own bootstrap's.

    >>> [chunk.shape for chunk in resample_chunks(3, 2, seed=1)]
    [(2, 3)]
    """
    rng = np.random.default_rng([_STREAM, seed % 2**63])
    chunk = max(1, _DRAWS_PER_CHUNK // n_questions)  # depends on n only, so the draws do not depend on anything else
    for start in range(0, n_resamples, chunk):
        yield resample_counts(rng, n_questions, min(chunk, n_resamples - start))


def bootstrap_values(
    decomposition: Decomposition, *, n_resamples: int, seed: int = 0, names: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Each metric (default: all) on `n_resamples` cluster resamples of the questions; deterministic in `seed`."""
    n = len(decomposition.question_ids)
    wanted = decomposition.names if names is None else list(names)
    if n == 0 or n_resamples < 1 or not wanted:
        return {}
    found: dict[str, list[np.ndarray]] = {name: [] for name in wanted}
    for counts in resample_chunks(n, n_resamples, seed):
        values = decomposition.values(counts, wanted)
        for name in wanted:
            found[name].append(values[name])
    return {name: np.concatenate(parts) for name, parts in found.items()}


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float] | None:
    """The percentile interval of bootstrap values; None when more than 1% of them are undefined (NaN)."""
    finite = values[np.isfinite(values)]
    if len(finite) == 0 or len(finite) < (1.0 - MAX_UNDEFINED_SHARE) * len(values):
        return None
    lo, hi = np.quantile(finite, [(1.0 - level) / 2, (1.0 + level) / 2])
    return float(lo), float(hi)


def metric_intervals(
    records: pd.DataFrame,
    point: Mapping[str, float],
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    families: Sequence[str] | None = None,
    by_subjects: bool = True,
    closed_form: bool = True,
    **options: Any,
) -> dict[str, float]:
    """`<metric>_lo` and `<metric>_hi` (see `interval_names`) for each headline metric of `point` (the metrics
    `compute_metrics` gave for these records): Wilson for a share of 0/1 outcomes when `closed_form`, else
    the cluster bootstrap's percentile interval. `n_resamples=0` gives {}.

    >>> rows = pd.DataFrame({"question_id": [f"q{i}" for i in range(40)], "variant_kind": "original",
    ...     "variant_id": "original", "repetition": 0, "parsed_label": "A", "correct": [i % 4 != 0 for i in range(40)]})
    >>> {k: round(v, 3) for k, v in metric_intervals(rows, {"mcqa": 0.75}, families=["mcqa"]).items()}
    {'mcqa_lo': 0.598, 'mcqa_hi': 0.858}
    >>> boot = metric_intervals(rows, {"mcqa": 0.75}, families=["mcqa"], closed_form=False)
    >>> again = metric_intervals(rows, {"mcqa": 0.75}, families=["mcqa"], closed_form=False)
    >>> boot["mcqa_lo"] < 0.75 < boot["mcqa_hi"], boot == again
    (True, True)
    """
    if n_resamples < 0:
        raise ValueError(f"n_resamples must be >= 0 (0: no intervals), got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    if n_resamples == 0 or records.empty:
        return {}
    decomposition = decompose(records, families=families, by_subjects=by_subjects, **options)
    return decomposition_intervals(
        decomposition, point, n_resamples=n_resamples, level=level, seed=seed, closed_form=closed_form
    )


def decomposition_intervals(
    decomposition: Decomposition,
    point: Mapping[str, float],
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    closed_form: bool = True,
) -> dict[str, float]:
    """`<metric>_lo` and `<metric>_hi` for each metric of `decomposition` with a finite value in `point`, as
    `metric_intervals` gives them (Wilson for a share of 0/1 outcomes when `closed_form`, else the percentile
    interval of the cluster bootstrap; none below `MIN_BOOTSTRAP_QUESTIONS` questions)."""
    wilson, resampled = {}, []
    for name in decomposition.names:
        value = point.get(name)
        if value is None or not math.isfinite(value):
            continue
        parts = decomposition.parts(name)
        if closed_form and parts.binary and parts.counted is not None:  # binary: counted is set
            num, den = parts.counted
            wilson[name] = wilson_interval(float(num.sum()), float(den.sum()), level)
        elif parts.n_questions >= MIN_BOOTSTRAP_QUESTIONS:
            resampled.append(name)
    bounds = dict(wilson)
    for name, values in bootstrap_values(decomposition, n_resamples=n_resamples, seed=seed, names=resampled).items():
        interval = percentile_interval(values, level)
        if interval is not None:
            bounds[name] = interval
    out: dict[str, float] = {}
    for name in decomposition.names:  # the decomposition's order: overall, then subject by subject
        if name in bounds:
            lo_name, hi_name = interval_names(name)
            out[lo_name], out[hi_name] = bounds[name]
    return out


def resample_records(
    records: pd.DataFrame, counts: Sequence[int], question_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """The records of one explicit resample: every row of question i (`question_ids`, default the sorted ids)
    `counts[i]` times, its k-th extra copy renamed `<id>#<k>` so that each copy is a question of its own. The
    naive bootstrap calls the family functions on these; tests compare them with `Decomposition.values`.

    >>> df = pd.DataFrame({"question_id": ["a", "a", "b"], "x": [1, 2, 3]})
    >>> resample_records(df, [0, 2]).values.tolist()
    [['b', 3], ['b#1', 3]]
    """
    ids = _question_ids(records) if question_ids is None else np.asarray(question_ids)
    codes = pd.Index(ids).get_indexer(records["question_id"])
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(ids) + 1))
    take, copy = [], []
    for i in np.flatnonzero(np.asarray(counts) > 0):
        rows = order[bounds[i] : bounds[i + 1]]
        k = int(counts[int(i)])
        take.append(np.tile(rows, k))
        copy.append(np.repeat(np.arange(k), len(rows)))
    if not take:
        return records.iloc[0:0].reset_index(drop=True)
    out = records.iloc[np.concatenate(take)].reset_index(drop=True)
    copies = np.concatenate(copy)
    renamed = out["question_id"].astype(str) + "#" + pd.Series(copies).astype(str)
    out["question_id"] = np.where(copies == 0, out["question_id"], renamed)
    return out
