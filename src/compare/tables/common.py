"""What every table of the report shares: the `Table` and `Built` nouns, the notes under the tables, the cells
judged against chance, and how runs are grouped into one table per benchmark and condition.

Runs that differ in more than model, benchmark and the table's own axes (e.g. two temperatures of a CoRA set, or
0- and 5-shot) never share a table column: each distinct *condition* gets its own table, titled with the keys that
vary (`T=0.7, fewshot=5`). Among identical runs the latest wins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd

from src.metrics.chance import CHANCE_OF, VERDICT_METRICS, verdict_of
from src.metrics.display import Row, cell, fmt

from ..load import CONDITION_KEYS

ONE_VARIANT_SETS = ("original",)  # variant sets that ask each question once: their CoRA family is MCQA, CI = 1
RunRow = dict[str, Any]  # one run of the runs table (`load.load_runs`) as a dict: column -> value
SHORT = {"temperature": "T", "variants": "variants", "fewshot": "shots"}


@dataclass
class Table:
    """One table: `data` (numbers, for CSV) and `text` (formatted cells, for Markdown/HTML)."""

    title: str
    data: pd.DataFrame
    text: pd.DataFrame
    name: str  # file stem of its table under tables/
    caption: str = ""
    prose: bool = False  # cells of words (definitions): left-aligned in HTML
    # a table of prompts and outputs, a row per question and model or variant: zstd-compressed parquet, not CSV
    # (a full CoRA run's is ~30x smaller; the prompts of a question's variants differ in little but the order)
    columnar: bool = False

    @property
    def suffix(self) -> str:
        """Of its file under tables/: .csv, or .parquet for a `columnar` table."""
        return ".parquet" if self.columnar else ".csv"


@dataclass
class Built:
    """What a table builder made, and what it skipped with the reason."""

    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def chance_mark(row: Row, metric: str) -> str:
    """` †` after an accuracy whose logged interval contains its chance level (`src.metrics.chance.verdict_of`)."""
    verdict = verdict_of(row, metric)
    return " †" if verdict is not None and verdict.at_chance else ""


def judged_cell(row: Row, metric: str, digits: int = 3) -> str:
    """`cell`, marked ` †` where the interval contains chance (AT_CHANCE_NOTE)."""
    return cell(row, metric, digits) + chance_mark(row, metric)


AT_CHANCE_NOTE = (
    "†: the interval contains chance, the run is indistinguishable from chance (its consistency "
    "metrics then describe how a guesser's answers agree, not what the model knows)"
)
INTERVAL_NOTE = "[lo, hi]: the 95% interval each run logged (stats.level; none for runs logged without one)"
CHANCE_NOTE = (
    "chance: the accuracy of a uniform guesser on the same questions (1/k for k options shown, 1/2 for "
    "true/false; src/metrics/chance.py)"
)
INVALID_NOTE = "INVALID: share of trials whose answer could not be parsed (counted wrong in every accuracy)"


def spread_text(values: Iterable[float]) -> str:
    """One value as `fmt` shows it, or `lo–hi` when the runs of a table differ (other questions asked)."""
    found = [float(v) for v in values if v is not None and v == v]
    if not found:
        return "–"
    lo, hi = min(found), max(found)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def run_rows(frame: pd.DataFrame) -> list[RunRow]:
    """The runs of a runs table as dicts, in its order."""
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def headline_metric(rows: pd.DataFrame) -> str | None:
    """A condition's headline (`src.metrics.chance.HEADLINE_RULE`): the first of VERDICT_METRICS that every run of
    it logged."""
    return next((m for m in VERDICT_METRICS if m in rows.columns and rows[m].notna().all()), None)


def ranked(rows: pd.DataFrame) -> tuple[str | None, pd.DataFrame]:
    """(headline, rows best first by it, ties by model name): the one order of a condition's models, so that
    every difference the report shows (bottom line, summary, paired tables, stderr) is leader − runner-up."""
    metric = headline_metric(rows)
    if metric is None:
        return None, rows.sort_values("model", kind="stable")
    return metric, rows.sort_values([metric, "model"], ascending=[False, True], kind="stable")


def p_text(value: float | None) -> str:
    """A p-value as the tables and the bottom line write it: three decimals, `<0.001` below that, – when none.

    >>> p_text(0.04321), p_text(0.0002), p_text(None)
    ('0.043', '<0.001', '–')
    """
    return "–" if value is None else (f"{value:.3f}" if value >= 0.001 else "<0.001")


def chance_of(row: Row, metric: str) -> float:
    """A run's chance level for `metric` (NaN when none applies)."""
    column = CHANCE_OF.get(metric)
    value = row.get(column, math.nan) if column else math.nan
    return math.nan if value is None else float(value)


def chance_text(rows: pd.DataFrame, column: str = "chance") -> str:
    """The chance level of a table's runs (`chance`: reference order; `chance_variants`: every variant)."""
    return spread_text(rows[column]) if column in rows.columns else "–"


def column_or_nan(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column] if column in rows.columns else pd.Series(math.nan, index=rows.index)


def share_text(value: Any) -> str:
    """A share as a percentage (`12%`), an en dash when unknown."""
    return "–" if value is None or value != value else f"{float(value) * 100:.0f}%"


def slug(*parts: object) -> str:
    text = "_".join(str(p) for p in parts if p not in (None, ""))
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text).strip("_") or "table"


def _key(value: Any) -> Any:
    return "∅" if value is None or (isinstance(value, float) and math.isnan(value)) else value


def varying(frame: pd.DataFrame, keys: Iterable[str]) -> list[str]:
    """The keys (columns of `frame`) that take more than one value in it."""
    return [k for k in keys if k in frame.columns and frame[k].map(_key).nunique() > 1]


def condition_label(row: Row, keys: Sequence[str]) -> str:
    """`T=0.7, shots=5` for the varying keys of one run."""
    return ", ".join(f"{SHORT.get(k, k)}={_key(row[k])}" for k in keys)


def latest(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One run per distinct `keys`: the one started last (the frame is sorted by start time)."""
    if frame.empty:
        return frame
    marker: pd.DataFrame = frame[list(keys)].apply(lambda col: col.map(_key))
    return frame.loc[~marker.duplicated(keep="last")]


def merge_metrics(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One row per distinct `keys`, each metric taken from the latest run that logged it (several variant sets
    of one study, e.g. REVAS re-orders and option counts, each log part of a model's numbers)."""
    if frame.empty:
        return frame
    marker = frame[list(keys)].apply(lambda col: col.map(_key))
    # last() takes each column's last non-null value: a metric from the latest run that has it
    return frame.groupby([marker[k].rename(f"_{k}") for k in keys], sort=False).last().reset_index(drop=True)


def has(frame: pd.DataFrame, metric: str) -> pd.Series:
    return frame[metric].notna() if metric in frame.columns else pd.Series(False, index=frame.index)


def condition_groups(
    frame: pd.DataFrame, axes: Sequence[str], exclude: Sequence[str] = ()
) -> Iterator[tuple[str, str, pd.DataFrame, list[str]]]:
    """(benchmark, condition label, rows, the keys that vary) per benchmark and condition; the condition is made of
    the CONDITION_KEYS outside `axes` and `exclude` that vary among the frame's runs of that benchmark."""
    for benchmark, rows in frame.groupby("benchmark", sort=True):
        keys = varying(rows, [k for k in CONDITION_KEYS if k not in axes and k not in exclude])
        if not keys:
            yield cast(str, benchmark), "", rows, keys
            continue
        labels = rows.apply(condition_label, axis=1, keys=keys)
        for label in sorted(labels.unique()):
            yield cast(str, benchmark), label, rows[labels == label], keys


def number_at(frame: pd.DataFrame, row: Any, column: Any) -> float:
    """`frame.at[row, column]` of a frame of numbers, typed as one: pandas-stubs gives a cell every scalar type."""
    return cast(float, frame.at[row, column])


def rank_desc(values: pd.Series, digits: int = 3) -> pd.Series:
    """Rank 1 = highest; values equal at the shown precision share the better rank (the paper's '0.75 (1)' twice)."""
    return values.round(digits).rank(ascending=False, method="min")
