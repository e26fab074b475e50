"""A job's MLflow run as `JobTracker` (src/tracking/job_tracker.py) makes, logs and closes it, in-process against a
real SQLite store: the tags every job run carries, FINISHED / FAILED / KILLED by how the job ended, a close the
store refused noted for `python -m src.sync`, the finished run a job reuses, the review view and its legend, the
heartbeat, and the offline fallback of `tracking.on_outage=offline` before and while a job logs."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import time

import mlflow
import pytest
import requests

from src.common import owners
from src.common.errors import UserError
from src.tracking import job_tracker, offline, review, store
from src.tracking.job_tracker import JobTracker


@pytest.fixture
def options(tmp_path, empty_mlflow_db):
    """Options of a job that logs to a new SQLite store in tmp_path/runs (offline store: tmp_path/offline)."""
    (tmp_path / "runs").mkdir()
    shutil.copyfile(empty_mlflow_db, tmp_path / "runs" / "mlflow.db")

    def make(**changed):
        given = {
            "uri": f"sqlite:///{tmp_path}/runs/mlflow.db",
            "experiment": "study",
            "offline": False,
            "offline_dir": str(tmp_path / "offline"),
            "on_outage": "fail",
            "retry_budget_s": 0.0,
            **changed,
        }
        return store.TrackingOptions(**given)

    return make


def dead_server() -> str:
    """The URL of a port where nothing listens (connections refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def pending_closes(tmp_path) -> list[dict]:
    """The closes noted for `python -m src.sync` in the job's offline folder."""
    path = tmp_path / "offline" / offline.PENDING_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def the_run(tracker: JobTracker):
    return tracker.client.get_run(tracker.run_id)


def test_every_job_run_carries_its_hash_kind_owner_heartbeat_and_its_sweep(options):
    tracker = JobTracker(options(), job_hash="h1", sweep={"sweep_id": "s9", "parent_run_id": ""})
    started = int(time.time())
    with tracker.run("m-b-v-T0", {"model": "m"}):
        pass
    tags = the_run(tracker).data.tags
    assert (tags["config_hash"], tags["kind"], tags["owner"], tags["model"]) == ("h1", "job", owners.this_owner(), "m")
    assert started - 1 <= int(tags["heartbeat"]) <= time.time() + 1
    assert tags["sweep_id"] == "s9" and "mlflow.parentRunId" not in tags  # an empty parent id is no parent
    assert tags["mlflow.runName"] == "m-b-v-T0" and "mlflow.source.name" in tags  # MLflow's own context tags
    assert "offline_target" not in tags and not tracker.fell_back
    assert mlflow.get_tracking_uri() == tracker.uri  # MLflow's own calls of this process go to the same store
    alone = JobTracker(options(), job_hash="h2")
    with alone.run("x"):
        pass
    assert not {"sweep_id", "mlflow.parentRunId"} & set(the_run(alone).data.tags)


def test_a_sweeps_job_run_is_a_child_of_the_sweeps_run(options):
    parent = JobTracker(options(), job_hash="p")
    with parent.run("sweep"):
        pass
    child = JobTracker(options(), job_hash="c", sweep={"sweep_id": "s1", "parent_run_id": parent.run_id})
    with child.run("job"):
        pass
    assert the_run(child).data.tags["mlflow.parentRunId"] == parent.run_id


def test_an_offline_run_names_the_server_it_belongs_to_without_its_credentials(options, tmp_path):
    tracker = JobTracker(options(uri="http://alice:s3cret@127.0.0.1:5000", offline=True), job_hash="h")
    assert tracker.offline and tracker.uri == f"sqlite:///{tmp_path}/offline/mlflow.db"
    with tracker.run("job"):
        pass
    target = the_run(tracker).data.tags["offline_target"]
    assert "s3cret" not in target and target.endswith("@127.0.0.1:5000") and target.startswith("http://")


@pytest.mark.parametrize(
    ("ending", "status", "interrupted"),
    [(None, "FINISHED", None), (RuntimeError("boom"), "FAILED", None), (KeyboardInterrupt(), "KILLED", "true")],
)
def test_a_run_ends_finished_failed_or_killed_as_its_job_did(options, ending, status, interrupted):
    tracker = JobTracker(options(), job_hash="h")
    with pytest.raises(type(ending)) if ending is not None else contextlib.nullcontext():
        with tracker.run("job") as run_id:
            assert job_tracker.last_run == {"run_id": run_id, "uri": tracker.uri, "status": "RUNNING"}
            if ending is not None:
                raise ending
    run = the_run(tracker)
    assert run.info.status == status and run.data.tags.get("interrupted") == interrupted
    assert job_tracker.last_run["status"] == status


def test_a_close_the_store_refuses_is_noted_for_sync_and_said_once(options, tmp_path, monkeypatch, capsys):
    tracker = JobTracker(options(), job_hash="h")

    def down(uri):
        raise UserError("config key tracking.uri: MLflow server gone " + "x" * 150)

    with pytest.raises(KeyboardInterrupt), tracker.run("job"):
        monkeypatch.setattr(store, "check_tracking", down)
        raise KeyboardInterrupt
    (pending,) = pending_closes(tmp_path)
    assert (pending["run_id"], pending["status"], pending["tags"]) == (
        tracker.run_id,
        "KILLED",
        {"interrupted": "true"},
    )
    assert pending["uri"] == tracker.uri
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"warning: run {tracker.run_id} could not be marked KILLED "
        f"({store.short(UserError('config key tracking.uri: MLflow server gone ' + 'x' * 150), 100)}); "
        f"python -m src.sync --offline-dir {tmp_path / 'offline'} marks it once the server is back"
    )


def finish(tracker: JobTracker, tags=None) -> str:
    with tracker.run("job", tags) as run_id:
        pass
    return run_id


def test_the_finished_run_reused_is_the_latest_of_the_same_hash_and_identities(options):
    tracker = JobTracker(options(), job_hash="h")
    assert tracker.finished_run() is None
    first = finish(tracker, {"data_identity": "d1"})
    second = finish(tracker, {"data_identity": "d1", "work_hash": "w"})
    finish(JobTracker(options(), job_hash="other"), {"data_identity": "d1"})
    with pytest.raises(RuntimeError), tracker.run("job"):  # a failed run is never reused
        raise RuntimeError("boom")
    assert tracker.finished_run().info.run_id == second
    assert tracker.finished_run({"data_identity": "d1"}).info.run_id == second
    assert tracker.finished_run({"data_identity": "d2"}) is None
    assert tracker.finished_run(work_hash="w").info.run_id == second
    assert tracker.finished_run(work_hash="none") is None
    assert first != second


def test_a_finished_runs_metrics_are_its_metrics_json_else_what_mlflow_holds(options, tmp_path):
    tracker = JobTracker(options(), job_hash="h")
    with tracker.run("job") as run_id:
        folder = tmp_path / "art"
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps({"mcqa": 0.5, "bmca@1.0": 0.25, "rws": "NaN"}))
        tracker.log(params={}, metrics={"mcqa": 0.5, "bmca@1.0": 0.25}, tags={}, artifacts_dir=folder)
    metrics = tracker.finished_metrics(tracker.client.get_run(run_id))
    assert metrics["mcqa"] == 0.5 and metrics["bmca@1.0"] == 0.25 and metrics["rws"] != metrics["rws"]  # NaN kept
    bare = finish(tracker)
    tracker.client.log_metric(bare, "bmca_at_1.0", 0.75)
    assert tracker.finished_metrics(tracker.client.get_run(bare)) == {"bmca@1.0": 0.75}


def test_a_job_logs_params_metrics_tags_dataset_and_files_and_shares_the_review_view(options, tmp_path):
    from src.core.questions import Question

    tracker = JobTracker(options(), job_hash="h")
    folder = tmp_path / "art"
    folder.mkdir()
    (folder / "records.parquet").write_bytes(b"rows")
    dataset = review.questions_dataset([Question(id="q", question="?", options=("a", "b"), answer=0)], name="bench")
    with tracker.run("job") as run_id:
        tracker.log(
            params={"limit": None, "seeds": "[1, 2]", "long": "x" * 7000},
            metrics={"mcqa": 0.5, "mcqa/law": 1.0},
            tags={"model": "m"},
            artifacts_dir=folder,
            dataset=dataset,
        )
    run = tracker.client.get_run(run_id)
    (point,) = tracker.client.get_metric_history(run_id, "mcqa")
    assert point.step == 0 and run.info.start_time <= point.timestamp <= time.time() * 1000  # logged now, in ms
    assert run.data.params["limit"] == "null" and run.data.params["seeds"] == "[1, 2]"
    assert len(run.data.params["long"]) == 6000
    assert run.data.metrics == {"mcqa": 0.5} and run.data.tags["model"] == "m"
    assert {a.path for a in tracker.client.list_artifacts(run_id)} == {"records.parquet", review.SUBJECTS_FILE}
    (asked,) = run.inputs.dataset_inputs
    assert asked.dataset.name == "bench" and [(t.key, t.value) for t in asked.tags] == [("mlflow.data.context", "eval")]
    tags = tracker.client.get_experiment(tracker.exp_id).tags
    state = tags[review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY]
    assert state == review.review_view_state(["mcqa"])
    assert tags[review.LEGEND_TAG] == review.review_legend(state)


def test_the_review_legend_follows_the_view_but_never_replaces_a_description_someone_wrote(options, tmp_path):
    tracker = JobTracker(options(), job_hash="h")
    folder = tmp_path / "art"
    folder.mkdir()
    for metrics in ({"mcqa": 0.5}, {"acc_mean": 0.4, "rws": 0.3}):
        with tracker.run("job"):
            tracker.log(params={}, metrics=metrics, tags={}, artifacts_dir=folder)
    tags = tracker.client.get_experiment(tracker.exp_id).tags
    state = tags[review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY]
    assert state == review.review_view_state(["acc_mean", "rws"], review.review_view_state(["mcqa"]))
    assert tags[review.LEGEND_TAG] == review.review_legend(state)  # the tool's own legend, rewritten
    tracker.client.set_experiment_tag(tracker.exp_id, review.LEGEND_TAG, "Our study of letter habits.")
    with tracker.run("job"):
        tracker.log(params={}, metrics={"cora": 0.2}, tags={}, artifacts_dir=folder)
    assert tracker.client.get_experiment(tracker.exp_id).tags[review.LEGEND_TAG] == "Our study of letter habits."


def test_the_heartbeat_is_refreshed_while_the_job_runs_and_stops_with_it(options, monkeypatch):
    monkeypatch.setattr(job_tracker, "HEARTBEAT_S", 0.05)
    tracker = JobTracker(options(), job_hash="h")
    beats = []
    real_set_tag = tracker.client.set_tag

    def counted(run_id, key, value):
        if key == "heartbeat":
            assert abs(int(value) - time.time()) < 5  # the time of the beat, in seconds
            beats.append(value)
        return real_set_tag(run_id, key, value)

    monkeypatch.setattr(tracker.client, "set_tag", counted)
    with tracker.run("job"):
        deadline = time.monotonic() + 10
        while len(beats) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(beats) >= 2
    ended = len(beats)
    time.sleep(0.3)
    assert len(beats) == ended  # no beat after the run ended


def test_a_beat_the_store_refuses_is_skipped_and_the_next_one_sent(monkeypatch):
    import threading

    monkeypatch.setattr(job_tracker, "HEARTBEAT_S", 0.01)
    stop = threading.Event()
    sent = []

    class Flaky:
        def set_tag(self, run_id, key, value):
            assert abs(int(value) - time.time()) < 5
            sent.append((run_id, key))
            if len(sent) == 1:
                raise requests.exceptions.ConnectionError("reset")
            if len(sent) == 3:
                stop.set()

    JobTracker._beat(Flaky(), "r1", stop)
    assert sent == [("r1", "heartbeat")] * 3


def test_a_dead_server_with_on_outage_offline_logs_offline_and_says_how_to_upload(options, tmp_path, capsys):
    server = dead_server()
    tracker = JobTracker(options(uri=server, on_outage="offline"), job_hash="h")
    assert tracker.offline and tracker.fell_back
    assert capsys.readouterr().err.strip() == (
        f"warning: MLflow server {server} is not answering; this job logs to {tmp_path / 'offline'} "
        f"(tracking.on_outage=offline): run python -m src.sync --offline-dir {tmp_path / 'offline'} once the "
        "server is back"
    )
    finish(tracker)
    assert the_run(tracker).data.tags["offline_target"] == server
    with pytest.raises(UserError, match=r"^config key tracking.uri: MLflow server .* is unreachable"):
        JobTracker(options(uri=server), job_hash="h")  # on_outage=fail: one line, before any compute


class Outage:
    """`client.<method>` failing as a server that stopped answering does."""

    def __init__(self, tracker: JobTracker, method: str, monkeypatch):
        def refused(*args, **kwargs):
            raise requests.exceptions.ConnectionError("Connection refused")

        monkeypatch.setattr(tracker.client, method, refused)


@pytest.mark.parametrize("step", ["log_batch", "log_inputs", "get_experiment", "get_run"])
def test_an_outage_while_logging_with_fail_stops_in_one_line_and_notes_the_run_failed(
    options, tmp_path, monkeypatch, step
):
    """At each step of the logging (params and metrics, the dataset, the review view, the files) the line says
    the run was being logged."""
    from src.core.questions import Question

    tracker = JobTracker(options(), job_hash="h")
    folder = tmp_path / "art"
    folder.mkdir()
    dataset = review.questions_dataset([Question(id="q", question="?", options=("a", "b"), answer=0)], name="b")
    with pytest.raises(store.TrackingDown) as caught, tracker.run("job") as run_id:
        Outage(tracker, step, monkeypatch)
        tracker.log(params={}, metrics={"mcqa": 0.5}, tags={}, artifacts_dir=folder, dataset=dataset)
    assert str(caught.value) == (
        f"config key tracking.uri: MLflow server {tracker.uri} stopped answering while logging run {run_id} "
        "(Connection refused); answers already computed are in the response cache: start the server and run the "
        "same command again, or set tracking.on_outage=offline"
    )
    (pending,) = pending_closes(tmp_path)
    assert (pending["run_id"], pending["status"], pending["uri"]) == (run_id, "FAILED", tracker.uri)
    assert pending["tags"] == {"error": "tracking server outage"}
    assert job_tracker.last_run["status"] == "FAILED"


def test_an_outage_while_logging_with_offline_moves_the_run_offline_and_notes_the_lost_one(
    options, tmp_path, monkeypatch, capsys
):
    tracker = JobTracker(options(on_outage="offline"), job_hash="h")
    folder = tmp_path / "art"
    folder.mkdir()
    from src.core.questions import Question

    dataset = review.questions_dataset([Question(id="q", question="?", options=("a", "b"), answer=0)], name="b")
    first_uri = tracker.uri
    with tracker.run("m-b-v-T0", {"model": "m"}) as lost:
        Outage(tracker, "log_batch", monkeypatch)
        tracker.log(
            params={"limit": 3},
            metrics={"mcqa": 0.5},
            tags={"temperature": "0.0"},
            artifacts_dir=folder,
            dataset=dataset,
        )
    assert tracker.offline and tracker.run_id != lost
    moved = the_run(tracker)
    assert moved.info.status == "FINISHED" and moved.data.params == {"limit": "3"}
    assert moved.info.run_name == "m-b-v-T0" and [i.dataset.name for i in moved.inputs.dataset_inputs] == ["b"]
    assert moved.data.tags["replaces_run_id"] == lost and moved.data.tags["model"] == "m"
    assert moved.data.tags["temperature"] == "0.0" and moved.data.metrics == {"mcqa": 0.5}
    (pending,) = pending_closes(tmp_path)
    assert (pending["run_id"], pending["status"], pending["uri"]) == (lost, "KILLED", first_uri)
    assert pending["tags"] == {"interrupted": "true", "error": "tracking server outage; the job went on offline"}
    assert "is not answering" in capsys.readouterr().err


def test_a_run_the_server_made_without_answering_is_noted_by_its_hash(options, tmp_path, monkeypatch):
    tracker = JobTracker(options(), job_hash="h")
    Outage(tracker, "create_run", monkeypatch)
    before = time.time()
    with pytest.raises(store.TrackingDown, match="stopped answering before the job started"), tracker.run("job"):
        pass
    (pending,) = pending_closes(tmp_path)
    assert (pending["run_id"], pending["status"], pending["tags"]) == (None, "KILLED", {"interrupted": "true"})
    assert pending["uri"] == tracker.uri
    search = pending["search"]
    assert (search["experiment_id"], search["config_hash"]) == (tracker.exp_id, "h")
    assert (before - 61) * 1000 <= search["since"] <= (time.time() - 59) * 1000  # a minute before the attempt


def test_a_run_that_cannot_be_made_with_offline_is_made_offline(options, tmp_path, monkeypatch):
    tracker = JobTracker(options(on_outage="offline"), job_hash="h")
    Outage(tracker, "create_run", monkeypatch)
    with tracker.run("job", {"model": "m"}):
        pass
    assert tracker.offline and the_run(tracker).data.tags["model"] == "m"
    assert the_run(tracker).info.status == "FINISHED"


def test_an_outage_before_the_job_falls_back_offline_or_stops(options, monkeypatch):
    for on_outage in ("offline", "fail"):
        tracker = JobTracker(options(on_outage=on_outage), job_hash="h")
        Outage(tracker, "search_runs", monkeypatch)
        if on_outage == "fail":
            with pytest.raises(store.TrackingDown, match="stopped answering before the job started"):
                tracker.finished_run()
        else:
            assert tracker.finished_run() is None and tracker.offline  # asked again of the offline store


def test_an_error_that_is_no_outage_is_raised_as_it_is(options, monkeypatch):
    tracker = JobTracker(options(on_outage="offline"), job_hash="h")

    def broken(*args, **kwargs):
        raise ValueError("a bug, not an outage")

    monkeypatch.setattr(tracker.client, "search_runs", broken)
    with pytest.raises(ValueError, match="a bug, not an outage"):
        tracker.finished_run()
    assert not tracker.offline


def test_the_artifacts_folder_is_made_empty(tmp_path):
    old = tmp_path / "out" / "artifacts" / "sub"
    old.mkdir(parents=True)
    (old / "records.parquet").write_bytes(b"an earlier run's")
    folder = job_tracker.artifacts_folder(tmp_path / "out")
    assert folder == tmp_path / "out" / "artifacts" and folder.is_dir() and not any(folder.iterdir())
    assert job_tracker.artifacts_folder(tmp_path / "new" / "deeper").is_dir()


def test_a_run_of_this_job_left_running_by_a_dead_process_is_marked_killed(options):
    from .test_dead_runs import dead_owner

    tracker = JobTracker(options(), job_hash="h")
    left = tracker.client.create_run(tracker.exp_id, tags={"config_hash": "h", "owner": dead_owner()}).info.run_id
    other = tracker.client.create_run(tracker.exp_id, tags={"config_hash": "x", "owner": dead_owner()}).info.run_id
    tracker.mark_interrupted()
    assert tracker.client.get_run(left).info.status == "KILLED"
    assert tracker.client.get_run(left).data.tags["interrupted"] == "true"
    assert tracker.client.get_run(other).info.status == "RUNNING"  # another job's
