"""The answer-fluctuation paper's Table 1: R² of every permutation-set metric against the full fluctuation rate and
the original accuracy, across (model, benchmark) points."""

from __future__ import annotations

import pandas as pd

from src.metrics.display import fmt
from src.metrics.intervals import is_interval_name

from .common import Built, Table, slug


def fluctuation_tables(runs: pd.DataFrame, *, min_points: int = 3) -> Built:
    """R^2 of every permutation-set metric against full_fr, original accuracy and both, across the
    (model, benchmark) points, via the assessment protocol in `src.metrics.assessment`."""
    out = Built()
    try:
        from src.metrics.assessment import (
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
