"""The answer-fluctuation paper's assessment protocol (section 4) and stability study (section 5.3). Pure.

A *point* is one (model, benchmark) with its logged metrics (names as docs/metrics.md, `wacc@cyclic`). For each
permutation set and metric, `r2_table` fits scikit-learn's LinearRegression of the targets on the metric
over the points and reports R^2: target `full_fr`, target `accuracy` (accuracy on the original order:
`aacc@original`, else `mcqa`), and `both` (the two targets at once; sklearn's multi-output R^2 is the mean
of the two, which reproduces the paper's Table 1c from 1a and 1b). R^2 is unchanged by an affine map
of the metric, so `fr` stands for the paper's "1 - FR (partial)". PriDe is logged on the cyclic set only
(`pride_acc@cyclic`), so its other cells are empty.

`stability` redraws permutation subsets from a run that asked every order (`perm_full` or `perm_all`):
100 random pairs and 100 random |L|-tuples (the same draw for every question with |L| options, reference
order = the first drawn), computes each metric on each draw, and reports the sample std (ddof=1) over draws.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .answers import first_repetition
from .fluctuation import answer_fluctuation, pride_acc, probability_fluctuation

ASSESSED_METRICS = (
    "aacc",
    "pride_acc",
    "wacc",
    "sacc",
    "one_minus_sensg",
    "prob_mass",
    "one_minus_brier",
    "one_minus_entropy",
    "fr",
)
ASSESSED_SETS = ("original", "oi", "random2", "cyclic", "randomL")  # the paper's rows (original: its Figure 3a)
TARGETS = ("full_fr", "accuracy", "both")
STABILITY_METRICS = (
    "aacc",
    "sacc",
    "wacc",
    "one_minus_sensg",
    "fr",
    "prob_mass",
    "one_minus_brier",
    "one_minus_entropy",
    "pride_acc",
)


def points_from_runs(runs: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (model, benchmark) from runs given as {"model", "benchmark", "start_time", "metrics"}:
    the metrics of every run of that point, a later run's value winning, plus the `accuracy` target.

    >>> runs = [{"model": "m", "benchmark": "b", "start_time": 1, "metrics": {"full_fr": 0.3, "mcqa": 0.6}},
    ...         {"model": "m", "benchmark": "b", "start_time": 2, "metrics": {"wacc@oi": 0.5}}]
    >>> points_from_runs(runs)[["model", "full_fr", "wacc@oi", "accuracy"]].values.tolist()
    [['m', 0.3, 0.5, 0.6]]
    """
    merged: dict[tuple[str, str], dict[str, float]] = {}
    for run in sorted(runs, key=lambda r: r.get("start_time") or 0):
        merged.setdefault((run["model"], run["benchmark"]), {}).update(run["metrics"])
    rows = []
    for (model, benchmark), metrics in sorted(merged.items()):
        accuracy = metrics.get("aacc@original", metrics.get("mcqa", math.nan))
        rows.append({"model": model, "benchmark": benchmark, **metrics, "accuracy": accuracy})
    return pd.DataFrame(rows)


def r2(x: np.ndarray, y: np.ndarray) -> float:
    """R^2 of the least-squares line (or plane, for a 2-column y: the mean over columns) of y on x.

    >>> r2(np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 5.0]))
    1.0
    """
    from sklearn.linear_model import LinearRegression  # local: loads sklearn (slow import), ~3 s a test process

    features = np.asarray(x, dtype=float).reshape(-1, 1)
    return float(LinearRegression().fit(features, y).score(features, y))


def r2_table(
    points: pd.DataFrame,
    *,
    sets: Sequence[str] = ASSESSED_SETS,
    metrics: Sequence[str] = ASSESSED_METRICS,
    min_points: int = 3,
) -> pd.DataFrame:
    """Long table: target, perm_set, metric, r2, n_points; r2 NaN with fewer than `min_points` points
    holding the metric and the target(s)."""
    rows = []
    for target in TARGETS:
        wanted = ["full_fr", "accuracy"] if target == "both" else [target]
        for perm_set in sets:
            for metric in metrics:
                column = f"{metric}@{perm_set}"
                if column not in points.columns or any(w not in points.columns for w in wanted):
                    rows.append(
                        {"target": target, "perm_set": perm_set, "metric": metric, "r2": math.nan, "n_points": 0}
                    )
                    continue
                data = points[[column, *wanted]].apply(pd.to_numeric, errors="coerce").dropna()
                value = math.nan
                if len(data) >= min_points:
                    y = data[wanted].to_numpy() if target == "both" else data[wanted[0]].to_numpy()
                    value = r2(data[column].to_numpy(), y)
                rows.append(
                    {"target": target, "perm_set": perm_set, "metric": metric, "r2": value, "n_points": len(data)}
                )
    return pd.DataFrame(rows, columns=["target", "perm_set", "metric", "r2", "n_points"])


def r2_wide(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """{target: permutation sets x metrics}, the layout of the paper's Table 1 (a, b, c)."""
    out: dict[str, pd.DataFrame] = {}
    for target, group in table.groupby("target", sort=False):
        wide = group.pivot(index="perm_set", columns="metric", values="r2")
        sets = list(dict.fromkeys(group["perm_set"]))
        metrics = list(dict.fromkeys(group["metric"]))
        out[str(target)] = wide.reindex(index=sets, columns=metrics)
    return out


def markdown(frame: pd.DataFrame, *, digits: int = 3, index: bool = True) -> str:
    """A GitHub-flavoured Markdown table; NaN shows as an en dash."""

    def cell(value: Any) -> str:
        if isinstance(value, (float, np.floating)):
            return "–" if math.isnan(value) else f"{value:.{digits}f}"
        return str(value)

    headers = ([str(frame.index.name or "")] if index else []) + [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    for label, row in frame.iterrows():
        cells = ([str(label)] if index else []) + [cell(v) for v in row.tolist()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _draw_metrics(rows: pd.DataFrame) -> dict[str, float]:
    out = {**answer_fluctuation(rows), **probability_fluctuation(rows)}
    try:
        out["pride_acc"] = pride_acc(rows, perm_set="draw")
    except ValueError:  # no label probabilities, or too few questions to calibrate on
        pass
    return out


def stability(
    records: pd.DataFrame,
    *,
    n_draws: int = 100,
    seed: int = 0,
    perm_set: str = "full",
    metrics: Sequence[str] = STABILITY_METRICS,
) -> pd.DataFrame:
    """Std (ddof=1) and mean of each metric over `n_draws` random pairs and |L|-tuples of permutations.

    `records` are tidy rows (`perm_set`/`perm_pos`, see `tidy_permutations`) holding the `perm_set` set, every
    order of the options. Returns rows (draw: "pairs" | "tuples", metric, std, mean, n_draws).
    """
    rows = first_repetition(records)
    rows = rows[rows["perm_set"] == perm_set].copy()
    if rows.empty:
        return pd.DataFrame(columns=["draw", "metric", "std", "mean", "n_draws"])
    rows["_order"] = rows["option_order"].map(lambda order: tuple(int(i) for i in order))
    rows["_size"] = rows["_order"].map(len)
    orders_by_size = {size: list(itertools.permutations(range(size))) for size in rows["_size"].unique()}
    keys = list(zip(rows["_size"], rows["_order"]))
    out = []
    for draw, size_of in (("pairs", lambda n: 2), ("tuples", lambda n: n)):
        rng = random.Random(seed)
        values: dict[str, list[float]] = {}
        for _ in range(n_draws):
            position: dict[tuple[int, tuple[int, ...]], int] = {}
            for size, orders in sorted(orders_by_size.items()):
                for pos, order in enumerate(rng.sample(orders, min(size_of(size), len(orders)))):
                    position[(size, order)] = pos
            chosen = np.array([key in position for key in keys])
            picked = rows[chosen].assign(perm_set="draw", perm_pos=[position[k] for k, c in zip(keys, chosen) if c])
            for name, value in _draw_metrics(picked).items():
                values.setdefault(name, []).append(value)
        for name in metrics:
            found = values.get(name, [])
            if len(found) == n_draws and n_draws > 1:
                out.append(
                    {
                        "draw": draw,
                        "metric": name,
                        "std": float(np.std(found, ddof=1)),
                        "mean": float(np.mean(found)),
                        "n_draws": n_draws,
                    }
                )
    return pd.DataFrame(out, columns=["draw", "metric", "std", "mean", "n_draws"])
