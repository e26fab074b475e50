"""`python -m devtools.perf --only intervals`: the headline metrics' intervals, vectorised vs naive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devtools.perf.meter import Meter, build


def part_intervals(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Intervals of every headline metric (overall and per subject) of a full MMLU x CoRA run of the simulated model:
    the vectorised cluster bootstrap (every metric resampled, Wilson off: the worst case), the intervals as a run
    logs them (Wilson where exact), and the naive bootstrap (compute_metrics on explicitly resampled records)
    timed on a few resamples and extrapolated to the same count."""
    import numpy as np
    import pandas as pd

    from src.answering.trials import answer_items, to_records  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it
    from src.backends.simulated import SimulatedBackend, SimulatedSettings  # local: loads pandas (slow import)
    from src.metrics import applicable_families, compute_metrics  # local: loads numpy, pandas (slow import)
    from src.metrics.intervals import (  # local: loads numpy, pandas (slow import)
        bootstrap_values,
        decompose,
        metric_intervals,
        resample_counts,
        resample_records,
    )

    saved = Path(args.intervals_records) if args.intervals_records else None
    if saved is not None and saved.is_file():
        print(f"intervals: the records table in {saved}", flush=True)
        records = pd.read_parquet(saved)
    else:
        print("intervals: a full MMLU x CoRA records table of the simulated model (success_rate 0.7)", flush=True)
        with meter.phase("intervals_records (build+answer)"):
            cfg, items = build(["variants=cora", "model=simulated", "model.success_rate=0.7"], None, benchmark="mmlu")
            answers = answer_items(
                SimulatedBackend(SimulatedSettings(success_rate=0.7)),
                items,
                scoring="generate",
                params=SamplingParams(n=1),
                cache=None,
                progress=False,
            )
            records = to_records(
                items,
                answers,
                run_info={
                    "run_id": "perf",
                    "model": "simulated",
                    "benchmark": "mmlu",
                    "variant_set": "cora",
                    "temperature": 0.0,
                    "seed": 0,
                    "scoring": "generate",
                },
            )
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            records.to_parquet(saved)
    families = applicable_families(records)
    with meter.phase("intervals_point_metrics"):
        point = compute_metrics(records, families=families)
    n_questions = records["question_id"].nunique()
    print(f"  {len(records):,} records, {n_questions:,} questions, {records['subject'].nunique()} subjects", flush=True)
    with meter.phase("intervals_decompose (once per run)"):
        decomposition = decompose(records, families=families)
    names = [name for name in decomposition.names if name in point]
    with meter.phase(f"intervals_resample ({args.resamples} x {len(names)} metrics)"):
        bootstrap_values(decomposition, n_resamples=args.resamples, seed=0, names=names)
    with meter.phase(f"intervals_bootstrap (all, {args.resamples} resamples)") as timed:
        every = metric_intervals(
            records, point, n_resamples=args.resamples, seed=0, families=families, closed_form=False
        )
    vectorised = timed["seconds"]
    with meter.phase("intervals_as_logged (Wilson where exact)"):
        logged = metric_intervals(records, point, n_resamples=args.resamples, seed=0, families=families)
    ids = decomposition.question_ids
    with meter.phase(f"intervals_naive ({args.naive_resamples} resamples)") as timed:
        for counts in resample_counts(np.random.default_rng(0), len(ids), args.naive_resamples):
            compute_metrics(resample_records(records, counts.astype(int), ids), families=families)
    naive = timed["seconds"] / args.naive_resamples * args.resamples
    print(
        f"  {len(every) // 2} intervals by the bootstrap ({len(logged) // 2} as a run logs them); naive path "
        f"{timed['seconds'] / args.naive_resamples:.1f} s per resample, ~{naive:.0f} s for {args.resamples}",
        flush=True,
    )
    ratios["intervals_bootstrap_seconds"] = vectorised
    ratios["intervals_resamples"] = float(args.resamples)
    ratios["intervals_logged_seconds"] = meter.results["intervals_as_logged (Wilson where exact)"]["seconds"]
    ratios["intervals_naive_vs_vectorised"] = naive / vectorised
    ratios["intervals_records"] = float(len(records))
