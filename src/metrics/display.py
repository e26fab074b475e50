"""How a metric is written for a reader: a value, its logged interval, a signed paired difference.

Shared by the comparison tables (`src.compare`) and a job run's description in MLflow (`src.tracking.review`), so
that both show `0.410 [0.360, 0.460]` the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .intervals import interval_names
from .paired import PairedDifference

# a run's metrics: a dict, or a row of a runs table
Row = Mapping[str, Any] | pd.Series


def fmt(value: Any, digits: int = 3) -> str:
    """A number as the tables show it; NaN or missing as an en dash."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return "–"
    if isinstance(value, (float, np.floating)):
        return f"{round(float(value), digits) + 0.0:.{digits}f}"  # + 0.0: no "-0.000" for a tiny negative
    return str(value)


# Why a metric has no value, for the places that would otherwise print `nan` (a metric left undefined is NaN)
UNDEFINED = {
    "rws": "undefined: no question was SURE (RWS is the share right among the SURE questions)",
    "acc_std": "undefined: fewer than two repetitions",
}


def undefined_reason(metric: str) -> str:
    """Why `metric` has no value (`UNDEFINED`), or a plain 'undefined' for one without a known reason.

    >>> undefined_reason("rws")
    'undefined: no question was SURE (RWS is the share right among the SURE questions)'
    """
    return UNDEFINED.get(metric, "undefined for these answers")


def bounds(row: Row, metric: str) -> tuple[float, float] | None:
    """The interval a run logged beside `metric` (`<metric>_lo`, `<metric>_hi`), or None when it logged none
    (older runs, `stats.bootstrap=0`, too few questions): an interval is only ever read, never made up here."""
    lo_name, hi_name = interval_names(metric)
    lo, hi = row.get(lo_name, math.nan), row.get(hi_name, math.nan)
    try:
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(lo) or math.isnan(hi) else (lo, hi)


def fmt_ci(value: Any, interval: tuple[float, float] | None, digits: int = 3) -> str:
    """`0.410 [0.360, 0.460]`: the value and its logged interval; the value alone without one."""
    if interval is None or value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(interval[0], digits)}, {fmt(interval[1], digits)}]"


def cell(row: Row, metric: str, digits: int = 3) -> str:
    """A run's (or merged row's) metric with its logged interval, as the tables show it."""
    return fmt_ci(row.get(metric, math.nan), bounds(row, metric), digits)


# The one minus sign of every difference shown (the report's bottom line, tables and stderr lines, `src.plan`): the
# sign of a signed number and the operator between the two names, `leader − runner-up +0.065`. U+2212, not the
# hyphen, so that a negative difference never reads as a dash or a range; CSV files keep plain floats.
# A run with repetitions logs `mcqa` of repetition 0's sampled answers alone (one draw) beside `acc_mean`, the accuracy
# over every draw: the tables that compare or plan leave the one draw out, saying this, so that it is never read as
# the run's accuracy (the review view and the closing block name it "one draw").
MCQA_ONE_DRAW = (
    "one sampled draw (repetition 0 alone) in a run with repetitions: acc_mean is its accuracy over every draw"
)


def mcqa_one_draw(names: Iterable[str]) -> bool:
    """Whether a run with these metrics has repetitions, so that its `mcqa` is one sampled draw.

    >>> mcqa_one_draw(["mcqa", "acc_mean", "rws"]), mcqa_one_draw(["mcqa", "cora"])
    (True, False)
    """
    return "acc_mean" in set(names)


MINUS = "\u2212"


def minus(a: str, b: str) -> str:
    """`a − b`: the name of a difference, with MINUS.

    >>> minus("smollm2", "gemma") == "smollm2 \u2212 gemma"
    True
    """
    return f"{a} {MINUS} {b}"


def signed(value: float | None, digits: int = 3) -> str:
    """+0.050, −0.020 (MINUS); an en dash when undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    # + 0.0: "+0.000", never a negative zero
    return f"{round(float(value), digits) + 0.0:+.{digits}f}".replace("-", MINUS)


def difference_cell(result: PairedDifference) -> str:
    """`+0.050 [+0.010, +0.090]`, or the difference alone when it has no interval."""
    if result.lo is None:
        return signed(result.difference)
    return f"{signed(result.difference)} [{signed(result.lo)}, {signed(result.hi)}]"
