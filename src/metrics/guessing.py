"""Guessing theory for repetition trials (CoRA paper appendix A, eqs 8-10; non-determinism paper section 3.1).

`T` is the chance that a guesser with success rate r gets p or more of M trials right; `msgr` inverts it
(the minimum success guessing rate that makes p-of-M likely at level `conf`); `p_star` is the SURE threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from functools import lru_cache

DEFAULT_K = 5  # the paper's Table 7 setting; k only matters when the consistency level is below 1/k


def T(p: int, *, M: int, r: float) -> float:  # noqa: N802 - the paper's name
    """P(Binomial(M, r) >= p) (eq. 10).

    >>> round(T(10, M=10, r=0.2), 7)
    1e-07
    >>> T(0, M=10, r=0.2)
    1.0
    """
    if p <= 0:
        return 1.0
    if p > M:
        return 0.0
    return min(1.0, math.fsum(math.comb(M, j) * r**j * (1.0 - r) ** (M - j) for j in range(p, M + 1)))


def msgr(p: int, *, M: int, k: int, conf: float = 0.999, tol: float = 1e-12) -> float:
    """Minimum success guessing rate: the smallest r >= 1/k with T(p; M, r) >= conf.

    T is increasing in r, so bisection on [1/k, 1] finds it; the returned r always satisfies the bound.

    >>> round(msgr(10, M=10, k=5), 4), round(msgr(9, M=10, k=5), 3)
    (0.9999, 0.995)
    """
    if not 0 < conf <= 1:
        raise ValueError(f"conf must be in (0, 1], got {conf}")
    if p > M:
        raise ValueError(f"no guessing rate gives {p} right answers out of M={M} trials")
    lo, hi = 1.0 / k, 1.0
    if T(p, M=M, r=lo) >= conf:
        return lo
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if T(p, M=M, r=mid) >= conf:
            hi = mid
        else:
            lo = mid
    return hi


@lru_cache(maxsize=1024)  # asked again for every scope of a run's metrics (each subject's, each resample's)
def p_star(*, R: int, consistency: float = 0.99, k: int = DEFAULT_K, conf: float = 0.999) -> int:
    """SURE threshold: the smallest p with MSGR(p; R, k, conf) >= consistency.

    >>> p_star(R=10)
    9
    """
    for p in range(R + 1):
        if msgr(p, M=R, k=k, conf=conf) >= consistency:
            return p
    raise ValueError(
        f"consistency={consistency} is out of reach with R={R} repetitions "
        f"(MSGR({R}) = {msgr(R, M=R, k=k, conf=conf):.6f}); "
        "lower the consistency level or raise R"
    )


def can_stop(counts: Mapping[object, int] | Iterable[int], *, R: int, p_star: int) -> bool:
    """True once more trials cannot change SURE/UNSURE: SURE reached, SURE out of reach, or R trials made.

    `counts` holds how often each answer (INVALID included) was given so far, as a mapping or a list.

    >>> can_stop({"A": 9}, R=10, p_star=9), can_stop([1, 1], R=10, p_star=9), can_stop([1, 1, 1], R=10, p_star=9)
    (True, False, True)
    """
    values = list(counts.values()) if isinstance(counts, Mapping) else list(counts)
    made = sum(values)
    n_max = max(values, default=0)
    return made >= R or n_max >= p_star or n_max + (R - made) < p_star


def _correctness_cell(c: int, R: int) -> tuple[bool, bool]:
    """(SURE, right) under the `correctness` SURE rule with c right trials out of R (src/metrics/repetition.py)."""
    return c in (0, R), c == R or (c > 0 and c >= R - c)


def verdict_fixed(n_correct: int, n_other: int, made: int, *, R: int, p_star: int) -> bool:
    """True once more trials cannot change a question's repetition cell (SURE/UNSURE x right/wrong) under EITHER
    SURE rule; the stopping rule of adaptive repetitions (src/answering/adaptive.py). Unlike `can_stop`, it also waits
    until right/wrong is settled, so that the cell computed from the `made` trials equals the full run's.

    `n_correct`: right trials so far (they all name the one correct option); `n_other`: how often the most frequent
    other answer (INVALID included) was given; `made`: trials so far, of R planned. With rem = R - made:

    - `answer` rule: SURE settled iff n_max >= p* or n_max + rem < p*; right settled iff n_correct > 0 and
      n_correct >= n_other + rem (stays modal even if every remaining trial names the runner-up; ties count as
      right), wrong settled iff n_correct + rem < n_other (cannot even tie the leader).
    - `correctness` rule: the cell is the same for every final right count in [n_correct, n_correct + rem].

    >>> verdict_fixed(9, 0, 9, R=10, p_star=9), verdict_fixed(5, 2, 7, R=10, p_star=9)
    (False, True)
    >>> verdict_fixed(3, 3, 6, R=10, p_star=9), verdict_fixed(10, 0, 10, R=10, p_star=9)
    (False, True)
    """
    rem = R - made
    if rem <= 0:
        return True
    n_max = max(n_correct, n_other)
    sure_settled = n_max >= p_star or n_max + rem < p_star
    right_settled = (n_correct > 0 and n_correct >= n_other + rem) or n_correct + rem < n_other
    if not (sure_settled and right_settled):
        return False
    cell = _correctness_cell(n_correct, R)
    return all(_correctness_cell(c, R) == cell for c in range(n_correct + 1, n_correct + rem + 1))


def trials_before_stop(n_correct: int, n_other: int, made: int, *, R: int, p_star: int) -> int:
    """The fewest further trials after which `verdict_fixed` can hold (for some answers), R - made at most: the
    size of a question's next round, since no stop is possible before it.

    >>> trials_before_stop(0, 0, 0, R=10, p_star=9), trials_before_stop(5, 1, 6, R=10, p_star=9)
    (7, 1)
    """
    rem = R - made
    for j in range(1, rem):
        for right in range(j + 1):  # of the j trials, `right` are right and the rest name other answers
            rest = j - right
            low = n_other if n_other or not rest else 1  # the rest spread thin, or piled onto one other answer
            for other in range(low, n_other + rest + 1):
                if verdict_fixed(n_correct + right, other, made + j, R=R, p_star=p_star):
                    return j
    return max(rem, 0)
