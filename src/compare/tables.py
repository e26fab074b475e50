"""The papers' comparison tables, from the runs table of `load.load_runs` (one row per run, a column per metric).

Pure pandas: no mlflow, no matplotlib. Each builder returns `Table`s (a numeric frame for the CSV and a text
frame for Markdown/HTML) and says in `Skip` notes what it could not build and why.

Runs that differ in more than model, benchmark and the table's own axes (e.g. two temperatures of a CoRA
set, or 0- and 5-shot) never share a table column: each distinct *condition* gets its own table, titled with
the keys that vary (`T=0.7, fewshot=5`). Among identical runs the latest wins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from src.metrics.chance import CHANCE_OF, verdict_of
from src.metrics.display import bounds, cell, difference_cell, fmt, fmt_ci  # noqa: F401 - the tables' cells

from ..metrics import rws_st_string
from ..metrics.answers import answer_keys, correct_flags
from ..metrics.chance import option_count_chance
from ..metrics.intervals import is_interval_name
from .load import CONDITION_KEYS

CORA_RANKED = (("MCQA", "mcqa"), ("MCQA+", "mcqa_plus"), ("MV", "mv"), ("CoRA", "cora"))
REPETITION_SHARES = (
    ("SURE right", "sure_right"),
    ("UNSURE right", "unsure_right"),
    ("UNSURE wrong", "unsure_wrong"),
    ("SURE wrong", "sure_wrong"),
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
SHORT = {"temperature": "T", "variants": "variants", "fewshot": "shots"}


@dataclass
class Table:
    """One table: `data` (numbers, for CSV) and `text` (formatted cells, for Markdown/HTML)."""

    title: str
    data: pd.DataFrame
    text: pd.DataFrame
    name: str  # file stem of its CSV
    caption: str = ""
    prose: bool = False  # cells of words (definitions): left-aligned in HTML


@dataclass
class Built:
    """What a table builder made, and what it skipped with the reason."""

    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def chance_mark(row, metric: str) -> str:
    """` †` after an accuracy whose logged interval contains its chance level (`src.metrics.chance.verdict_of`)."""
    verdict = verdict_of(row, metric)
    return " †" if verdict is not None and verdict.at_chance else ""


def judged_cell(row, metric: str, digits: int = 3) -> str:
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


CORA_CAPTION = (
    f"rank in parentheses, 1 = best; {INTERVAL_NOTE}; {CHANCE_NOTE}: on the original order for MCQA, over every "
    f"variant for MCQA+; – where the row has no chance level (MV, CoRA, BMCA, CI, INVALID); {INVALID_NOTE}; "
    + AT_CHANCE_NOTE
)


def spread_text(values: Iterable[float]) -> str:
    """One value as `fmt` shows it, or `lo–hi` when the runs of a table differ (other questions asked)."""
    found = [float(v) for v in values if v is not None and v == v]
    if not found:
        return "–"
    lo, hi = min(found), max(found)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


CORA_FAMILY_PREFIXES = ("mcqa_plus", "mv", "bmca_", "ci", "cora")  # meaningless for a one-variant set (CI = 1)


def chance_of(row, metric: str) -> float:
    """A run's chance level for `metric` (NaN when none applies)."""
    column = CHANCE_OF.get(metric)
    value = row.get(column, math.nan) if column else math.nan
    return math.nan if value is None else float(value)


def chance_text(rows: pd.DataFrame, column: str = "chance") -> str:
    """The chance level of a table's runs (`chance`: reference order; `chance_variants`: every variant)."""
    return spread_text(rows[column]) if column in rows.columns else "–"


def column_or_nan(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column] if column in rows.columns else pd.Series(math.nan, index=rows.index)


def share_text(value) -> str:
    """A share as a percentage (`12%`), an en dash when unknown."""
    return "–" if value is None or value != value else f"{float(value) * 100:.0f}%"


def slug(*parts) -> str:
    text = "_".join(str(p) for p in parts if p not in (None, ""))
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text).strip("_") or "table"


def _key(value):
    return "∅" if value is None or (isinstance(value, float) and math.isnan(value)) else value


def varying(frame: pd.DataFrame, keys: Iterable[str]) -> list[str]:
    """The keys (columns of `frame`) that take more than one value in it."""
    return [k for k in keys if k in frame.columns and frame[k].map(_key).nunique() > 1]


def condition_label(row, keys: Sequence[str]) -> str:
    """`T=0.7, shots=5` for the varying keys of one run."""
    return ", ".join(f"{SHORT.get(k, k)}={_key(row[k])}" for k in keys)


def latest(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One run per distinct `keys`: the one started last (the frame is sorted by start time)."""
    if frame.empty:
        return frame
    marker = frame[list(keys)].apply(lambda col: col.map(_key))
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


def condition_groups(frame: pd.DataFrame, axes: Sequence[str], exclude: Sequence[str] = ()):
    """(benchmark, condition label, rows) per benchmark and condition; the condition is made of the
    CONDITION_KEYS outside `axes` and `exclude` that vary among the frame's runs of that benchmark."""
    for benchmark, rows in frame.groupby("benchmark", sort=True):
        keys = varying(rows, [k for k in CONDITION_KEYS if k not in axes and k not in exclude])
        if not keys:
            yield benchmark, "", rows, keys
            continue
        labels = rows.apply(condition_label, axis=1, keys=keys)
        for label in sorted(labels.unique()):
            yield benchmark, label, rows[labels == label], keys


def number_at(frame: pd.DataFrame, row: Any, column: Any) -> float:
    """`frame.at[row, column]` of a frame of numbers, typed as one: pandas-stubs gives a cell every scalar type."""
    return cast(float, frame.at[row, column])


def rank_desc(values: pd.Series, digits: int = 3) -> pd.Series:
    """Rank 1 = highest; values equal at the shown precision share the better rank (the paper's '0.75 (1)' twice)."""
    return values.round(digits).rank(ascending=False, method="min")


# ---------------------------------------------------------------- CoRA (CoRA paper, Table 1)


def bmca_levels(columns: Iterable[str]) -> list[str]:
    """The `bmca_<c>` metrics present, by level."""
    found = [c for c in columns if c.startswith("bmca_") and _is_level(c[5:])]
    return sorted(found, key=lambda c: float(c[5:]))


def _is_level(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


ONE_VARIANT_SETS = ("original",)  # variant sets that ask each question once: their CoRA family is MCQA, CI = 1


def cora_study_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the CoRA study: those that logged `cora` over a divergent set. A run of one variant per
    question (`variants=original`) logs the CoRA family too, with CI = 1 by definition; it is no consistency
    result, so it is left out of every CoRA table and plot."""
    return runs[has(runs, "cora") & ~runs["variants"].isin(ONE_VARIANT_SETS)]


def cora_tables(runs: pd.DataFrame) -> Built:
    """Per benchmark (and condition): MCQA, MCQA+, MV, CoRA with the ranking in parentheses, BMCA(c) and CI,
    models as columns, as in the CoRA paper's Table 1; a `chance` column and an `INVALID` row."""
    out = Built()
    rows_with = cora_study_runs(runs)
    if rows_with.empty:
        out.notes.append(
            "CoRA table: no run logged `cora` (needs variants=cora or cora_same_size)"
            if not has(runs, "cora").any()
            else "CoRA table: only runs of one variant per question (variants=original) logged `cora`, "
            "where CI = 1 by definition; run variants=cora for the CoRA study"
        )
        return out
    for benchmark, label, rows, _ in condition_groups(rows_with, axes=("model",)):
        rows = latest(rows, ["model"]).set_index("model").sort_index()
        levels = bmca_levels(rows.columns)
        metrics = [m for _, m in CORA_RANKED] + levels + ["ci"]
        names = [n for n, _ in CORA_RANKED] + [f"BMCA({c[5:]})" for c in levels] + ["CI"]
        values = pd.DataFrame(
            {model: [rows.at[model, m] if m in rows.columns else math.nan for m in metrics] for model in rows.index},
            index=names,
        )
        ranks = pd.DataFrame({model: [math.nan] * len(names) for model in values.columns}, index=names)
        for name, _ in CORA_RANKED:
            ranks.loc[name] = rank_desc(cast(pd.Series, values.loc[name])).to_numpy()  # a row: names are unique
        ranked = {name for name, _ in CORA_RANKED}
        key = dict(zip(names, metrics))
        shown = {(n, model): judged_cell(rows.loc[model], key[n]) for n in names for model in values.columns}
        text = pd.DataFrame(
            {
                model: [
                    f"{shown[n, model]} ({int(number_at(ranks, n, model))})"
                    if n in ranked and not math.isnan(number_at(values, n, model))
                    else shown[n, model]
                    for n in names
                ]
                for model in values.columns
            },
            index=names,
            dtype=object,
        )
        chance = {"MCQA": chance_text(rows, "chance"), "MCQA+": chance_text(rows, "chance_variants")}
        text["chance"] = [chance.get(n, "–") for n in names]
        text.loc["INVALID"] = [
            share_text(rows.at[model, "invalid_rate"]) if "invalid_rate" in rows.columns else "–"
            for model in values.columns
        ] + ["–"]
        data = (
            cast(pd.Series, values.stack())  # one level of columns: stacked, a Series
            .rename("value")
            .reset_index()
            .rename(columns={"level_0": "metric", "level_1": "model"})
        )
        chance_values = {
            "MCQA": column_or_nan(rows, "chance").mean(),
            "MCQA+": column_or_nan(rows, "chance_variants").mean(),
        }
        data["chance"] = [chance_values.get(m, math.nan) for m in data["metric"]]
        data["rank"] = [number_at(ranks, m, model) for m, model in zip(data["metric"], data["model"])]
        logged = [bounds(rows.loc[model], key[m]) for m, model in zip(data["metric"], data["model"])]
        data["lo"] = [b[0] if b else math.nan for b in logged]
        data["hi"] = [b[1] if b else math.nan for b in logged]
        if "run_id" in rows.columns:
            data["run_id"] = [cast(str, rows.at[model, "run_id"]) for model in data["model"]]
        data.insert(0, "benchmark", benchmark)
        data.insert(1, "condition", label)
        text.index.name = "metric"
        title = f"{benchmark}" + (f" ({label})" if label else "")
        out.tables.append(
            Table(
                title=title,
                data=data,
                text=text,
                name=slug("cora", benchmark, label),
                caption=f"{len(rows)} model{'s' if len(rows) != 1 else ''}; " + CORA_CAPTION,
            )
        )
    return out


def rank_changes(cora: Built, paired=None) -> Built:
    """Per CoRA table: each model's MCQA rank against its CoRA rank, and the pairs of models that swap places.

    With `paired` (a `src.compare.paired.PairedStudy`), each swap says whether it is significant: the model above
    on MCQA is significantly better on MCQA (the paired 95% interval of its MCQA difference lies above 0) AND
    significantly worse on CoRA (the interval of its CoRA difference lies below 0)."""
    out = Built()
    rows: list[dict[str, Any]] = []
    swaps: list[Any] = []
    swap_rows: list[dict[str, Any]] = []
    for table in cora.tables:
        ranks = table.data.pivot_table(index="model", columns="metric", values="rank")
        values = table.data.pivot_table(index="model", columns="metric", values="value")
        if not {"MCQA", "CoRA"} <= set(ranks.columns):
            continue
        ranks = ranks.dropna(subset=["MCQA", "CoRA"])
        rows += _rank_rows(table, ranks, values)
        _swaps(table, ranks, paired, swaps, swap_rows)
    if not rows:
        out.notes.append("rank changes: no CoRA table with both MCQA and CoRA")
        return out
    out.tables.append(_rank_table(pd.DataFrame(rows), swaps, bool(swap_rows)))
    if swap_rows:
        out.tables.append(_swap_table(pd.DataFrame(swap_rows)))
    return out


def _rank_rows(table: Table, ranks: pd.DataFrame, values: pd.DataFrame) -> list[dict]:
    """Each model's MCQA and CoRA values and ranks in one CoRA table."""
    return [
        {
            "table": table.title,
            "model": model,
            "chance (MCQA)": _table_chance(table),
            "mcqa": values.at[model, "MCQA"],
            "mcqa_rank": int(r["MCQA"]),
            "cora": values.at[model, "CoRA"],
            "cora_rank": int(r["CoRA"]),
            "change": int(r["MCQA"] - r["CoRA"]),
        }
        for model, r in ranks.iterrows()
    ]


def _swaps(table: Table, ranks: pd.DataFrame, paired, swaps: list[str], swap_rows: list[dict]) -> None:
    """The pairs of models of one table that swap places between MCQA and CoRA: a line each, and with `paired` a
    row each with both paired differences and whether the swap is significant."""
    models = list(ranks.index)
    for i, a in enumerate(models):
        for b in models[i + 1 :]:
            before = np.sign(number_at(ranks, b, "MCQA") - number_at(ranks, a, "MCQA"))
            after = np.sign(number_at(ranks, b, "CoRA") - number_at(ranks, a, "CoRA"))
            if not (before and after and before != after):
                continue
            first, second = (a, b) if before > 0 else (b, a)
            line = f"{table.title}: {first} ranks above {second} on MCQA, below it on CoRA"
            verdict = _swap_verdict(table, first, second, paired)
            if verdict is not None:
                significant, d_mcqa, d_cora = verdict
                line += " (significant)" if significant else " (not significant)"
                swap_rows.append(
                    {
                        "table": table.title,
                        "above on MCQA": first,
                        "below on CoRA": second,
                        "MCQA difference": d_mcqa,
                        "CoRA difference": d_cora,
                        "significant": significant,
                    }
                )
            swaps.append(line)


def _rank_table(data: pd.DataFrame, swaps: list[str], tested: bool) -> Table:
    """MCQA rank vs CoRA rank, its caption naming the swaps."""
    text = data.assign(
        mcqa=data["mcqa"].map(fmt),
        cora=data["cora"].map(fmt),
        **{"chance (MCQA)": data["chance (MCQA)"].map(fmt)},
        change=data["change"].map(lambda c: f"+{c}" if c > 0 else str(c)),
    )
    caption = "change = MCQA rank - CoRA rank (+: the model climbs once consistency counts). " + (
        "Swaps: " + "; ".join(swaps) + "." if swaps else "No two models swap places between MCQA and CoRA."
    )
    if tested:
        caption += (
            " A swap is significant when the paired 95% intervals of both differences exclude 0 in opposite "
            "directions (better on MCQA, worse on CoRA)."
        )
    return Table(
        title="MCQA rank vs CoRA rank", data=data, text=text.set_index("table"), name="rank_changes", caption=caption
    )


def _swap_table(swap_data: pd.DataFrame) -> Table:
    """The swaps with both paired differences and their significance."""
    swap_text = pd.DataFrame(
        {
            "above on MCQA": swap_data["above on MCQA"].to_numpy(),
            "below on CoRA": swap_data["below on CoRA"].to_numpy(),
            "MCQA: above − below [95%]": [difference_cell(d) for d in swap_data["MCQA difference"]],
            "CoRA: above − below [95%]": [difference_cell(d) for d in swap_data["CoRA difference"]],
            "significant": ["yes" if v else "no" for v in swap_data["significant"]],
        },
        index=pd.Index(swap_data["table"].to_numpy(), name="table"),
    )
    flat = swap_data.assign(
        **{
            f"{m} {k}": [getattr(d, k) for d in swap_data[f"{m} difference"]]
            for m in ("MCQA", "CoRA")
            for k in ("difference", "lo", "hi", "p")
        }
    )
    flat = flat.drop(columns=["MCQA difference", "CoRA difference"])
    return Table(
        title="MCQA to CoRA rank swaps",
        data=flat,
        text=swap_text,
        name="rank_swaps",
        caption="paired differences on the same questions; significant = the MCQA interval "
        "lies above 0 and the CoRA interval below 0 (differences between two models: "
        "the chance level of MCQA is in the table above)",
    )


def _table_chance(table: Table) -> float:
    """The chance level of MCQA in a CoRA table (the mean over its runs)."""
    if "chance" not in table.data.columns:
        return math.nan
    return float(table.data.loc[table.data["metric"] == "MCQA", "chance"].mean())


def _swap_verdict(table: Table, first: str, second: str, paired):
    """(significant, MCQA difference, CoRA difference) of `first` - `second`, or None without paired results."""
    if paired is None or "run_id" not in table.data.columns:
        return None
    run = table.data.drop_duplicates("model").set_index("model")["run_id"]
    d_mcqa, d_cora = (paired.lookup(run[first], run[second], m) for m in ("mcqa", "cora"))
    if d_mcqa is None or d_cora is None:
        return None
    significant = d_mcqa.lo is not None and d_cora.hi is not None and d_mcqa.lo > 0 and d_cora.hi < 0
    return significant, d_mcqa, d_cora


# ---------------------------------------------------------------- repetition trials (repetition paper, Table 1)

SURE_RULE_LINES = {  # the line under each repetition table (docs/metrics.md, "What the paper's tables count")
    "answer": "SURE rule: answer (section 3.2: SURE when one answer is given at least p* of R times, right when it "
    "is the correct one)",
    "correctness": "SURE rule: correctness (the paper's tables: SURE right = all R trials right, SURE wrong = none "
    "right, UNSURE right = at least half right)",
}


def sure_rules(rows: pd.DataFrame) -> pd.Series:
    """Each run's SURE rule (`answer`, section 3.2, where a run says none)."""
    if "sure_rule" not in rows.columns:
        return pd.Series("answer", index=rows.index)
    return rows["sure_rule"].fillna("answer").astype(str)


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


def repetition_groups(rows_with: pd.DataFrame):
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
        records = rows.to_dict("records")
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


# ---------------------------------------------------------------- answer fluctuation (fluctuation paper, Table 1)


def fluctuation_tables(runs: pd.DataFrame, *, min_points: int = 3) -> Built:
    """R^2 of every permutation-set metric against full_fr, original accuracy and both, across the
    (model, benchmark) points, via the assessment protocol in `src.metrics.assessment`."""
    out = Built()
    try:
        from ..metrics.assessment import (
            TARGETS,
            points_from_runs,
            r2_table,
            r2_wide,
        )  # local: loads sklearn (slow import)
    except ImportError as err:  # the assessment module is optional for this report
        out.notes.append(f"fluctuation R² table: skipped, the assessment protocol is unavailable ({err})")
        return out

    metric_columns = [c for c in runs.columns if ("@" in c or c == "full_fr") and not is_interval_name(c)]
    if not any("@" in c for c in metric_columns):
        out.notes.append("fluctuation R² table: no run logged permutation-set metrics (needs variants=perm_*)")
        return out
    points = points_from_runs(
        [
            {
                "model": r["model"],
                "benchmark": r["benchmark"],
                "start_time": r["start_time"],
                "metrics": {k: r[k] for k in [*metric_columns, "mcqa"] if k in r and pd.notna(r[k])},
            }
            for _, r in runs.iterrows()
        ]
    )
    n_full = int(points["full_fr"].notna().sum()) if "full_fr" in points.columns else 0
    if n_full < min_points:
        out.notes.append(
            f"fluctuation R² table: {n_full} (model, benchmark) points with full_fr, {min_points} needed "
            "(run variants=perm_all or perm_full on more models or benchmarks)"
        )
        return out
    long = r2_table(points, min_points=min_points)
    titles = {
        "full_fr": "(a) target: full fluctuation rate",
        "accuracy": "(b) target: accuracy on the original order",
        "both": "(c) targets: full fluctuation rate and original accuracy",
    }
    for target, wide in r2_wide(long).items():
        if wide.isna().all().all():
            continue
        wide = wide.dropna(how="all").dropna(axis=1, how="all")
        text = wide.map(fmt)
        text.index.name = "permutation set"
        out.tables.append(
            Table(
                title=titles.get(target, target),
                data=long[long["target"] == target],
                text=text,
                name=slug("fluctuation_r2", target),
                caption=f"R² of a linear fit over {n_full} (model, benchmark) points (goodness of "
                "fit, not an accuracy: no chance level applies)",
            )
        )
    if not out.tables:
        out.notes.append(f"fluctuation R² table: every cell is empty ({', '.join(TARGETS)})")
    return out


# ---------------------------------------------------------------- REVAS (REVAS paper, Figure 3 and Tables 3-4)


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


def _revas_summary_table(rows: pd.DataFrame, benchmark: str, label: str, title: str, present: list) -> Table:
    """The REVAS summary of one condition: per model the `present` measures, INVALID and chance."""
    data = rows[["model"] + [m for _, m in present]].reset_index(drop=True)
    merged = rows.to_dict("records")
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


# ---------------------------------------------------------------- per-question disagreements between two runs


def diff_records(a: pd.DataFrame, b: pd.DataFrame) -> tuple[dict[str, float], pd.DataFrame, pd.DataFrame]:
    """Compare two runs' answers trial by trial on the (question, variant, repetition) both asked.

    Returns (summary, per-question table of questions with a disagreement, trial-level disagreements).
    Answers are option identities (INVALID its own answer), as in every metric.

    >>> base = {"question_id": ["q1", "q2"], "variant_id": "original", "repetition": 0, "parsed_label": ["A", "B"]}
    >>> a = pd.DataFrame({**base, "chosen_option": [0, 1], "correct": [True, False]})
    >>> b = pd.DataFrame({**base, "chosen_option": [0, 2], "correct": [True, True]})
    >>> diff_records(a, b)[0]["disagreement_rate"]
    0.5
    """
    keys = ["question_id", "variant_id", "repetition"]

    def prepared(records: pd.DataFrame) -> pd.DataFrame:
        frame = records[keys].copy()
        frame["answer"] = answer_keys(records)
        frame["correct"] = correct_flags(records)
        frame["label"] = records["parsed_label"].fillna("INVALID").astype(str).to_numpy()
        if "subject" in records.columns:
            frame["subject"] = records["subject"].to_numpy()
        return frame.drop_duplicates(keys)

    joined = prepared(a).merge(prepared(b).drop(columns="subject", errors="ignore"), on=keys, suffixes=("_a", "_b"))
    if joined.empty:
        return {"shared_trials": 0.0}, pd.DataFrame(), pd.DataFrame()
    joined["disagree"] = joined["answer_a"] != joined["answer_b"]
    summary = {
        "shared_trials": float(len(joined)),
        "shared_questions": float(joined["question_id"].nunique()),
        "disagreement_rate": float(joined["disagree"].mean()),
        "both_right": float((joined["correct_a"] & joined["correct_b"]).mean()),
        "only_a_right": float((joined["correct_a"] & ~joined["correct_b"]).mean()),
        "only_b_right": float((~joined["correct_a"] & joined["correct_b"]).mean()),
        "both_wrong": float((~joined["correct_a"] & ~joined["correct_b"]).mean()),
    }
    per_question = joined.groupby("question_id", sort=True).agg(
        trials=("disagree", "size"),
        disagreements=("disagree", "sum"),
        a_right=("correct_a", "sum"),
        b_right=("correct_b", "sum"),
    )
    per_question = per_question[per_question["disagreements"] > 0].reset_index()
    trials = joined.loc[joined["disagree"], keys + ["label_a", "correct_a", "label_b", "correct_b"]]
    return summary, per_question, trials.reset_index(drop=True)
