"""The papers' comparison tables, from the runs table of `load.load_runs` (one row per run, a column per metric).

Pure pandas: no mlflow, no matplotlib. Each builder returns `Table`s (a numeric frame for the CSV and a text
frame for Markdown/HTML) and says in `Skip` notes what it could not build and why.

Runs that differ in more than model, benchmark and the table's own axes (e.g. two temperatures of a CoRA
set, or 0- and 5-shot) never share a table column: each distinct *condition* gets its own table, titled with
the keys that vary (`T=0.7, fewshot=5`). Among identical runs the latest wins.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .load import CONDITION_KEYS

CORA_RANKED = (("MCQA", "mcqa"), ("MCQA+", "mcqa_plus"), ("MV", "mv"), ("CoRA", "cora"))
REPETITION_SHARES = (("SURE right", "sure_right"), ("UNSURE right", "unsure_right"),
                     ("UNSURE wrong", "unsure_wrong"), ("SURE wrong", "sure_wrong"))
REVAS_MEASURES = (("Acc", "acc"), ("Sc", "sc_mean"), ("Acc-H", "acc_h"))
REVAS_SUMMARY = (("Acc (original order)", "mcqa"), ("Sc", "sc_mean"), ("Acc-H", "acc_h"), ("NOTA Acc", "nota_acc"),
                 ("NOTA Acc-H", "nota_acc_h"), ("T/F correct: yes", "tf_correct_yes"),
                 ("T/F distracting: no", "tf_distractor_no"), ("Cd/Cc", "conf_ratio"))
SHORT = {"temperature": "T", "variants": "variants", "fewshot": "shots"}


@dataclass
class Table:
    """One table: `data` (numbers, for CSV) and `text` (formatted cells, for Markdown/HTML)."""

    title: str
    data: pd.DataFrame
    text: pd.DataFrame
    name: str  # file stem of its CSV
    caption: str = ""


@dataclass
class Built:
    """What a table builder made, and what it skipped with the reason."""

    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fmt(value, digits: int = 3) -> str:
    """A number as the tables show it; NaN or missing as an en dash."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return "–"
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}f}"
    return str(value)


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
        labels = rows.apply(lambda r: condition_label(r, keys), axis=1)
        for label in sorted(labels.unique()):
            yield benchmark, label, rows[labels == label], keys


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


def cora_tables(runs: pd.DataFrame) -> Built:
    """Per benchmark (and condition): MCQA, MCQA+, MV, CoRA with the ranking in parentheses, BMCA(c) and CI,
    models as columns, as in the CoRA paper's Table 1."""
    out = Built()
    rows_with = runs[has(runs, "cora")]
    if rows_with.empty:
        out.notes.append("CoRA table: no run logged `cora` (needs variants=cora or cora_same_size)")
        return out
    for benchmark, label, rows, _ in condition_groups(rows_with, axes=("model",)):
        rows = latest(rows, ["model"]).set_index("model").sort_index()
        levels = bmca_levels(rows.columns)
        metrics = [m for _, m in CORA_RANKED] + levels + ["ci"]
        names = [n for n, _ in CORA_RANKED] + [f"BMCA({c[5:]})" for c in levels] + ["CI"]
        values = pd.DataFrame({model: [rows.at[model, m] if m in rows.columns else math.nan for m in metrics]
                               for model in rows.index}, index=names)
        ranks = pd.DataFrame({model: [math.nan] * len(names) for model in values.columns}, index=names)
        for name, _ in CORA_RANKED:
            ranks.loc[name] = rank_desc(values.loc[name]).to_numpy()
        ranked = {name for name, _ in CORA_RANKED}
        text = pd.DataFrame({model: [f"{fmt(values.at[n, model])} ({int(ranks.at[n, model])})"
                                     if n in ranked and not math.isnan(values.at[n, model]) else fmt(values.at[n, model])
                                     for n in names] for model in values.columns}, index=names, dtype=object)
        data = values.stack().rename("value").reset_index().rename(columns={"level_0": "metric", "level_1": "model"})
        data["rank"] = [ranks.at[m, model] for m, model in zip(data["metric"], data["model"])]
        data.insert(0, "benchmark", benchmark)
        data.insert(1, "condition", label)
        text.index.name = "metric"
        title = f"{benchmark}" + (f" ({label})" if label else "")
        out.tables.append(Table(title=title, data=data, text=text, name=slug("cora", benchmark, label),
                                caption=f"{len(rows)} model{'s' if len(rows) != 1 else ''}; rank in parentheses, 1 = best"))
    return out


def rank_changes(cora: Built) -> Built:
    """Per CoRA table: each model's MCQA rank against its CoRA rank, and the pairs of models that swap places."""
    out = Built()
    rows, swaps = [], []
    for table in cora.tables:
        ranks = table.data.pivot_table(index="model", columns="metric", values="rank")
        values = table.data.pivot_table(index="model", columns="metric", values="value")
        if not {"MCQA", "CoRA"} <= set(ranks.columns):
            continue
        ranks = ranks.dropna(subset=["MCQA", "CoRA"])
        for model, r in ranks.iterrows():
            rows.append({"table": table.title, "model": model, "mcqa": values.at[model, "MCQA"],
                         "mcqa_rank": int(r["MCQA"]), "cora": values.at[model, "CoRA"], "cora_rank": int(r["CoRA"]),
                         "change": int(r["MCQA"] - r["CoRA"])})
        models = list(ranks.index)
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                before = np.sign(ranks.at[b, "MCQA"] - ranks.at[a, "MCQA"])
                after = np.sign(ranks.at[b, "CoRA"] - ranks.at[a, "CoRA"])
                if before and after and before != after:
                    first, second = (a, b) if before > 0 else (b, a)
                    swaps.append(f"{table.title}: {first} ranks above {second} on MCQA, below it on CoRA")
    if not rows:
        out.notes.append("rank changes: no CoRA table with both MCQA and CoRA")
        return out
    data = pd.DataFrame(rows)
    text = data.assign(mcqa=data["mcqa"].map(fmt), cora=data["cora"].map(fmt),
                       change=data["change"].map(lambda c: f"+{c}" if c > 0 else str(c)))
    caption = "change = MCQA rank - CoRA rank (+: the model climbs once consistency counts). " + (
        "Swaps: " + "; ".join(swaps) + "." if swaps else "No two models swap places between MCQA and CoRA.")
    out.tables.append(Table(title="MCQA rank vs CoRA rank", data=data, text=text.set_index("table"),
                            name="rank_changes", caption=caption))
    return out


# ---------------------------------------------------------------- repetition trials (repetition paper, Table 1)

def repetition_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with repetition metrics, one per (model, benchmark, temperature, condition).

    The repetition family reads the `original` variant's repetitions only, so runs that differ only in their
    variant set asked the same prompts (and share them through the response cache): they are collapsed,
    preferring a `variants=original` run, else the latest."""
    rows = runs[has(runs, "st")]
    if rows.empty:
        return rows
    rows = rows.assign(_original=rows["variants"].eq("original")).sort_values(["_original", "start_time"], kind="stable")
    keys = ["model", "benchmark"] + [k for k in CONDITION_KEYS if k != "variants"]
    return latest(rows, keys).drop(columns="_original").sort_values(["benchmark", "model", "temperature"])


def repetition_tables(runs: pd.DataFrame) -> Built:
    """Per benchmark: per model x temperature the SURE/UNSURE right/wrong shares, acc mean/std, `RWS | S/T`."""
    from ..metrics import rws_st_string

    out = Built()
    rows_with = repetition_runs(runs)
    if rows_with.empty:
        out.notes.append("repetition table: no run logged `st` (needs repetitions > 1)")
        return out
    for benchmark, label, rows, _ in condition_groups(rows_with, axes=("model", "temperature"), exclude=("variants",)):
        data = pd.DataFrame({
            "model": rows["model"].to_numpy(), "temperature": rows["temperature"].to_numpy(),
            **{m: (rows[m] if m in rows.columns else pd.Series(math.nan, index=rows.index)).to_numpy()
               for _, m in REPETITION_SHARES},
            "acc_mean": rows["acc_mean"].to_numpy(), "acc_std": rows["acc_std"].to_numpy(),
            "rws": (rows["rws"] if "rws" in rows.columns else pd.Series(math.nan, index=rows.index)).to_numpy(),
            "st": rows["st"].to_numpy(), "repetitions": rows["repetitions"].to_numpy()})
        text = pd.DataFrame({"temperature": data["temperature"].map(lambda t: fmt(t, 2)).to_numpy()},
                            index=pd.Index(data["model"], name="model"))
        for name, m in REPETITION_SHARES:
            text[name] = data[m].map(lambda v: "–" if math.isnan(v) else f"{v * 100:.0f}%").to_numpy()
        text["acc mean"] = data["acc_mean"].map(fmt).to_numpy()
        text["acc std"] = data["acc_std"].map(fmt).to_numpy()
        text["RWS | S/T"] = [rws_st_string({"rws": r, "st": s}) for r, s in zip(data["rws"], data["st"])]
        data.insert(0, "benchmark", benchmark)
        data.insert(1, "condition", label)
        reps = sorted({int(r) for r in data["repetitions"].dropna()})
        title = benchmark + (f" ({label})" if label else "")
        out.tables.append(Table(title=title, data=data, text=text, name=slug("repetition", benchmark, label),
                                caption=f"{', '.join(map(str, reps)) or '?'} repetitions; shares of questions; "
                                        "RWS = right when SURE, S/T = share SURE"))
    return out


# ---------------------------------------------------------------- answer fluctuation (fluctuation paper, Table 1)

def fluctuation_tables(runs: pd.DataFrame, *, min_points: int = 3) -> Built:
    """R^2 of every permutation-set metric against full_fr, original accuracy and both, across the
    (model, benchmark) points, via the assessment protocol in `src.metrics.assessment`."""
    out = Built()
    try:
        from ..metrics.assessment import TARGETS, points_from_runs, r2_table, r2_wide
    except ImportError as err:  # the assessment module is optional for this report
        out.notes.append(f"fluctuation R² table: skipped, the assessment protocol is unavailable ({err})")
        return out
    metric_columns = [c for c in runs.columns if "@" in c or c == "full_fr"]
    if not any("@" in c for c in metric_columns):
        out.notes.append("fluctuation R² table: no run logged permutation-set metrics (needs variants=perm_*)")
        return out
    points = points_from_runs([{"model": r["model"], "benchmark": r["benchmark"], "start_time": r["start_time"],
                                "metrics": {k: r[k] for k in [*metric_columns, "mcqa"] if k in r and pd.notna(r[k])}}
                               for _, r in runs.iterrows()])
    n_full = int(points["full_fr"].notna().sum()) if "full_fr" in points.columns else 0
    if n_full < min_points:
        out.notes.append(f"fluctuation R² table: {n_full} (model, benchmark) points with full_fr, {min_points} needed "
                         "(run variants=perm_all or perm_full on more models or benchmarks)")
        return out
    long = r2_table(points, min_points=min_points)
    titles = {"full_fr": "(a) target: full fluctuation rate", "accuracy": "(b) target: accuracy on the original order",
              "both": "(c) targets: full fluctuation rate and original accuracy"}
    for target, wide in r2_wide(long).items():
        if wide.isna().all().all():
            continue
        wide = wide.dropna(how="all").dropna(axis=1, how="all")
        text = wide.map(fmt)
        text.index.name = "permutation set"
        out.tables.append(Table(title=titles.get(target, target), data=long[long["target"] == target], text=text,
                                name=slug("fluctuation_r2", target),
                                caption=f"R² of a linear fit over {n_full} (model, benchmark) points"))
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
            records, text_rows, index = [], [], []
            for _, r in rows.iterrows():
                for name, prefix in REVAS_MEASURES:
                    values = [r.get(f"{prefix}@{n}", math.nan) for n in levels]
                    index.append(f"{r['model']} · {name}")
                    text_rows.append([fmt(v) for v in values])
                    records += [{"benchmark": benchmark, "condition": label, "model": r["model"], "measure": name,
                                 "n_options": n, "value": v} for n, v in zip(levels, values)]
            text = pd.DataFrame(text_rows, index=pd.Index(index, name="model · measure"),
                                columns=[f"n={n}" for n in levels])
            out.tables.append(Table(title=f"{title}: by number of options", data=pd.DataFrame(records), text=text,
                                    name=slug("revas_options", benchmark, label),
                                    caption="Acc on the reference order, Sc = mean share of the modal answer over the "
                                            "n orders, Acc-H = right on every order"))
        else:
            out.notes.append(f"REVAS by number of options, {title}: no acc@n metrics (needs variants=revas_option_count)")
        present = [(name, m) for name, m in REVAS_SUMMARY if m in rows.columns and rows[m].notna().any()]
        if present:
            data = rows[["model"] + [m for _, m in present]].reset_index(drop=True)
            text = pd.DataFrame({name: data[m].map(fmt).to_numpy() for name, m in present},
                                index=pd.Index(data["model"], name="model"))
            data.insert(0, "benchmark", benchmark)
            data.insert(1, "condition", label)
            out.tables.append(Table(title=f"{title}: summary", data=data, text=text,
                                    name=slug("revas_summary", benchmark, label)))
    return out


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
    from ..metrics.answers import answer_keys, correct_flags

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
        "shared_trials": float(len(joined)), "shared_questions": float(joined["question_id"].nunique()),
        "disagreement_rate": float(joined["disagree"].mean()),
        "both_right": float((joined["correct_a"] & joined["correct_b"]).mean()),
        "only_a_right": float((joined["correct_a"] & ~joined["correct_b"]).mean()),
        "only_b_right": float((~joined["correct_a"] & joined["correct_b"]).mean()),
        "both_wrong": float((~joined["correct_a"] & ~joined["correct_b"]).mean()),
    }
    per_question = joined.groupby("question_id", sort=True).agg(
        trials=("disagree", "size"), disagreements=("disagree", "sum"), a_right=("correct_a", "sum"),
        b_right=("correct_b", "sum"))
    per_question = per_question[per_question["disagreements"] > 0].reset_index()
    trials = joined.loc[joined["disagree"], keys + ["label_a", "correct_a", "label_b", "correct_b"]]
    return summary, per_question, trials.reset_index(drop=True)
