"""The CoRA paper's Table 1 (MCQA, MCQA+, MV, CoRA with ranks, BMCA(c), CI per model), and the rank changes between
MCQA and CoRA, with the paired study's verdict on each swap."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd

from src.metrics.display import MINUS, bounds, difference_cell, fmt, minus
from src.metrics.paired import PairedDifference

from .common import (
    AT_CHANCE_NOTE,
    CHANCE_NOTE,
    INTERVAL_NOTE,
    INVALID_NOTE,
    ONE_VARIANT_SETS,
    Built,
    Table,
    chance_text,
    column_or_nan,
    condition_groups,
    has,
    judged_cell,
    latest,
    number_at,
    rank_desc,
    share_text,
    slug,
)

CORA_RANKED = (("MCQA", "mcqa"), ("MCQA+", "mcqa_plus"), ("MV", "mv"), ("CoRA", "cora"))

CORA_CAPTION = (
    f"rank in parentheses, 1 = best; {INTERVAL_NOTE}; {CHANCE_NOTE}: on the original order for MCQA, over every "
    f"variant for MCQA+; – where the row has no chance level (MV, CoRA, BMCA, CI, INVALID); {INVALID_NOTE}; "
    + AT_CHANCE_NOTE
)


CORA_FAMILY_PREFIXES = ("mcqa_plus", "mv", "bmca_", "ci", "cora")  # meaningless for a one-variant set (CI = 1)


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


def cora_study_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the CoRA study: those that logged `cora` over a divergent set. A run of one variant per
    question (`variants=original`) computes no CoRA family; one in a store written by an earlier version of the
    tool may hold it, with CI = 1 by definition: it is no consistency result, so it is left out of every CoRA
    table and plot."""
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
        out.tables.append(_cora_table(benchmark, label, latest(rows, ["model"]).set_index("model").sort_index()))
    return out


def _cora_table(benchmark: str, label: str, rows: pd.DataFrame) -> Table:
    """The CoRA table of one benchmark and condition: `rows` one run per model, indexed by model."""
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
    shown = {
        (n, model): judged_cell(cast(pd.Series, rows.loc[model]), key[n])  # a row: one run per model
        for n in names
        for model in values.columns
    }
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
    return Table(
        title=title,
        data=data,
        text=text,
        name=slug("cora", benchmark, label),
        caption=f"{len(rows)} model{'s' if len(rows) != 1 else ''}; " + CORA_CAPTION,
    )


class PairedLookup(Protocol):
    """What the rank changes read from the paired study (`src.compare.paired.PairedStudy`)."""

    def lookup(self, run_a: str, run_b: str, metric: str) -> PairedDifference | None: ...


def rank_changes(cora: Built, paired: PairedLookup | None = None) -> Built:
    """Per CoRA table: each model's MCQA rank against its CoRA rank, and the pairs of models that swap places.

    With `paired` (a `src.compare.paired.PairedStudy`), each swap says whether it is significant: the model above
    on MCQA is significantly better on MCQA (the paired 95% interval of its MCQA difference lies above 0) AND
    significantly worse on CoRA (the interval of its CoRA difference lies below 0)."""
    out = Built()
    rows: list[dict[str, Any]] = []
    swaps: list[str] = []
    swap_rows: list[dict[str, Any]] = []
    for table in cora.tables:
        ranks = table.data.pivot_table(index="model", columns="metric", values="rank")
        values = table.data.pivot_table(index="model", columns="metric", values="value")
        if not {"MCQA", "CoRA"} <= set(ranks.columns):
            continue
        ranks = ranks.dropna(subset=["MCQA", "CoRA"])
        rows += _rank_rows(table, ranks, values)
        lines, tested = _swaps(table, ranks, paired)
        swaps += lines
        swap_rows += tested
    if not rows:
        out.notes.append("rank changes: no CoRA table with both MCQA and CoRA")
        return out
    out.tables.append(_rank_table(pd.DataFrame(rows), swaps, bool(swap_rows)))
    if swap_rows:
        out.tables.append(_swap_table(pd.DataFrame(swap_rows)))
    return out


def _rank_rows(table: Table, ranks: pd.DataFrame, values: pd.DataFrame) -> list[dict[str, Any]]:
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


def _swaps(table: Table, ranks: pd.DataFrame, paired: PairedLookup | None) -> tuple[list[str], list[dict[str, Any]]]:
    """(lines, rows): the pairs of models of one table that swap places between MCQA and CoRA, a line each, and
    with `paired` a row each with both paired differences and whether the swap is significant."""
    swaps: list[str] = []
    swap_rows: list[dict[str, Any]] = []
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
    return swaps, swap_rows


def _rank_table(data: pd.DataFrame, swaps: list[str], tested: bool) -> Table:
    """MCQA rank vs CoRA rank, its caption naming the swaps."""
    text = data.assign(
        mcqa=data["mcqa"].map(fmt),
        cora=data["cora"].map(fmt),
        **{"chance (MCQA)": data["chance (MCQA)"].map(fmt)},
        change=data["change"].map(lambda c: f"+{c}" if c > 0 else str(c).replace("-", MINUS)),
    )
    caption = f"change = {minus('MCQA rank', 'CoRA rank')} (+: the model climbs once consistency counts). " + (
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
            f"MCQA: {minus('above', 'below')} [95%]": [difference_cell(d) for d in swap_data["MCQA difference"]],
            f"CoRA: {minus('above', 'below')} [95%]": [difference_cell(d) for d in swap_data["CoRA difference"]],
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


def _swap_verdict(
    table: Table, first: str, second: str, paired: PairedLookup | None
) -> tuple[bool, PairedDifference, PairedDifference] | None:
    """(significant, MCQA difference, CoRA difference) of `first` - `second`, or None without paired results."""
    if paired is None or "run_id" not in table.data.columns:
        return None
    run = table.data.drop_duplicates("model").set_index("model")["run_id"]
    d_mcqa, d_cora = (paired.lookup(run[first], run[second], m) for m in ("mcqa", "cora"))
    if d_mcqa is None or d_cora is None:
        return None
    significant = d_mcqa.lo is not None and d_cora.hi is not None and d_mcqa.lo > 0 and d_cora.hi < 0
    return significant, d_mcqa, d_cora
