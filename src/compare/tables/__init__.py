"""The papers' comparison tables, from the runs table of `load.load_runs` (one row per run, a column per metric).

Pure pandas: no mlflow, no matplotlib. Each builder returns `Table`s (a numeric frame for the CSV and a text
frame for Markdown/HTML) in a `Built`, whose notes say what it could not build and why. One module per paper:

- `common`: the nouns (`Table`, `Built`), the notes under the tables, cells judged against chance, and the grouping
  of runs into one table per benchmark and condition;
- `cora`: CoRA Table 1 with ranks, and the rank changes between MCQA and CoRA;
- `repetition`: repetition Table 1 (SURE/UNSURE shares, RWS | S/T), per SURE rule;
- `fluctuation`: the answer-fluctuation paper's R² table;
- `revas`: REVAS by number of options, and its summary;
- `run_diff`: per-question disagreements between two runs.

The builders and the cells are re-exported here (`from src.compare.tables import cora_tables`).
"""

from src.metrics.display import cell, fmt, fmt_ci

from .common import AT_CHANCE_NOTE, Built, Table, chance_mark, judged_cell
from .cora import cora_tables, rank_changes
from .fluctuation import fluctuation_tables
from .repetition import repetition_tables
from .revas import revas_tables
from .run_diff import diff_records

__all__ = [
    "AT_CHANCE_NOTE",
    "Built",
    "Table",
    "cell",
    "chance_mark",
    "cora_tables",
    "diff_records",
    "fluctuation_tables",
    "fmt",
    "fmt_ci",
    "judged_cell",
    "rank_changes",
    "repetition_tables",
    "revas_tables",
]
