"""The position-bias table: per run, the most chosen answer slot's share of the valid answers against the share of
right answers in that slot, whether it is far above (docs/metrics.md, "Position bias"), and PriDe's estimated prior
where the run has one."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from src.metrics.display import fmt
from src.metrics.slots import (
    FAR_MARGIN,
    SLOT_BIAS_FLAG,
    SLOT_CORRECT,
    SLOT_SHARE,
    most_chosen,
    prior_text,
    slot_flagged,
)

from .common import Built, Table

TITLE = "Position bias"


def _number(row: pd.Series, name: str) -> float:
    """A run's logged number, NaN where the run has none (a runs-table cell is NaN or absent then)."""
    value = row.get(name)
    return float(value) if isinstance(value, (int, float)) else math.nan


def slot_table(runs: pd.DataFrame) -> Built:
    """One row per run that logged slot shares: model, benchmark, variants, temperature, the most chosen slot,
    its share with its 95% interval, the right answers' share in it, the verdict, and PriDe's prior (`–` where the
    run has no cyclic set with label probabilities)."""
    out = Built()
    if runs.empty or SLOT_BIAS_FLAG not in runs.columns or runs[SLOT_BIAS_FLAG].isna().all():
        out.notes.append("position-bias table: no run logged slot shares (needs multiple-choice answers)")
        return out
    rows = runs[runs[SLOT_BIAS_FLAG].notna()].sort_values(
        [c for c in ("benchmark", "model", "variants", "temperature") if c in runs.columns], kind="stable"
    )
    data: list[dict[str, Any]] = []
    for _, row in rows.iterrows():
        metrics = {k: v for k, v in row.items() if isinstance(k, str) and k.startswith((SLOT_SHARE, SLOT_BIAS_FLAG))}
        slot = most_chosen({k: _number(row, k) for k in metrics})
        if slot is None:
            continue
        data.append(
            {
                "run_id": str(row["run_id"]),
                **{k: row.get(k) for k in ("model", "benchmark", "variants", "temperature")},
                "slot": slot,
                "chosen": _number(row, f"{SLOT_SHARE}{slot}"),
                "chosen_lo": _number(row, f"{SLOT_SHARE}{slot}_lo"),
                "chosen_hi": _number(row, f"{SLOT_SHARE}{slot}_hi"),
                "right": _number(row, f"{SLOT_CORRECT}{slot}"),
                "far_above": slot_flagged({SLOT_BIAS_FLAG: _number(row, SLOT_BIAS_FLAG)}),
                "pride_prior": prior_text(row) or "–",
            }
        )
    if not data:
        out.notes.append("position-bias table: no run logged slot shares (needs multiple-choice answers)")
        return out
    frame = pd.DataFrame(data)
    shown = set(frame["run_id"])
    absent = [
        f"run {str(row['run_id'])[:8]} ({row.get('model')}, {row.get('variants')})"
        for _, row in runs.iterrows()
        if str(row["run_id"]) not in shown
    ]
    # a run without a row is named, so that a missing letter habit is not read as a fair one
    left_out = (
        f"; left out (no row): {', '.join(absent)}: no multiple-choice answer that names a slot (true/false or "
        "select-all answers only, or every answer unparsed)"
        if absent
        else ""
    )
    text = pd.DataFrame(
        {
            "model": frame["model"].to_numpy(),
            "benchmark": frame["benchmark"].to_numpy(),
            "variants": frame["variants"].to_numpy(),
            "T": frame["temperature"].map(lambda t: fmt(float(t), 2) if t is not None else "–").to_numpy(),
            "most chosen slot": frame["slot"].to_numpy(),
            "its share of valid answers [95%]": [
                f"{c:.3f} [{lo:.3f}, {hi:.3f}]"
                for c, lo, hi in zip(frame["chosen"], frame["chosen_lo"], frame["chosen_hi"])
            ],
            "right answers in it": frame["right"].map(lambda v: f"{v:.3f}").to_numpy(),
            "verdict": ["far above: a letter habit" if far else "not far above" for far in frame["far_above"]],
            "PriDe prior": frame["pride_prior"].to_numpy(),
        },
        index=pd.Index(frame["run_id"].str[:8], name="run"),
    )
    if (frame["pride_prior"] == "–").all():
        text = text.drop(columns="PriDe prior")
    out.tables.append(
        Table(
            title="the most chosen answer slot against the right answers' share in it",
            data=frame,
            name="position_bias",
            text=text,
            caption=f"far above: the lower bound of the slot's 95% interval exceeds the right answers' share by more "
            f"than {FAR_MARGIN:g}; such a run's accuracy and agreement (SURE, RWS, CoRA's consistency) describe its "
            "letter habit as much as the model. PriDe prior: the position prior PriDe estimates from cyclic orders "
            "(runs with one). Shares of answers, not accuracies: a uniform guesser (chance) would choose each of k "
            f"slots 1/k of the time{left_out}.",
        )
    )
    return out
