"""What the comparison reads from the store and the one run it writes there (src/tracking/reads.py), on a real
SQLite store: the experiments asked for, every run a filter selects, a run's tags, experiment and parquet artifact,
and the comparison's own run with its name, tags, params, artifacts and status."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from src.tracking import names, reads, store


@pytest.fixture
def uri(tmp_path, empty_mlflow_db) -> str:
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path}/mlflow.db"


def client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def experiment(uri: str, name: str) -> str:
    """An experiment whose artifacts are kept beside the store, as the tool makes them."""
    return store.experiment_id(store.client(uri), name, uri)


def artifacts_of(uri: str, run_id: str) -> Path:
    from mlflow.utils.file_utils import local_file_uri_to_path

    return Path(local_file_uri_to_path(client(uri).get_run(run_id).info.artifact_uri))


def test_experiments_are_the_one_named_or_every_one(uri):
    first, second = (client(uri).create_experiment(name) for name in ("study a", "study b"))
    assert reads.experiments(uri, "study b") == {second: "study b"}
    assert reads.experiments(uri, "no such study") is None
    assert {first: "study a", second: "study b"}.items() <= reads.experiments(uri).items()


def test_runs_in_are_every_run_of_the_experiments_or_those_the_filter_selects(uri):
    c = client(uri)
    exp, other = c.create_experiment("runs"), c.create_experiment("other")
    jobs = [c.create_run(exp, tags={"kind": "job"}).info.run_id for _ in range(2)]
    comparison = c.create_run(exp, tags={"kind": "comparison"}).info.run_id
    c.create_run(other, tags={"kind": "job"})
    assert {r.info.run_id for r in reads.runs_in(uri, [exp])} == {*jobs, comparison}
    assert {r.info.run_id for r in reads.runs_in(uri, [exp], "tags.kind = 'job'")} == set(jobs)


def test_a_runs_tags_experiment_and_parquet_artifact_are_read_back(uri, tmp_path, monkeypatch):
    c = client(uri)
    exp = c.create_experiment("artifacts")
    run_id = c.create_run(exp, tags={"model": "m1"}).info.run_id
    frame = pd.DataFrame({"question_id": ["q1", "q2"], "correct": [True, False]})
    frame.to_parquet(tmp_path / "prompts.parquet")
    c.log_artifact(run_id, str(tmp_path / "prompts.parquet"))
    assert reads.run_tags(uri, run_id)["model"] == "m1"
    assert reads.run_experiment_id(uri, run_id) == exp
    downloads = tmp_path / "temp"  # the download goes to a temporary folder that is removed after
    downloads.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(downloads))
    pd.testing.assert_frame_equal(reads.parquet_artifact(uri, run_id, "prompts.parquet"), frame)
    assert reads.parquet_artifact(uri, run_id, "missing.parquet") is None
    assert list(downloads.iterdir()) == []


def test_the_comparisons_run_has_its_name_tags_params_cut_at_the_limit_and_the_folders_files(uri, tmp_path):
    c = client(uri)
    exp = experiment(uri, "comparisons")
    folder = tmp_path / "report"
    (folder / "tables").mkdir(parents=True)
    (folder / "tables" / "summary.csv").write_text("model,accuracy\nm1,0.5\n")
    params = {"models": "m1,m2", "long": "x" * (names.PARAM_LIMIT + 50), "none": None}
    run_id = reads.log_folder_run(
        folder,
        tracking_uri=uri,
        experiment_id=exp,
        name="comparison of m1, m2",
        tags={"kind": "comparison"},
        params=params,
    )
    run = c.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "comparison of m1, m2"
    assert run.data.tags["kind"] == "comparison"
    assert run.data.params == {"models": "m1,m2", "long": "x" * names.PARAM_LIMIT, "none": "null"}
    assert (artifacts_of(uri, run_id) / "tables" / "summary.csv").read_text() == "model,accuracy\nm1,0.5\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".snapshot-")] == []  # the snapshot removed


def test_the_comparisons_artifacts_are_logged_from_a_hidden_snapshot_beside_the_report(uri, tmp_path, monkeypatch):
    """Beside the report, so hard links work (one file system); hidden (a dot name) while it exists."""
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "index.md").write_text("# report\n")
    logged = []
    monkeypatch.setattr(store, "log_artifacts", lambda client, run_id, path: logged.append(Path(path)))
    reads.log_folder_run(
        folder, tracking_uri=uri, experiment_id=experiment(uri, "snapshots"), name="c", tags={}, params={}
    )
    [path] = logged
    assert path.name == "report" and path.parent.parent == tmp_path and path.parent.name.startswith(".snapshot-")


def test_the_report_is_copied_where_the_file_system_refuses_a_hard_link(uri, tmp_path, monkeypatch):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "index.md").write_text("# report\n")

    def refuse(source, target):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", refuse)
    run_id = reads.log_folder_run(
        folder, tracking_uri=uri, experiment_id=experiment(uri, "copies"), name="c", tags={}, params={}
    )
    stored = artifacts_of(uri, run_id) / "index.md"
    assert stored.read_text() == "# report\n"
    assert os.stat(stored).st_ino != os.stat(folder / "index.md").st_ino


def test_the_comparisons_run_is_in_the_experiment_asked_for(uri, tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    exp = experiment(uri, "where it goes")
    experiment(uri, "elsewhere")
    run_id = reads.log_folder_run(folder, tracking_uri=uri, experiment_id=exp, name="c", tags={}, params={})
    assert client(uri).get_run(run_id).info.experiment_id == exp


@pytest.mark.parametrize(("raised", "status"), [(OSError("disk full"), "FAILED"), (KeyboardInterrupt(), "KILLED")])
def test_a_comparison_run_whose_logging_fails_is_closed_failed_or_killed_and_the_error_raised(
    uri, tmp_path, monkeypatch, raised, status
):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "index.md").write_text("# report\n")
    exp = experiment(uri, "fails")

    def fail(client, run_id, path):
        raise raised

    monkeypatch.setattr(store, "log_artifacts", fail)
    with pytest.raises(type(raised)):
        reads.log_folder_run(folder, tracking_uri=uri, experiment_id=exp, name="c", tags={}, params={"a": 1})
    [run] = client(uri).search_runs([exp])
    assert run.info.status == status and run.info.end_time is not None
