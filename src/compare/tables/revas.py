"""The REVAS paper's Figure 3 and Tables 3-4: Acc / Sc / Acc-H by number of options, and the summary per model
(re-order consistency, NOTA, true/false)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from src.metrics.chance import option_count_chance
from src.metrics.display import cell, fmt

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
    judged_cell,
    merge_metrics,
    run_rows,
    share_text,
    slug,
)

REVAS_MEASURES = (("Acc", "acc"), ("Sc", "sc_mean"), ("Acc-H", "acc_h"))
REVAS_SUMMARY = (
    ("Acc (original order)", "mcqa"),
    ("Sc", "sc_mean"),
    ("Acc-H", "acc_h"),
    ("NOTA Acc", "nota_acc"),
    ("NOTA Acc-H", "nota_acc_h"),
    ("T/F correct: yes", "tf_correct_yes"),
    ("T/F distracting: no", "tf_distractor_no"),
    ("Cd/Cc", "conf_ratio"),
)


def option_levels(columns: Iterable[str]) -> list[int]:
    """The option counts n with an `acc@n` metric."""
    return sorted({int(c[4:]) for c in columns if c.startswith("acc@") and c[4:].isdigit()})


def revas_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """REVAS runs merged per (model, benchmark, condition): each variant set logs part of the numbers."""
    mask = pd.Series(False, index=runs.index)
    for c in runs.columns:
        if c.startswith(("acc@", "sc_mean", "acc_h", "nota_acc", "tf_", "conf_ratio")):
            mask |= runs[c].notna()
    rows = runs[mask]
    if rows.empty:
        return rows
    keys = ["model", "benchmark"] + [k for k in CONDITION_KEYS if k != "variants"]
    return merge_metrics(rows, keys)


def revas_tables(runs: pd.DataFrame) -> Built:
    """Per benchmark: Acc / Sc / Acc-H by number of options (rows model x measure, columns n), and the REVAS
    summary per model (re-order consistency, NOTA, true/false)."""
    out = Built()
    rows_with = revas_runs(runs)
    if rows_with.empty:
        out.notes.append("REVAS tables: no run logged REVAS metrics (needs variants=revas_*)")
        return out
    for benchmark, label, rows, _ in condition_groups(rows_with, axes=("model",), exclude=("variants",)):
        rows = rows.sort_values("model")
        title = benchmark + (f" ({label})" if label else "")
        levels = option_levels(rows.columns)
        if levels:
            out.tables.append(_revas_options_table(rows, benchmark, label, title, levels))
        else:
            out.notes.append(
                f"REVAS by number of options, {title}: no acc@n metrics (needs variants=revas_option_count)"
            )
        present = [(name, m) for name, m in REVAS_SUMMARY if m in rows.columns and rows[m].notna().any()]
        if present:
            out.tables.append(_revas_summary_table(rows, benchmark, label, title, present))
    return out


def _revas_options_table(rows: pd.DataFrame, benchmark: str, label: str, title: str, levels: list[int]) -> Table:
    """Acc / Sc / Acc-H by number of options of one condition, with the chance row 1/n."""
    where = {"benchmark": benchmark, "condition": label}
    records, text_rows, index = [], [], []
    for _, r in rows.iterrows():
        for name, prefix in REVAS_MEASURES:
            values = [r.get(f"{prefix}@{n}", math.nan) for n in levels]
            index.append(f"{r['model']} · {name}")
            text_rows.append([cell(r, f"{prefix}@{n}") for n in levels])
            records += [
                {**where, "model": r["model"], "measure": name, "n_options": n, "value": v}
                for n, v in zip(levels, values)
            ]
    index.append("chance · Acc")
    text_rows.append([fmt(option_count_chance(n)) for n in levels])
    records += [
        {**where, "model": "chance", "measure": "Acc", "n_options": n, "value": option_count_chance(n)} for n in levels
    ]
    text = pd.DataFrame(text_rows, index=pd.Index(index, name="model · measure"), columns=[f"n={n}" for n in levels])
    return Table(
        title=f"{title}: by number of options",
        data=pd.DataFrame(records),
        text=text,
        name=slug("revas_options", benchmark, label),
        caption="Acc on the reference order, Sc = mean share of the modal answer over the "
        "n orders, Acc-H = right on every order; "
        + INTERVAL_NOTE
        + "; chance · Acc: 1/n, a uniform guesser's accuracy with n options",
    )


def _revas_summary_table(
    rows: pd.DataFrame, benchmark: str, label: str, title: str, present: list[tuple[str, str]]
) -> Table:
    """The REVAS summary of one condition: per model the `present` measures, INVALID and chance."""
    data = rows[["model"] + [m for _, m in present]].reset_index(drop=True)
    merged = run_rows(rows)
    text = pd.DataFrame(
        {name: [judged_cell(r, m) for r in merged] for name, m in present},
        index=pd.Index(data["model"], name="model"),
    )
    data["invalid_rate"] = column_or_nan(rows, "invalid_rate").to_numpy()
    data["chance"] = column_or_nan(rows, "chance").to_numpy()
    text["INVALID"] = data["invalid_rate"].map(share_text).to_numpy()
    text["chance"] = data["chance"].map(fmt).to_numpy()
    data.insert(0, "benchmark", benchmark)
    data.insert(1, "condition", label)
    return Table(
        title=f"{title}: summary",
        data=data,
        text=text,
        name=slug("revas_summary", benchmark, label),
        caption=f"{CHANCE_NOTE}, on the original order (T/F: 0.500); {INVALID_NOTE}; {AT_CHANCE_NOTE}",
    )
