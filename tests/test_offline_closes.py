"""A close that could not reach its store (`tracking.on_outage=offline`) is noted, and the next sync gives the run
exactly what was noted: its status, its tags and the time it ended, found by id or, when the id never came back,
by the job's config hash and the time it started (src/tracking/offline.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time

import pytest

from src.common import owners
from src.tracking import offline, store


@pytest.fixture
def client_and_uri(tmp_path, empty_mlflow_db):
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    return MlflowClient(tracking_uri=uri), uri


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def noted(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / offline.PENDING_FILE).read_text().splitlines()]


def test_a_close_is_noted_in_a_folder_not_made_yet_and_a_second_one_beside_it(tmp_path):
    folder = tmp_path / "offline" / "nested"  # neither exists yet
    before = time.time() * 1000
    offline.note_pending_close(folder, "sqlite:///a.db", "run1", "FAILED", error="tracking server outage")
    offline.note_pending_close(folder, "sqlite:///a.db", None, "KILLED", search={"experiment_id": "3", "since": 5})
    after = time.time() * 1000
    first, second = noted(folder)
    assert first == {
        "uri": "sqlite:///a.db",
        "run_id": "run1",
        "status": "FAILED",
        "tags": {"error": "tracking server outage"},
        "search": {},
        "end_time": first["end_time"],
    }
    assert second["search"] == {"experiment_id": "3", "since": 5} and second["tags"] == {}
    # the end time in milliseconds since the epoch, as MLflow keeps it (1 ms of slack: it is truncated)
    assert before - 1 <= first["end_time"] <= second["end_time"] <= after


@pytest.mark.promise("docs/tracking.md", "runs an outage left RUNNING on the server get their final status")
def test_a_noted_close_gives_the_run_its_status_tags_and_noted_end_time(tmp_path, client_and_uri):
    client, uri = client_and_uri
    run = client.create_run(client.create_experiment("closes"))
    finished = client.create_run(client.create_experiment("done"))
    client.set_terminated(finished.info.run_id, "FINISHED")
    folder = tmp_path / "offline"
    offline.note_pending_close(folder, uri, run.info.run_id, "FAILED", error="tracking server outage")
    offline.note_pending_close(folder, uri, finished.info.run_id, "KILLED", error="late")
    end_time = noted(folder)[0]["end_time"]
    assert offline.apply_pending_closes(folder) == 1  # the finished run is not open: nothing to close
    closed = client.get_run(run.info.run_id)
    assert closed.info.status == "FAILED" and closed.info.end_time == end_time
    assert closed.data.tags["error"] == "tracking server outage"
    untouched = client.get_run(finished.info.run_id)
    assert untouched.info.status == "FINISHED" and "error" not in untouched.data.tags
    assert (folder / offline.PENDING_FILE).read_text() == ""


def test_a_close_whose_run_id_never_came_back_closes_the_jobs_open_run_started_in_its_window(tmp_path, client_and_uri):
    """`run_id=None`: the run is the one of this experiment and config hash, still RUNNING, that started at or
    after `since` and not after the close was noted; no other run is touched."""
    client, uri = client_and_uri
    exp = client.create_experiment("lost ids")
    other_exp = client.create_experiment("elsewhere")
    since = 1_000_000
    folder = tmp_path / "offline"
    offline.note_pending_close(
        folder, uri, None, "FAILED", search={"experiment_id": exp, "config_hash": "h1", "since": since}, note="x"
    )
    end_time = noted(folder)[0]["end_time"]

    def run(start_time: int, config_hash: str = "h1", experiment: str = exp) -> str:
        return client.create_run(experiment, start_time=start_time, tags={"config_hash": config_hash}).info.run_id

    lost = [run(since), run(end_time)]  # both ends of the window belong to it
    others = [
        run(since - 1),  # started before the job did
        run(end_time + 1),  # started after the close was noted
        run(since + 5, config_hash="h2"),  # another job's
        run(since + 5, experiment=other_exp),  # another experiment's
    ]
    assert offline.apply_pending_closes(folder) == 2
    for run_id in lost:
        closed = client.get_run(run_id)
        assert closed.info.status == "FAILED" and closed.info.end_time == end_time and closed.data.tags["note"] == "x"
    assert [client.get_run(r).info.status for r in others] == ["RUNNING"] * 4


def test_closes_for_another_store_or_a_store_that_is_down_stay_noted(tmp_path, client_and_uri, monkeypatch):
    client, uri = client_and_uri
    asked, check = [], store.check_tracking
    monkeypatch.setattr(store, "check_tracking", lambda u: (asked.append(u), check(u))[1])
    run = client.create_run(client.create_experiment("kept"))
    folder = tmp_path / "offline"
    down = f"http://127.0.0.1:{free_port()}"  # no server listens there
    offline.note_pending_close(folder, down, "r-down", "FAILED")
    offline.note_pending_close(folder, down, "r-down-2", "FAILED")  # its server not asked again
    offline.note_pending_close(folder, uri, run.info.run_id, "FAILED")
    assert offline.apply_pending_closes(folder, uri=down) == 0  # only the down store's close asked: still noted
    assert [e["run_id"] for e in noted(folder)] == ["r-down", "r-down-2", run.info.run_id]
    assert client.get_run(run.info.run_id).info.status == "RUNNING"
    assert offline.apply_pending_closes(folder) == 1
    assert asked == [down, down, uri]  # once per apply for the store that is down, not once per close
    assert [e["run_id"] for e in noted(folder)] == ["r-down", "r-down-2"]
    assert client.get_run(run.info.run_id).info.status == "FAILED"


def test_nothing_noted_closes_nothing(tmp_path):
    assert offline.apply_pending_closes(tmp_path / "never made") == 0
    (tmp_path / offline.PENDING_FILE).write_text("")
    assert offline.apply_pending_closes(tmp_path) == 0


@pytest.mark.promise("docs/tracking.md", "a killed sync's claim is taken over by the next")
def test_closes_this_process_took_and_did_not_finish_are_applied_and_a_live_syncs_are_left_to_it(
    tmp_path, client_and_uri
):
    """A claim file of this process (an apply that raised part-way) is applied by its next apply; a claim of a
    process still alive is that process's to apply, not taken."""
    client, uri = client_and_uri
    exp = client.create_experiment("claims")
    mine, theirs = (client.create_run(exp).info.run_id for _ in range(2))
    folder = tmp_path / "offline"
    offline.note_pending_close(folder, uri, mine, "KILLED")
    (folder / offline.PENDING_FILE).rename(folder / offline.CLAIMED.format(owner=owners.this_owner()))
    offline.note_pending_close(folder, uri, theirs, "KILLED")
    live = folder / offline.CLAIMED.format(owner=f"{owners.host()}:{os.getppid()}")  # the parent: alive
    (folder / offline.PENDING_FILE).rename(live)
    assert offline.apply_pending_closes(folder) == 1
    assert client.get_run(mine).info.status == "KILLED" and client.get_run(theirs).info.status == "RUNNING"
    assert live.is_file() and not (folder / offline.CLAIMED.format(owner=owners.this_owner())).exists()


def test_a_scheduled_run_is_open_and_is_closed(tmp_path, client_and_uri):
    client, uri = client_and_uri
    run_id = client.create_run(client.create_experiment("scheduled")).info.run_id
    client.update_run(run_id, status="SCHEDULED")
    folder = tmp_path / "offline"
    offline.note_pending_close(folder, uri, run_id, "KILLED")
    assert offline.apply_pending_closes(folder) == 1
    assert client.get_run(run_id).info.status == "KILLED"


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_dead_syncs_claim_this_processs_claim_and_the_pending_file_are_all_applied(tmp_path, client_and_uri):
    client, uri = client_and_uri
    exp = client.create_experiment("three sources")
    runs = [client.create_run(exp).info.run_id for _ in range(3)]
    folder = tmp_path / "offline"
    claims = [
        folder / offline.CLAIMED.format(owner=f"{owners.host()}:{dead_pid()}"),  # a killed sync's
        folder / offline.CLAIMED.format(owner=owners.this_owner()),  # this process's, from an apply that raised
    ]
    for run_id, claim in zip(runs, claims, strict=False):
        offline.note_pending_close(folder, uri, run_id, "FAILED")
        (folder / offline.PENDING_FILE).rename(claim)
    offline.note_pending_close(folder, uri, runs[2], "FAILED")
    assert offline.apply_pending_closes(folder) == 3
    assert [client.get_run(r).info.status for r in runs] == ["FAILED"] * 3
    assert sorted(p.name for p in folder.iterdir() if p.name != offline.LOCK_FILE) == [offline.PENDING_FILE]


def test_a_store_that_stops_answering_mid_sync_keeps_its_closes_and_a_run_that_is_gone_is_dropped(
    tmp_path, client_and_uri, monkeypatch
):
    """check_tracking answered, then the server failed (an outage): that close and the next ones of the same store
    stay noted, that store not asked again; a run the store no longer has is nothing left to close."""
    import requests
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client, uri = client_and_uri
    exp = client.create_experiment("mid-sync")
    first, second = (client.create_run(exp).info.run_id for _ in range(2))
    folder = tmp_path / "offline"
    offline.note_pending_close(folder, uri, "gone", "FAILED")
    offline.note_pending_close(folder, uri, first, "FAILED")
    offline.note_pending_close(folder, uri, second, "FAILED")
    asked, get_run = [], MlflowClient.get_run

    def flaky(self, run_id):
        asked.append(run_id)
        if run_id == "gone":
            raise MlflowException("Run 'gone' not found")
        if run_id == first:
            raise requests.exceptions.ConnectionError("connection reset by peer")
        return get_run(self, run_id)

    monkeypatch.setattr(MlflowClient, "get_run", flaky)
    assert offline.apply_pending_closes(folder) == 0
    assert asked == ["gone", first]
    assert [e["run_id"] for e in noted(folder)] == [first, second]
    monkeypatch.setattr(MlflowClient, "get_run", get_run)
    assert offline.apply_pending_closes(folder) == 2
    assert [client.get_run(r).info.status for r in (first, second)] == ["FAILED"] * 2
