"""`python -m devtools.perf --only report_size`: the bytes one CoRA run leaves, in its job folder, in the tracking
store and in its report (`python -m src.compare`), measured on a simulated run from fresh processes; docs/speed.md's
table of them is made by `python -m devtools.perf.tables --write` (devtools/perf/tables.py), as every table of figures.

The run: `model=simulated benchmark=mmlu variants=cora limit=--sizes-limit` (the first questions of MMLU's test
split, 24 CoRA variants each) into a new SQLite store, then `python -m src.compare` on its experiment, which logs
the report as a comparison run. A full-MMLU figure is extrapolated from the measured one: the per-question tables
grow with the questions, the rest of the folder does not.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from devtools.perf.meter import Meter, fresh_process

MMLU_QUESTIONS = 14042  # MMLU's test split: a full run's questions
EXPERIMENT = "report_size"
# the figures of the page's table, in its order: (name in the results file, what it is)
FIGURES = (
    ("report_size_questions", "questions of the measured run (MMLU, 24 CoRA variants each)"),
    ("report_size_report_mb", "its report folder (report.md, report.html, tables/, plots/)"),
    ("report_size_disagreements_mb", "of which the per-question variant disagreements (`.parquet`)"),
    ("report_size_disagreements_csv_mb", "the same table as CSV, as the report wrote it before"),
    ("report_size_full_mmlu_est_mb", "a full-MMLU run's report folder (14,042 questions), extrapolated"),
    ("report_size_job_folder_mb", "the job's `artifacts/` under `hydra.run.dir`"),
    ("report_size_store_job_run_mb", "the store per job run: its artifacts and its rows in mlflow.db"),
    ("report_size_store_comparison_run_mb", "the store per comparison run (the report logged)"),
    ("report_size_job_copies", "copies on disk of the job's artifacts (job folder and store)"),
    ("report_size_report_copies", "copies on disk of the report (report folder and store)"),
)


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []


def bytes_of(folders: Iterable[Path]) -> int:
    """The bytes of every file under `folders`, each name counted (what a copy of the folders would hold)."""
    return sum(p.stat().st_size for folder in folders for p in _files(folder))


def disk_bytes_of(folders: Iterable[Path]) -> int:
    """The bytes of the files under `folders`, each file counted once however many names (hard links) it has."""
    seen: dict[tuple[int, int], int] = {}
    for folder in folders:
        for p in _files(folder):
            st = p.stat()
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def sizes_commands(root: Path, limit: int) -> tuple[list[str], list[str]]:
    """(the job, the comparison) the part runs, on a store under `root`."""
    uri = f"sqlite:///{root}/mlflow.db"
    job = [
        sys.executable,
        "-m",
        "src.run",
        "model=simulated",
        "benchmark=mmlu",
        "variants=cora",
        f"limit={limit}",
        f"tracking.experiment={EXPERIMENT}",
        f"tracking.uri={uri}",
        f"cache.path={root}/responses.db",
        f"hydra.run.dir={root}/run",
    ]
    compare = [
        sys.executable,
        "-m",
        "src.compare",
        "--experiment",
        EXPERIMENT,
        "--tracking-uri",
        uri,
        "--out",
        str(root / "report"),
    ]
    return job, compare


def measure(root: Path, db_empty: int, db_after_job: int) -> dict[str, float]:
    """The part's figures from what the two commands left under `root` (store, job folder, report folder)."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    found = {r.data.tags.get("kind"): r for r in client.search_runs([experiment.experiment_id])}
    job_store = Path(found["job"].info.artifact_uri.removeprefix("file://"))
    report_store = Path(found["comparison"].info.artifact_uri.removeprefix("file://"))
    job_dir, report_dir = root / "run" / "artifacts", root / "report"
    db_final = (root / "mlflow.db").stat().st_size
    table = next((report_dir / "tables").glob("variant_disagreements_*.parquet"))
    frame = pd.read_parquet(table)
    n = int(found["job"].data.params["n_questions"])
    mb = 1e6
    report, disagreements = bytes_of([report_dir]), table.stat().st_size
    return {
        "report_size_questions": float(n),
        "report_size_report_mb": report / mb,
        "report_size_disagreements_mb": disagreements / mb,
        "report_size_disagreements_csv_mb": len(frame.to_csv(index=False).encode()) / mb,
        "report_size_html_mb": (report_dir / "report.html").stat().st_size / mb,
        "report_size_full_mmlu_est_mb": (report - disagreements + disagreements * MMLU_QUESTIONS / n) / mb,
        "report_size_job_folder_mb": bytes_of([job_dir]) / mb,
        "report_size_store_job_run_mb": (bytes_of([job_store]) + db_after_job - db_empty) / mb,
        "report_size_store_comparison_run_mb": (bytes_of([report_store]) + db_final - db_after_job) / mb,
        "report_size_store_db_empty_mb": db_empty / mb,
        # the bytes on disk over one copy's: 1 when the store's names are hard links to the job's or report's files
        "report_size_job_copies": disk_bytes_of([job_dir, job_store]) / bytes_of([job_dir]),
        "report_size_report_copies": disk_bytes_of([report_dir, report_store]) / bytes_of([report_dir]),
    }


def part_report_size(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """One simulated CoRA job of --sizes-limit MMLU questions and its report, from fresh processes on a new store:
    the bytes of the report folder and of its disagreements table, the store's bytes per run, and how many copies
    of the job's artifacts and of the report lie on disk."""
    from src.tracking import store  # local: loads mlflow (slow import), only when this part runs

    root = Path(args.sizes_dir or tempfile.mkdtemp(prefix="report-size-")).resolve()
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"perf: --sizes-dir {root} is not empty; give a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    job, compare = sizes_commands(root, args.sizes_limit)
    print(f"report_size: one CoRA job of {args.sizes_limit} MMLU questions into {root}", flush=True)
    store.open_store(f"sqlite:///{root}/mlflow.db")
    db_empty = (root / "mlflow.db").stat().st_size
    fresh_process(meter, "report_size_job", job)
    db_after_job = (root / "mlflow.db").stat().st_size
    fresh_process(meter, "report_size_compare", compare)
    figures = measure(root, db_empty, db_after_job)
    for key, value in figures.items():
        print(f"  {key:38s} {value:10.4g}", flush=True)
    ratios.update(figures)
