"""Log ingested answers as an MLflow run laid out as a native job's (`src.job.runner.run_job`): the same metrics
(`compute_metrics` plus the run-level counts), params, tags and artifacts (`records.parquet`, `metrics.json`,
`config.yaml`), through the same `src.tracking.active_run.log_run`, so `src.compare` reads it like any other run.

What differs is said in tags: `source=ingest`, `source_format`, `source_file` and `source_sha256` (the ingested
file's sha256), `sure_rule`; `backend` names the source instead of a loaded model.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from src.core.records import write_records
from src.tracking import review, store
from src.tracking.active_run import log_run
from src.tracking.identity import config_hash
from src.tracking.job_tracker import artifacts_folder
from src.tracking.provenance import git_commit

from ..variants import REASONS as EXCLUSION_REASONS
from .common import Ingested, build_records


@dataclass(frozen=True)
class IngestResult:
    run_id: str
    metrics: dict[str, float]
    records: pd.DataFrame
    out_dir: Path | None  # where the artifacts were written (None: a temporary folder, removed)


def interval_options(seed: int) -> dict[str, Any]:
    """The intervals a native run computes beside its headline metrics (`stats.bootstrap`, `stats.level` at their
    schema defaults), seeded by the run's seed."""
    from src.config.schema import StatsConfig  # local: loads hydra, omegaconf (slow import)

    stats = StatsConfig()
    return {"intervals": int(stats.bootstrap), "level": float(stats.level), "interval_seed": seed}


def log_ingested(
    ingested: Ingested,
    *,
    tracking_uri: str,
    experiment: str,
    sure_rule: str,
    params: Mapping[str, Any],
    tags: Mapping[str, str],
    out_dir: str | Path | None = None,
    run_name: str | None = None,
) -> IngestResult:
    """One MLflow run of the ingested trials; `params` are the flattened ingest options (logged as a native run
    logs its flattened config), `tags` what the source adds (`source_*`)."""
    import mlflow
    from omegaconf import OmegaConf

    from src.metrics.chance import chance_levels, chance_tags  # local: loads numpy (slow import)

    from ..metrics import compute_metrics  # local: loads numpy (slow import)

    store.check_tracking(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    exp_id = store.with_retries(lambda: store.experiment_id(mlflow, experiment, tracking_uri))
    info = ingested.run_info
    base_tags = {"kind": "job", "source": "ingest", "config_hash": config_hash(dict(params))}
    name = run_name or f"{info['model']}-{info['benchmark']}-{info['variant_set']}-T{float(info['temperature'])}-ingest"
    own_dir = None
    if out_dir is None:
        own_dir = tempfile.TemporaryDirectory(prefix="ingest-")
        out_dir = own_dir.name
    folder = Path(out_dir)
    try:
        with mlflow.start_run(experiment_id=exp_id, tags=base_tags, run_name=name) as run:
            start = time.perf_counter()
            records = build_records(ingested, run_id=run.info.run_id)
            metrics = compute_metrics(records, sure_rule=sure_rule, **interval_options(int(info["seed"])))
            metrics.update(chance_levels(records))  # as a native run: what the headline is judged against
            # as a native run: every exclusion reason, 0 included, so that runs line up by metric name in MLflow
            metrics.update({f"n_excluded_{reason}": 0.0 for reason in EXCLUSION_REASONS})
            metrics["seconds"] = time.perf_counter() - start
            metrics["cache_hit_rate"] = 0.0
            artifacts = artifacts_folder(folder)
            write_records(records, artifacts)
            (artifacts / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
            (artifacts / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(dict(params))))
            log_run(
                mlflow,
                params=dict(params),
                metrics=metrics,
                tags=review.review_tags(  # in the review view's order, as a job run logs them
                    {
                        "model": str(info["model"]),
                        "benchmark": str(info["benchmark"]),
                        "variants": str(info["variant_set"]),
                        "temperature": str(float(info["temperature"])),
                        "scoring": str(info["scoring"]),
                        "git_commit": git_commit(),
                        "sure_rule": sure_rule,
                        **chance_tags(metrics),
                        **ingested.tags,
                        **dict(tags),
                    },
                    metrics,
                ),
                artifacts_dir=artifacts,
            )
        return IngestResult(
            run_id=run.info.run_id, metrics=metrics, records=records, out_dir=None if own_dir else folder
        )
    finally:
        if own_dir is not None:
            own_dir.cleanup()
