"""Cross-run comparison: `python -m src.compare --experiment NAME` turns a sweep's MLflow runs into the papers'
ranking tables and consistency plots, as Markdown + CSV + a self-contained HTML report.

- `load`: the finished job runs of an experiment/sweep as one table (a column per metric); a run's records
  come from `src.tracking.records.read_run_records`;
- `tables/`: one module per paper (pure pandas): CoRA Table 1 with ranks and rank changes (`cora`), repetition
  Table 1 (`repetition`), fluctuation R² (`fluctuation`), REVAS by option count (`revas`), per-question
  disagreements between two runs (`run_diff`), and what they share (`common`);
- `paired`, `summary`: the paired differences and questions needed, and the report's first screen;
- `plots`: consistency plot, BMCA(c) curves, SURE/UNSURE bars, accuracy vs number of options (matplotlib Agg),
  each with the chance level (`src.metrics.chance`) as a dashed line;
- `spreads`: the spread each seed paper reports (CoRA bootstrap std, repetition accuracy stdev, fluctuation
  stability), beside the logged intervals;
- `questions`: the questions the models (or the variants of one run) answer differently, with the prompt as
  shown, the outputs and the parses;
- `sections`: the report's sections, decision first; `definitions`: the definitions table;
- `render`: the sections as Markdown and as one self-contained HTML page;
- `report`: the report folder written whole, and the MLflow run tagged kind=comparison that holds it
  (its MLflow calls in `src.tracking.reads`).
"""
