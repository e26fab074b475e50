"""The report's first table: which model leads on each benchmark, and whether the lead is significant.

Per benchmark and condition (the paired differences' grouping: runs that differ only in the model), the models
ranked by the headline accuracy (MCQA, else acc mean, else accuracy: `src.metrics.chance.VERDICT_METRICS`): the
leader and the runner-up with their intervals, the paired difference leader − runner-up with its 95% interval and
its Holm-adjusted p-value from the paired study (`src.compare.paired`), and a tie marked where that p is not below
alpha (or where the two values are equal at the shown precision). A leader whose interval contains chance is marked
† (`tables.AT_CHANCE_NOTE`).
"""

from __future__ import annotations

import math

import pandas as pd

from src.metrics.chance import VERDICT_METRICS
from src.metrics.display import difference_cell

from .load import Runs
from .tables import AT_CHANCE_NOTE, Built, Table, condition_groups, fmt, judged_cell, latest

TITLE = "Summary: the leader on each benchmark"
TIE = "tie"


def _metric(rows: pd.DataFrame) -> str | None:
    """The headline accuracy every run of the group logged."""
    return next((m for m in VERDICT_METRICS if m in rows.columns and rows[m].notna().all()), None)


def _holm(study, run_a: str, run_b: str, metric: str) -> float | None:
    """The Holm-adjusted p of the paired difference of `metric` between two runs (either order), or None."""
    for table in study.differences.tables if study is not None else ():
        data = table.data
        hit = data[
            (data["metric"] == metric)
            & (
                ((data["run_a"] == run_a) & (data["run_b"] == run_b))
                | ((data["run_a"] == run_b) & (data["run_b"] == run_a))
            )
        ]
        if len(hit):
            value = hit["p_holm"].iloc[0]
            return None if value is None or value != value else float(value)
    return None


def _p_text(value: float | None) -> str:
    return "–" if value is None else (f"{value:.3f}" if value >= 0.001 else "<0.001")


def leader_table(runs: Runs, study=None, *, alpha: float = 0.05) -> Built:
    """The summary table (module docstring); `study` is the report's `paired.PairedStudy` (None: `--no-paired`,
    the differences are left out and said so)."""

    out = Built()
    records, text_rows, index = [], [], []
    for benchmark, label, rows, _ in condition_groups(runs.table, axes=("model",)):
        rows = latest(rows, ["model"])
        metric = _metric(rows)
        if metric is None or rows["model"].nunique() < 2:
            continue
        ranked = rows.sort_values(metric, ascending=False, kind="stable").to_dict("records")
        first, second = ranked[0], ranked[1]
        found = study.lookup(first["run_id"], second["run_id"], metric) if study is not None else None
        p_holm = _holm(study, first["run_id"], second["run_id"], metric)
        equal = fmt(first[metric]) == fmt(second[metric])
        tie = equal or p_holm is None or p_holm >= alpha
        verdict = (
            f"{TIE} (equal)"
            if equal
            else f"{TIE} (p ≥ {alpha:g})"
            if p_holm is not None and tie
            else f"{TIE}? (no paired test)"
            if p_holm is None
            else f"lead (p < {alpha:g})"
        )
        index.append(benchmark + (f" ({label})" if label else ""))
        text_rows.append(
            {
                "metric": metric,
                "models": len(ranked),
                "leader": f"{first['model']} {judged_cell(first, metric)}",
                "runner-up": f"{second['model']} {judged_cell(second, metric)}",
                "leader − runner-up [95%]": difference_cell(found) if found is not None else "–",
                "p (Holm)": _p_text(p_holm),
                "verdict": verdict,
            }
        )
        records.append(
            {
                "benchmark": benchmark,
                "condition": label,
                "metric": metric,
                "models": len(ranked),
                "leader": first["model"],
                "leader_value": first[metric],
                "leader_run": first["run_id"],
                "runner_up": second["model"],
                "runner_up_value": second[metric],
                "runner_up_run": second["run_id"],
                "difference": found.difference if found is not None else math.nan,
                "lo": found.lo if found is not None and found.lo is not None else math.nan,
                "hi": found.hi if found is not None and found.hi is not None else math.nan,
                "p_holm": math.nan if p_holm is None else p_holm,
                "tie": tie,
            }
        )
    if not records:
        return out
    text = pd.DataFrame(text_rows, index=pd.Index(index, name="benchmark (condition)"))
    out.tables.append(
        Table(
            title="leader and runner-up per benchmark",
            data=pd.DataFrame(records),
            text=text,
            name="summary",
            caption="per benchmark and condition, the models ranked by their headline accuracy (MCQA, else acc mean, "
            "else accuracy) with its 95% interval; the paired difference leader − runner-up on the same questions "
            "with its paired bootstrap 95% interval and its p-value Holm-adjusted over the differences of that "
            f"condition's table (section Paired differences); a tie where that p is not below {alpha:g}; "
            + AT_CHANCE_NOTE,
        )
    )
    if study is None:
        out.notes.append("summary: no paired differences (--no-paired): every lead is marked 'tie? (no paired test)'")
    return out
