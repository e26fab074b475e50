"""Answers produced elsewhere as this tool's records, metrics and MLflow run: `python -m src.ingest`.

A run of answers made by another program or service gets the same records table (`src/core/records.py`, built by
`src.answering.trials.to_records`), the same metrics (`src.metrics.compute_metrics`), the same MLflow layout (params,
tags, `records.parquet`, `metrics.json`, `config.yaml`, through `src.tracking.active_run.log_run`) and so the same
`python -m src.compare` report as a native run. Raw answer texts are re-parsed with this tool's parser and each
record says by which rule (`parse_rule`). Tags say where the answers came from: `source=ingest`,
`source_format`, `source_file`, `source_sha256`.

Formats, one module each:

- `cat`: the CoRA authors' expanded-evaluation tables (github IBM/cat), `.xlsx` or `.csv` as released;
- `lm_eval`: lm-evaluation-harness `--log_samples` JSONL;
- `generic`: a long table of trials (CSV, JSONL, parquet), the format `python -m src.export` writes.

`run_log` logs the run; `common` holds what the formats share.
"""
