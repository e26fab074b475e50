"""What a run leaves on disk: the report's per-question disagreements as one compressed parquet table that holds every
row the CSV held, the report folder within its size bound at a given number of questions, and a job's artifacts
(and the report) written once, the local store's files hard links to them.

Simulated runs made in-process (`run_job_in`); the size bound scaled from a full MMLU run's to the questions asked.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from devtools.perf import sizes, tables
from src.compare.__main__ import main
from src.compare.load import read_prompts
from src.compare.questions import variant_disagreements
from src.compare.report import clean_floats
from src.tracking import reads, store
from src.tracking.records import read_run_records
from tests.conftest import needs_data

FULL_MMLU = 14042  # MMLU's test split
FULL_REPORT_MB = 10.0  # a full-MMLU CoRA run's report folder, at most (docs/review.md)
FIXED_MB = 0.3  # what does not grow with the questions: report.html and .md with their plots, the small tables


def _cora_run(run_job_in, *overrides: str):
    return run_job_in(
        "model=simulated",
        "model.success_rate=0.6",
        "model.name=simulated_0.6",
        "variants=cora",
        "scoring=generate",
        "stats.bootstrap=0",
        "tracking.experiment=sizes",
        *overrides,
    )


def _report(run_job_in, out: Path, *extra: str) -> Path:
    args = ["--experiment", "sizes", "--tracking-uri", run_job_in.store_uri, "--out", str(out), *extra]
    assert main(args) == 0
    return out


def _as_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """What a CSV of `frame` reads back as: the comparison the former CSV file allows."""
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _store_folder(uri: str, run_id: str) -> Path:
    return Path(store.client(uri).get_run(run_id).info.artifact_uri.removeprefix("file://"))


@pytest.mark.promise(
    "docs/review.md",
    "the per-question disagreements are a parquet table of every row and column the CSV held, the first "
    "questions shown in the report",
)
def test_disagreements_parquet_holds_every_row_and_column_the_csv_held(run_job_in, tmp_path):
    run = _cora_run(run_job_in, "benchmark=synthetic", "limit=8", "model.invalid_rate=0.1")
    out = _report(run_job_in, tmp_path / "report", "--no-mlflow")
    tables = out / "tables"
    assert not list(tables.glob("variant_disagreements_*.csv"))
    (file,) = tables.glob("variant_disagreements_*_simulated_0.6_*.parquet")
    table = pd.read_parquet(file)
    # the rows the report's CSV held: every variant of every question whose variants pick different options
    held = clean_floats(
        variant_disagreements(
            read_run_records(run.run_id, run_job_in.store_uri),
            read_prompts(run.run_id, run_job_in.store_uri),
            model="simulated_0.6",
            run_id=run.run_id,
        )
    )
    assert len(held) > 0 and held["question_id"].nunique() > 2
    pd.testing.assert_frame_equal(_as_csv(table), _as_csv(held))
    md = (out / "report.md").read_text(encoding="utf-8")
    assert f"(`tables/{file.name}`)" in md and f"(tables/{file.name})" in (out / "report.html").read_text()
    shown = list(dict.fromkeys(table["question_id"]))[:2]  # the page's first questions, then "all in the parquet file"
    assert all(f"| {q} |" in md for q in shown) and f"| {list(dict.fromkeys(table['question_id']))[2]} |" not in md


@needs_data
@pytest.mark.promise(
    "docs/review.md", "a CoRA run's report folder stays within 10 MB at a full MMLU's 14,042 questions (scaled)"
)
def test_report_folder_of_a_cora_run_stays_within_its_bound_at_100_questions(run_job_in, tmp_path):
    n = 100
    _cora_run(run_job_in, "benchmark=mmlu", f"limit={n}")
    out = _report(run_job_in, tmp_path / "report", "--no-mlflow")
    folder_mb = sizes.bytes_of([out]) / 1e6
    per_question_mb = (FULL_REPORT_MB - FIXED_MB) / FULL_MMLU
    assert folder_mb <= FIXED_MB + per_question_mb * n, folder_mb
    (table,) = (out / "tables").glob("variant_disagreements_*.parquet")
    assert table.stat().st_size / 1e6 <= per_question_mb * n  # the part that grows with the questions, alone
    assert len(pd.read_parquet(table)) > n  # a question's variants: many rows per question, all of them kept


@pytest.mark.promise(
    "docs/tracking.md", "a job's artifacts are on disk once: the local store's files are hard links to artifacts/'s"
)
def test_job_artifacts_are_written_once_with_a_local_store(run_job_in):
    run = run_job_in("model=simulated", "benchmark=synthetic", "limit=4")
    local = run.out_dir / "artifacts"
    logged = _store_folder(run_job_in.store_uri, run.run_id)
    names = sorted(p.name for p in local.iterdir())
    assert {"records.parquet", "prompts.parquet", "metrics.json", "config.yaml"} <= set(names)
    assert sorted(p.name for p in logged.iterdir()) == names
    assert all(os.path.samefile(local / name, logged / name) for name in names)
    assert json.loads((logged / "metrics.json").read_text()) == json.loads((local / "metrics.json").read_text())


@pytest.mark.promise(
    "docs/tracking.md", "a job run again into the same folder leaves the earlier run's logged artifacts as they were"
)
def test_a_rerun_into_the_same_folder_leaves_the_earlier_runs_artifacts_unchanged(run_job_in):
    from src.config.compose import compose_job
    from src.job.runner import run_job

    args = ["model=simulated", "benchmark=synthetic", "limit=4", "resume=false", f"tracking.uri={run_job_in.store_uri}"]
    first = run_job(compose_job([*args, "model.success_rate=0.9"]), out_dir=run_job_in.tmp / "same")
    logged = _store_folder(run_job_in.store_uri, first.run_id)
    before = _digests(logged)
    second = run_job(compose_job([*args, "model.success_rate=0.2"]), out_dir=run_job_in.tmp / "same")
    assert second.run_id != first.run_id
    assert _digests(logged) == before
    assert _digests(second.out_dir / "artifacts")["records.parquet"] != before["records.parquet"]


@pytest.mark.promise(
    "docs/tracking.md", "where a hard link cannot be made (another file system) the store gets MLflow's own copy"
)
def test_artifacts_are_copied_where_no_hard_link_can_be_made(run_job_in, monkeypatch):
    def no_link(*_):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(store.os, "link", no_link)
    run = run_job_in("model=simulated", "benchmark=synthetic", "limit=4")
    local = run.out_dir / "artifacts"
    logged = _store_folder(run_job_in.store_uri, run.run_id)
    assert _digests(logged) == _digests(local)
    assert not any(os.path.samefile(p, logged / p.name) for p in local.iterdir())


@pytest.mark.promise("docs/review.md", "the comparison run's artifacts are the report folder's files, on disk once")
def test_the_comparison_run_holds_the_report_folder_once(tmp_path, empty_mlflow_db):
    import shutil

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    folder = tmp_path / "report"
    (folder / "tables").mkdir(parents=True)
    (folder / "report.md").write_text("# a report\n")
    pd.DataFrame({"q": ["q1"], "prompt": ["x" * 100]}).to_parquet(folder / "tables" / "t.parquet")
    exp = store.experiment_id(store.client(uri), "sizes", uri)
    run_id = reads.log_folder_run(folder, tracking_uri=uri, experiment_id=exp, name="comparison", tags={}, params={})
    logged = _store_folder(uri, run_id)
    assert _digests(logged) == _digests(folder)
    assert all(os.path.samefile(folder / name, logged / name) for name in _digests(folder))
    assert sizes.disk_bytes_of([folder, logged]) == sizes.bytes_of([folder])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".snapshot-")]  # the snapshot is removed


def _figure(name: str, value: float, unit: str) -> dict:
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "date": "2026-01-01T00:00:00Z",
        "load_average": 1.0,
        "command": "python -m devtools.perf --only report_size",
        "machine": {"cpu": "a CPU", "cpus": 2},
    }


@pytest.mark.promise(
    "docs/speed.md", "the report-size table is made from the latest report_size figures of the results file"
)
def test_sizes_table_is_made_from_the_latest_figures():
    older = [_figure(name, 99.0, "MB") for name, _ in sizes.FIGURES]
    newer = [_figure(name, 1.5, "questions" if name.endswith("questions") else "MB") for name, _ in sizes.FIGURES]
    for figure in newer:
        figure["date"] = "2026-12-02T00:00:00Z"  # after the older ones
    text = tables.page_with(
        f"before\n{tables.BEGIN.format(name='sizes')}\nold\n{tables.END.format(name='sizes')}\nafter",
        "sizes",
        [*older, *newer],
    )
    assert text.startswith("before\n") and text.endswith("\nafter") and "\nold\n" not in text
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]  # under the header
    assert len(rows) == len(sizes.FIGURES) and all("| 99" not in row for row in rows)
    assert rows[0].split(" | ")[1] == "2" and rows[1].split(" | ")[1] == "1.5 MB"
    missing = tables.page_with(
        f"{tables.BEGIN.format(name='sizes')}\n{tables.END.format(name='sizes')}", "sizes", newer[:1]
    )
    assert missing.count("not measured") == len(sizes.FIGURES) - 1  # a figure never measured says so
