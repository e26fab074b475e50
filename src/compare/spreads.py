"""The spreads the seed papers report, computed their way, beside the 95% intervals this tool logs.

- CoRA paper, Table 6: the standard deviation of MCQA+, MV and CoRA over 10,000 resamples of 100 variant slots
  of the divergent set (`src.metrics.cora.cora_bootstrap`), printed x 10^3 as the paper does;
- repetition paper, Table 1: "accuracy stdev", the sample std of the R per-repetition accuracies (`acc_std`);
- answer-fluctuation paper, Figure 4: the std of each metric over 100 random pairs and 100 random |L|-tuples of
  permutations, from a run that asked every order (`src.metrics.assessment.stability`).

The papers' spreads measure how much a number moves when the variants, repetitions or permutations drawn change;
the intervals measure how much it moves with the questions sampled. They answer different questions, so the
tables put them side by side rather than one in place of the other.
"""

from __future__ import annotations

import math

import pandas as pd

from src.common.errors import UserError
from src.metrics.display import cell, fmt

from ..metrics import tidy_permutations
from ..metrics.cora import cora_bootstrap
from .load import Runs
from .tables.common import CHANCE_NOTE, Built, Table, condition_groups, has, latest, run_rows, slug
from .tables.cora import cora_study_runs
from .tables.repetition import repetition_groups, repetition_runs

CORA_BOOTSTRAPPED = (("MCQA+", "mcqa_plus"), ("MV", "mv"), ("CoRA", "cora"))
FLUCTUATION_SHOWN = ("aacc", "wacc", "sacc", "fr", "one_minus_sensg")  # the paper's Figure 4, label metrics
INTERVAL_WORDS = "[95%]: the interval the run logged (questions resampled)"


def cora_spreads(runs: Runs) -> Built:
    """Per CoRA table: each model's MCQA+, MV and CoRA with the logged interval and the CoRA paper's bootstrap std."""
    out = Built()
    study = cora_study_runs(runs.table)
    for benchmark, label, rows, _ in condition_groups(study, axes=("model",)):
        rows = latest(rows, ["model"]).sort_values("model")
        data, text = [], {}
        for _, r in rows.iterrows():
            logged = {m: r.get(f"{m}_boot_std", math.nan) for _, m in CORA_BOOTSTRAPPED}
            if any(v != v for v in logged.values()):
                try:
                    boot = cora_bootstrap(runs.records(r["run_id"]))
                except UserError as err:
                    out.notes.append(f"CoRA bootstrap std of run {r['run_id'][:8]}: records not readable ({err})")
                    boot = {}
                logged = {m: boot.get(f"{m}_boot_std", math.nan) for _, m in CORA_BOOTSTRAPPED}
            row = {}
            for name, m in CORA_BOOTSTRAPPED:
                row[f"{name} [95%]"] = cell(r, m)
                row[f"{name} std x10³ (CoRA paper)"] = fmt(logged[m] * 1000, 1)
                data.append(
                    {
                        "benchmark": benchmark,
                        "condition": label,
                        "model": r["model"],
                        "metric": m,
                        "value": r.get(m, math.nan),
                        "boot_std": logged[m],
                    }
                )
            row["chance (MCQA+)"] = fmt(r.get("chance_variants", math.nan))
            text[r["model"]] = row
        if not text:
            continue
        frame = pd.DataFrame.from_dict(text, orient="index")
        frame.index.name = "model"
        out.tables.append(
            Table(
                title=f"CoRA: {benchmark}" + (f" ({label})" if label else ""),
                data=pd.DataFrame(data),
                text=frame,
                name=slug("spread_cora", benchmark, label),
                caption="std x10³: standard deviation over 10,000 resamples of 100 variant slots of "
                "the divergent set (CoRA paper, section 6.1 and Table 6); "
                + INTERVAL_WORDS
                + f"; {CHANCE_NOTE}, over every variant",
            )
        )
    return out


def repetition_spreads(runs: Runs) -> Built:
    """Per repetition table: acc mean with its logged interval beside the repetition paper's accuracy stdev."""
    out = Built()
    rows_with = repetition_runs(runs.table)
    if rows_with.empty:
        return out
    for benchmark, label, rows, _, _rule in repetition_groups(rows_with):
        records = run_rows(rows)
        text = pd.DataFrame(
            {
                "temperature": [fmt(r["temperature"], 2) for r in records],
                "repetitions": [fmt(r.get("repetitions")) for r in records],
                "acc mean [95%]": [cell(r, "acc_mean") for r in records],
                "acc stdev (repetition paper)": [fmt(r.get("acc_std", math.nan), 4) for r in records],
                "chance": [fmt(r.get("chance", math.nan)) for r in records],
            },
            index=pd.Index(rows["model"].to_numpy(), name="model"),
        )
        data = rows[
            [
                c
                for c in ("model", "temperature", "repetitions", "acc_mean", "acc_mean_lo", "acc_mean_hi", "acc_std")
                if c in rows.columns
            ]
        ].assign(benchmark=benchmark, condition=label)
        out.tables.append(
            Table(
                title=f"Repetition: {benchmark}" + (f" ({label})" if label else ""),
                data=data,
                text=text,
                name=slug("spread_repetition", benchmark, label),
                caption="acc stdev: sample standard deviation of the R per-repetition accuracies "
                "(repetition paper, Table 1, 'accuracy stdev'); " + INTERVAL_WORDS + f"; {CHANCE_NOTE}, of acc mean",
            )
        )
    return out


def fluctuation_spreads(runs: Runs, *, n_draws: int = 100, seed: int = 0) -> Built:
    """Per run that asked every order: the answer-fluctuation paper's std over random pairs and |L|-tuples of
    permutations, beside the value and logged interval of the metric on the seeded random2 and randomL sets."""
    from ..metrics.assessment import stability  # local: loads sklearn (slow import)

    out = Built()
    frame = runs.table
    rows_with = frame[has(frame, "fr@full")]
    rows_with = latest(
        rows_with, ["model", "benchmark", "variants", "temperature", "scoring", "prompt", "fewshot", "limit", "seed"]
    ).sort_values(["benchmark", "model"])
    for _, r in rows_with.iterrows():
        try:
            found = stability(tidy_permutations(runs.records(r["run_id"])), n_draws=n_draws, seed=seed)
        except UserError as err:
            out.notes.append(f"fluctuation stability of run {r['run_id'][:8]}: records not readable ({err})")
            continue
        if found.empty:
            continue
        std = found.pivot_table(index="metric", columns="draw", values="std")
        shown = [m for m in FLUCTUATION_SHOWN if m in std.index]
        text = pd.DataFrame(
            {
                "@random2 [95%]": [cell(r, f"{m}@random2") for m in shown],
                "std over random pairs (fluctuation paper)": [
                    fmt(std.at[m, "pairs"], 4) if "pairs" in std else "–" for m in shown
                ],
                "@randomL [95%]": [cell(r, f"{m}@randomL") for m in shown],
                "std over random |L|-tuples (fluctuation paper)": [
                    fmt(std.at[m, "tuples"], 4) if "tuples" in std else "–" for m in shown
                ],
            },
            index=pd.Index(shown, name="metric"),
        )
        title = f"Answer fluctuation: {r['model']} on {r['benchmark']} (T={r['temperature']:g})"
        out.tables.append(
            Table(
                title=title,
                data=found.assign(model=r["model"], benchmark=r["benchmark"], run_id=r["run_id"]),
                text=text,
                name=slug("spread_fluctuation", r["benchmark"], r["model"], f"T{r['temperature']:g}"),
                caption=f"std: sample standard deviation of the metric over {n_draws} random pairs "
                f"and {n_draws} random |L|-tuples of permutations (answer-fluctuation paper, "
                "section 5.3 and Figure 4); "
                + INTERVAL_WORDS
                + f"; {CHANCE_NOTE}: aacc's, {fmt(r.get('chance', math.nan))}",
            )
        )
    return out


FLUCTUATION_OPT_IN = (
    "the answer-fluctuation paper's stability study (std over 100 random pairs and 100 random "
    "|L|-tuples of permutations) recomputes every fluctuation metric 200 times per run: add "
    "--fluctuation-spreads, or run python -m src.assess, which logs it for a set of runs"
)


def paper_spreads(runs: Runs, *, fluctuation: bool = False) -> Built:
    """Every study's spread, as its paper reports it; the fluctuation paper's (`fluctuation_spreads`, 200 full
    metric computations per run) only when asked for, otherwise a note saying how."""
    out = Built()
    parts = [cora_spreads(runs), repetition_spreads(runs)]
    if fluctuation:
        parts.append(fluctuation_spreads(runs))
    elif has(runs.table, "fr@full").any():
        out.notes.append(FLUCTUATION_OPT_IN)
    for part in parts:
        out.tables += part.tables
        out.notes += part.notes
    return out
