"""The repetition paper's Table 1: per model and temperature the SURE/UNSURE right/wrong shares, the accuracy's
mean and standard deviation over repetitions, and RWS | S/T, one table per SURE rule."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pandas as pd

from src.core.metric_choices import SURE_BY_ANSWER, SURE_BY_CORRECTNESS
from src.metrics import rws_st_string
from src.metrics.display import bounds, cell, fmt

from ..load import CONDITION_KEYS
from .common import (
    AT_CHANCE_NOTE,
    CHANCE_NOTE,
    INTERVAL_NOTE,
    INVALID_NOTE,
    Built,
    Table,
    column_or_nan,
    condition_groups,
    has,
    judged_cell,
    latest,
    run_rows,
    share_text,
    slug,
)

REPETITION_SHARES = (
    ("SURE right", "sure_right"),
    ("UNSURE right", "unsure_right"),
    ("UNSURE wrong", "unsure_wrong"),
    ("SURE wrong", "sure_wrong"),
)

SURE_RULE_LINES = {  # the line under each repetition table (docs/metrics.md, "What the paper's tables count")
    SURE_BY_ANSWER: "SURE rule: answer (section 3.2: SURE when one answer is given at least p* of R times, right when "
    "it is the correct one)",
    SURE_BY_CORRECTNESS: "SURE rule: correctness (the paper's tables: SURE right = all R trials right, SURE wrong = "
    "none right, UNSURE right = at least half right)",
}


def sure_rules(rows: pd.DataFrame) -> pd.Series:
    """Each run's SURE rule (`answer`, section 3.2, where a run says none)."""
    if "sure_rule" not in rows.columns:
        return pd.Series(SURE_BY_ANSWER, index=rows.index)
    return rows["sure_rule"].fillna(SURE_BY_ANSWER).astype(str)


def repetition_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with repetition metrics, one per (model, benchmark, temperature, condition, SURE rule).

    The repetition family reads the `original` variant's repetitions only, so runs that differ only in their
    variant set asked the same prompts (and share them through the response cache): they are collapsed,
    preferring a `variants=original` run, else the latest. Runs under different SURE rules are kept apart."""
    rows = runs[has(runs, "st")]
    if rows.empty:
        return rows
    rows = rows.assign(_original=rows["variants"].eq("original"), sure_rule=sure_rules(rows)).sort_values(
        ["_original", "start_time"], kind="stable"
    )
    keys = ["model", "benchmark"] + [k for k in CONDITION_KEYS if k != "variants"] + ["sure_rule"]
    return latest(rows, keys).drop(columns="_original").sort_values(["benchmark", "model", "temperature"])


def repetition_groups(rows_with: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame, list[str], str]]:
    """`condition_groups` of the repetition runs (models x temperatures per table), also split by SURE rule:
    (benchmark, label, rows, keys, rule). A rule's numbers are never put beside the other rule's."""
    for benchmark, label, rows, keys in condition_groups(
        rows_with, axes=("model", "temperature"), exclude=("variants",)
    ):
        rules = sure_rules(rows)
        for rule in sorted(rules.unique()):
            split = rules.nunique() > 1
            yield (
                benchmark,
                ", ".join(part for part in (label, f"sure_rule={rule}" if split else "") if part),
                rows[rules == rule],
                keys,
                rule,
            )


def repetition_tables(runs: pd.DataFrame) -> Built:
    """Per benchmark: per model x temperature the SURE/UNSURE right/wrong shares, acc mean/std, `RWS | S/T`."""
    out = Built()
    rows_with = repetition_runs(runs)
    if rows_with.empty:
        out.notes.append("repetition table: no run logged `st` (needs repetitions > 1)")
        return out
    for benchmark, label, rows, _, rule in repetition_groups(rows_with):
        data = pd.DataFrame(
            {
                "model": rows["model"].to_numpy(),
                "temperature": rows["temperature"].to_numpy(),
                **{
                    m: (rows[m] if m in rows.columns else pd.Series(math.nan, index=rows.index)).to_numpy()
                    for _, m in REPETITION_SHARES
                },
                "acc_mean": rows["acc_mean"].to_numpy(),
                "acc_std": rows["acc_std"].to_numpy(),
                "rws": (rows["rws"] if "rws" in rows.columns else pd.Series(math.nan, index=rows.index)).to_numpy(),
                "st": rows["st"].to_numpy(),
                "repetitions": rows["repetitions"].to_numpy(),
                "sure_rule": rule,
            }
        )
        text = pd.DataFrame(
            {"temperature": data["temperature"].map(lambda t: fmt(t, 2)).to_numpy()},
            index=pd.Index(data["model"], name="model"),
        )
        for name, m in REPETITION_SHARES:
            text[name] = data[m].map(lambda v: "–" if math.isnan(v) else f"{v * 100:.0f}%").to_numpy()
        records = run_rows(rows)
        text["acc mean"] = data["acc_mean"].map(fmt).to_numpy()
        text["acc std"] = data["acc_std"].map(fmt).to_numpy()
        text["RWS | S/T"] = [rws_st_string({"rws": r, "st": s}) for r, s in zip(data["rws"], data["st"])]
        data["invalid_rate"] = column_or_nan(rows, "invalid_rate").to_numpy()
        data["chance"] = column_or_nan(rows, "chance").to_numpy()
        text["INVALID"] = data["invalid_rate"].map(share_text).to_numpy()
        text["chance"] = data["chance"].map(fmt).to_numpy()
        logged = any(bounds(r, m) for r in records for m in ("rws", "st", "acc_mean"))
        if logged:  # the intervals the runs logged, after the paper's columns (which stay as the paper prints them)
            text["acc mean [95%]"] = [judged_cell(r, "acc_mean") for r in records]
            text["RWS [95%]"] = [cell(r, "rws") for r in records]
            text["S/T [95%]"] = [cell(r, "st") for r in records]
            for m in ("acc_mean", "rws", "st"):
                found = [bounds(r, m) for r in records]
                data[f"{m}_lo"] = [b[0] if b else math.nan for b in found]
                data[f"{m}_hi"] = [b[1] if b else math.nan for b in found]
        data.insert(0, "benchmark", benchmark)
        data.insert(1, "condition", label)
        reps = sorted({int(r) for r in data["repetitions"].dropna()})
        title = benchmark + (f" ({label})" if label else "")
        out.tables.append(
            Table(
                title=title,
                data=data,
                text=text,
                name=slug("repetition", benchmark, label),
                caption=f"{', '.join(map(str, reps)) or '?'} repetitions; shares of questions; "
                "RWS = right when SURE, S/T = share SURE; acc std = the repetition paper's "
                "accuracy stdev (sample std of the R per-repetition accuracies), beside the "
                f"interval of acc mean; {CHANCE_NOTE}, of acc mean; {INVALID_NOTE}; RWS n/a and – in RWS "
                "[95%]: RWS is undefined where no question is SURE (S/T 0%). "
                + SURE_RULE_LINES.get(rule, f"SURE rule: {rule}")
                + (f". {INTERVAL_NOTE}; {AT_CHANCE_NOTE}" if logged else ""),
            )
        )
    if sure_rules(rows_with).nunique() > 1:
        out.notes.append(
            "repetition tables: the runs use both SURE rules, so each rule has its own tables; "
            "`--sure-rule answer` or `--sure-rule correctness` recomputes every run under one rule"
        )
    return out
