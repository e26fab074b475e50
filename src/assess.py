"""`python -m src.assess --experiment NAME [--tracking-uri URI]`: the answer-fluctuation assessment protocol.

Reads the finished runs of an MLflow experiment, groups their metrics into (model, benchmark) points (a
later run's value wins when several runs log the same metric), writes the R^2 table of every permutation-set
metric against `full_fr`, original accuracy and both (the paper's Table 1), and the stability study of
every point that asked all orders (`perm_full` / `perm_all` records), then logs them as CSV and Markdown
artifacts of a new run tagged `kind=assessment` in the same experiment.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from src.cli import add_tracking_flags, entry, user_error
from src.common.errors import UserError
from src.tracking import store
from src.tracking.names import DEFAULT_URI, metric_name
from src.tracking.records import read_run_records

ASSESSMENT_TAG = ("kind", "assessment")


def _runs(client: store.Client, experiment_id: str) -> list[store.Run]:
    runs = store.search_all(client, [experiment_id], "attributes.status = 'FINISHED'")
    key, value = ASSESSMENT_TAG
    return [r for r in runs if r.data.tags.get(key) != value and "model" in r.data.tags and "benchmark" in r.data.tags]


def build_tables(
    runs: list[store.Run], *, draws: int, seed: int, min_points: int, tracking_uri: str
) -> tuple[dict[str, str], int]:
    """({file name: text}, number of points): the points, the R^2 table (long CSV + Markdown) and the stability
    study."""
    from .metrics import tidy_permutations  # local: loads numpy (slow import)
    from .metrics.assessment import (
        STABILITY_METRICS,
        markdown,
        points_from_runs,
        r2_table,
        r2_wide,
        stability,
    )  # local: loads numpy, sklearn (slow import)

    points = points_from_runs(
        [
            {
                "model": r.data.tags["model"],
                "benchmark": r.data.tags["benchmark"],
                "start_time": r.info.start_time,
                "metrics": {metric_name(k): v for k, v in r.data.metrics.items()},
            }
            for r in runs
        ]
    )
    files = {"points.csv": points.to_csv(index=False)}
    n_full = int(points["full_fr"].notna().sum()) if "full_fr" in points.columns else 0
    if n_full >= min_points:
        table = r2_table(points, min_points=min_points)
        files["r2.csv"] = table.to_csv(index=False)
        titles = {
            "full_fr": "(a) target: full fluctuation rate",
            "accuracy": "(b) target: accuracy on the original order",
            "both": "(c) targets: full fluctuation rate and original accuracy",
        }
        parts = [f"# R^2 of metrics on permutation subsets ({n_full} (model, benchmark) points)\n"]
        for target, wide in r2_wide(table).items():
            parts.append(f"## {titles[target]}\n\n{markdown(wide)}\n")
        files["r2.md"] = "\n".join(parts)
    stable = []
    for r in runs:
        if "fr_at_full" not in r.data.metrics:
            continue
        records = tidy_permutations(read_run_records(r.info.run_id, tracking_uri))
        result = stability(records, n_draws=draws, seed=seed)
        stable.append(
            result.assign(model=r.data.tags["model"], benchmark=r.data.tags["benchmark"], run_id=r.info.run_id)
        )
    if stable:
        table = pd.concat(stable, ignore_index=True)
        files["stability.csv"] = table.to_csv(index=False)
        parts = [f"# Stability: std over {draws} random draws of permutations\n"]
        for draw, group in table.groupby("draw", sort=False):
            wide = group.pivot_table(index=["benchmark", "model"], columns="metric", values="std", sort=True)
            wide = wide.reindex(columns=[m for m in STABILITY_METRICS if m in wide.columns])
            wide.index = [f"{b} / {m}" for b, m in wide.index]
            wide.index.name = "benchmark / model"
            parts.append(f"## random {'pairs' if draw == 'pairs' else '|L|-tuples'}\n\n{markdown(wide, digits=4)}\n")
        files["stability.md"] = "\n".join(parts)
    if len(files) == 1:
        raise UserError(
            f"--experiment: {len(points)} (model, benchmark) points, {n_full} with full_fr; the R^2 table "
            f"needs {min_points} and the stability study one perm_full/perm_all run: run variants=perm_all first"
        )
    return files, len(points)


def assess(
    experiment: str, tracking_uri: str = DEFAULT_URI, *, draws: int = 100, seed: int = 0, min_points: int = 3
) -> dict[str, Any]:
    """Build and log the assessment of `experiment`; returns {"run_id", "files", "n_points"}."""
    import mlflow

    store.check_tracking(tracking_uri)
    client = store.client(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise UserError(
            f"--experiment: no experiment {experiment!r} at {tracking_uri}; check the name or --tracking-uri"
        )
    runs = _runs(client, exp.experiment_id)
    files, n_points = build_tables(runs, draws=draws, seed=seed, min_points=min_points, tracking_uri=tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    with (
        tempfile.TemporaryDirectory() as tmp,
        mlflow.start_run(experiment_id=exp.experiment_id, run_name="assessment", tags=dict([ASSESSMENT_TAG])) as run,
    ):
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
        mlflow.log_artifacts(tmp)
        mlflow.log_params({"draws": draws, "seed": seed, "min_points": min_points, "n_source_runs": len(runs)})
        mlflow.log_metric("n_points", n_points)
    return {"run_id": run.info.run_id, "files": sorted(files), "n_points": n_points}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.assess", description=__doc__.splitlines()[0])
    add_tracking_flags(parser, experiment="MLflow experiment whose runs are the points", required=True)
    parser.add_argument("--draws", type=int, default=100, help="random pairs / |L|-tuples in the stability study")
    parser.add_argument("--seed", type=int, default=0, help="seed of the stability draws")
    parser.add_argument("--min-points", type=int, default=3, help="fewest (model, benchmark) points for an R^2")
    args = parser.parse_args(argv)
    try:
        result = assess(
            args.experiment, args.tracking_uri, draws=args.draws, seed=args.seed, min_points=args.min_points
        )
    except UserError as err:
        return user_error(err)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    entry(main)
