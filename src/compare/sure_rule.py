"""`python -m src.compare --sure-rule RULE`: every run's repetition metrics under one SURE rule.

A run logs its repetition metrics under the rule it was run with (tag `sure_rule`: `answer`, section 3.2, or
`correctness`, the paper's tables; docs/metrics.md, "What the paper's tables count"). Runs under different rules
are never put in one table; this recomputes the SURE/UNSURE shares, `rws` and `st` of the runs logged under
the other rule from their records (their intervals too, where the run logged intervals), so that every run,
native or ingested, stands in the same table.
"""

from __future__ import annotations

import math

import pandas as pd

from src.common.errors import UserError
from src.core.metric_choices import SURE_RULES
from src.tracking import records as run_records

from .load import Runs

RULE_METRICS = ("sure_right", "unsure_right", "unsure_wrong", "sure_wrong", "rws", "st")


def apply_sure_rule(runs: Runs, rule: str) -> list[str]:
    """Recompute, in place, the repetition metrics of `runs.table` whose rule is not `rule`; returns notes
    (one per run recomputed, and per run whose records could not be read, which keeps its own rule)."""
    from src.metrics.intervals import interval_names, metric_intervals  # local: loads numpy (slow import)
    from src.metrics.repetition import repetition_metrics  # local: loads numpy (slow import)

    if rule not in SURE_RULES:
        raise UserError(f"--sure-rule: unknown rule {rule!r}; choose one of {', '.join(SURE_RULES)}")
    table = runs.table
    if "sure_rule" not in table.columns:
        table["sure_rule"] = SURE_RULES[0]
    notes: list[str] = []
    if "st" not in table.columns:
        table["sure_rule"] = rule  # no repetition metrics to recompute
        return notes
    for index, row in table.iterrows():
        if row["sure_rule"] == rule:
            continue
        if row["st"] != row["st"]:  # no repetition metrics in this run: nothing depends on the rule
            table.at[index, "sure_rule"] = rule
            continue
        try:
            records = run_records.read_run_records(row["run_id"], runs.tracking_uri, key="--sure-rule")
        except UserError as err:
            notes.append(f"--sure-rule {rule}: run {row['run_id'][:8]} keeps its rule {row['sure_rule']} ({err})")
            continue
        metrics = repetition_metrics(records, sure_rule=rule)
        bounds = [bound for name in RULE_METRICS for bound in interval_names(name) if bound in table.columns]
        if any(row[bound] == row[bound] for bound in bounds):
            # the logged intervals are the other rule's (an S/T of 0.17 with [0.52, 0.83]): made again under
            # this one as the job makes them (1000 resamples seeded by the run's seed; the tables say 95%)
            seed = 0 if pd.isna(row.get("seed")) else int(row["seed"])
            metrics |= metric_intervals(
                records, metrics, families=["repetition"], by_subjects=False, seed=seed, sure_rule=rule
            )
        for name in [*RULE_METRICS, *bounds]:
            if name not in table.columns:
                table[name] = math.nan
            table.at[index, name] = metrics.get(name, math.nan)
        notes.append(
            f"--sure-rule {rule}: run {row['run_id'][:8]} ({row['model']}, T={row['temperature']:g}) was "
            f"logged under {row['sure_rule']}; its SURE/UNSURE shares, RWS and S/T are recomputed from its "
            f"records"
        )
        table.at[index, "sure_rule"] = rule
    return notes


def trial_parts_of(runs: Runs) -> tuple[dict[str, dict[str, float]], list[str]]:
    """(run id -> `src.metrics.repetition.trial_parts` under the run's SURE rule, notes) for every run with
    `acc_mean`, from its records: the SURE/UNSURE bars' parts. A run whose records cannot be read is named."""
    from src.metrics.repetition import trial_parts  # local: loads numpy (slow import)

    table = runs.table
    found: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    if "acc_mean" not in table.columns:
        return found, notes
    for _, row in table[table["acc_mean"].notna()].iterrows():
        try:
            records = runs.records(row["run_id"], key="--no-paired")
        except UserError as err:
            notes.append(f"SURE/UNSURE bars: run {row['run_id'][:8]} drawn from its metrics ({err})")
            continue
        rule = row["sure_rule"] if isinstance(row.get("sure_rule"), str) else SURE_RULES[0]
        found[row["run_id"]] = trial_parts(records, sure_rule=rule)
    return found, notes
