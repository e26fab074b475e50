"""Cross-run comparison: `python -m src.compare --experiment NAME` turns a sweep's MLflow runs into the papers'
ranking tables and consistency plots, as Markdown + CSV + a self-contained HTML report.

- `load`: the finished job runs of an experiment/sweep as one table (a column per metric); a run's records
  come from `src.tracking.records.read_run_records`;
- `tables`: CoRA Table 1 with ranks, rank changes, repetition Table 1, fluctuation R², REVAS by option count,
  per-question disagreements between two runs (pure pandas);
- `plots`: consistency plot, BMCA(c) curves, SURE/UNSURE bars, accuracy vs number of options (matplotlib Agg),
  each with the chance level (`src.metrics.chance`) as a dashed line;
- `spreads`: the spread each seed paper reports (CoRA bootstrap std, repetition accuracy stdev, fluctuation
  stability), beside the logged intervals;
- `questions`: the questions the models (or the variants of one run) answer differently, with the prompt as
  shown, the outputs and the parses;
- `report`: the sections, their rendering, and the MLflow run tagged kind=comparison.
"""
