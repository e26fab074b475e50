"""The tracking store and the response cache under faults: a sync past MLflow's page of 1,000 runs,
closes noted while a sync applies them, a store of another schema, a cache left open, and a job killed while it
makes a new store."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from src.common.errors import UserError
from src.tracking import offline, store

from .conftest import DATA_DIR, REPO, mlflow_runs


def copy_runs(db: Path, run_id: str, copies: int) -> None:
    """`copies` more runs in the SQLite store `db` made as `run_id` was (its row and its tags, each under a new
    id and a later start time): thousands of runs in a second, where MLflow's client makes ~50 a second here."""
    with sqlite3.connect(db) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
        tag_columns = [row[1] for row in conn.execute("PRAGMA table_info(tags)")]
        run = dict(zip(columns, conn.execute("SELECT * FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()))
        tags = [dict(zip(tag_columns, t)) for t in conn.execute("SELECT * FROM tags WHERE run_uuid = ?", (run_id,))]
        for i in range(copies):
            new = uuid.uuid4().hex
            row = {
                **run,
                "run_uuid": new,
                "start_time": run["start_time"] + i + 1,
                "artifact_uri": run["artifact_uri"].replace(run_id, new),
            }
            conn.execute(
                f"INSERT INTO runs ({','.join(columns)}) VALUES ({','.join('?' * len(columns))})",
                [row[c] for c in columns],
            )
            conn.executemany(
                f"INSERT INTO tags ({','.join(tag_columns)}) VALUES ({','.join('?' * len(tag_columns))})",
                [[{**t, "run_uuid": new}[c] for c in tag_columns] for t in tags],
            )


@pytest.mark.slow
def test_sync_of_1200_offline_runs_uploads_1200(tmp_path, empty_mlflow_db, monkeypatch):
    """MLflow's search_runs returns a page (1,000 runs by default); sync pages until the last."""
    from mlflow.tracking import MlflowClient

    from src import sync

    folder = tmp_path / "offline"
    folder.mkdir()
    shutil.copyfile(empty_mlflow_db, folder / "mlflow.db")
    client = MlflowClient(tracking_uri=f"sqlite:///{folder}/mlflow.db")
    exp = client.create_experiment("offline-study")
    first = client.create_run(exp, tags={"kind": "job", "offline_target": "sqlite:///elsewhere.db"})
    client.set_terminated(first.info.run_id, "FINISHED")
    copy_runs(folder / "mlflow.db", first.info.run_id, 1199)
    uploaded = []

    def upload(source, run, experiment, target_uri, new_ids):  # the copy itself is tested in test_reliability.py
        uploaded.append(run.info.run_id)
        return f"uploaded-{len(uploaded)}"

    monkeypatch.setattr(sync, "_upload", upload)
    copied = sync.sync(folder)
    assert len(copied) == 1200 and len(set(uploaded)) == 1200
    assert sync.sync(folder) == []  # each marked synced: none twice


def test_search_all_pages_past_a_page(tmp_path, empty_mlflow_db, monkeypatch):
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.create_experiment("paged")
    first = client.create_run(exp, tags={"kind": "job"})
    copy_runs(tmp_path / "mlflow.db", first.info.run_id, 24)
    sweep = client.create_run(exp, tags={"kind": "sweep"}).info.run_id  # not a job: filtered out
    monkeypatch.setattr(store, "PAGE_SIZE", 10)  # 25 job runs: three pages
    pages = []
    search = client.search_runs

    def paged(*args, **kwargs):
        found = search(*args, **kwargs)
        pages.append(len(found))
        return found

    monkeypatch.setattr(client, "search_runs", paged)
    found = store.search_all(client, [exp], "tags.kind = 'job'", order_by=["attributes.start_time ASC"])
    assert len({r.info.run_id for r in found}) == 25 and found[0].info.run_id == first.info.run_id
    assert sweep not in {r.info.run_id for r in found} and pages == [10, 10, 5]  # a page at most per call
    assert len({r.info.run_id for r in store.search_all(client, [exp])}) == 26  # no filter: every run


def note_closes(folder: str, uri: str, run_ids: list[str]) -> None:
    for run_id in run_ids:
        offline.note_pending_close(folder, uri, run_id, "FINISHED")
        time.sleep(0.005)


def test_closes_noted_while_a_sync_applies_others_are_none_lost(tmp_path, empty_mlflow_db, monkeypatch):
    """Three processes note closes while this one applies them (each close slowed, so that notes land while the
    server is asked): every run ends closed, none left RUNNING."""
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("closes")
    first = client.create_run(exp, tags={"kind": "job"})
    copy_runs(tmp_path / "mlflow.db", first.info.run_id, 59)
    run_ids = [r.info.run_id for r in client.search_runs([exp])]  # 60: one page
    folder = str(tmp_path / "offline")
    checked = store.check_tracking
    monkeypatch.setattr(store, "check_tracking", lambda u: (time.sleep(0.01), checked(u)))
    fork = multiprocessing.get_context("fork")
    writers = [fork.Process(target=note_closes, args=(folder, uri, run_ids[k::3])) for k in range(3)]
    for w in writers:
        w.start()
    while any(w.is_alive() for w in writers):
        offline.apply_pending_closes(folder)
    for w in writers:
        w.join()
        assert w.exitcode == 0
    offline.apply_pending_closes(folder)
    left = [r.info.run_id for r in client.search_runs([exp], "attributes.status = 'RUNNING'")]
    assert left == []
    assert (Path(folder) / offline.PENDING_FILE).read_text() == "" and not list(Path(folder).glob("*.claimed.*"))


def test_a_sync_killed_while_applying_closes_leaves_them_for_the_next(tmp_path, empty_mlflow_db):
    """The closes a sync took are in its claim file; once its process is gone the next sync applies them."""
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    run = client.create_run(client.create_experiment("claims"))
    folder = tmp_path / "offline"
    offline.note_pending_close(folder, uri, run.info.run_id, "KILLED")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    from src.common import owners

    orphan = folder / offline.CLAIMED.format(owner=f"{owners.host()}:{int(dead.stdout)}")
    (folder / offline.PENDING_FILE).rename(orphan)  # as a sync killed after taking them leaves them
    assert offline.apply_pending_closes(folder) == 1
    assert client.get_run(run.info.run_id).info.status == "KILLED" and not orphan.exists()


def test_a_store_missing_a_table_is_reported_at_once_not_retried(tmp_path, empty_mlflow_db):
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    with sqlite3.connect(tmp_path / "mlflow.db") as conn:
        conn.execute("DROP TABLE experiment_tags")  # a store of another schema
    start = time.monotonic()
    with pytest.raises(Exception, match="no such table"):
        store.with_retries(lambda: MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db").search_experiments())
    assert time.monotonic() - start < 3  # was ~30 s of retries, as if another process were making the store


def test_a_store_of_an_older_mlflow_is_refused_in_one_line(tmp_path, empty_mlflow_db, monkeypatch):
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    with sqlite3.connect(tmp_path / "mlflow.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '451aebb31d03'")  # MLflow's first schema
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    db = tmp_path / "mlflow.db"
    before = db.read_bytes()
    with pytest.raises(Exception, match="out-of-date database schema") as mlflows:  # MLflow's own refusal
        MlflowClient(tracking_uri=uri).search_experiments()
    assert len(" ".join(str(mlflows.value).split())) > 200  # so the line shows it cut
    monkeypatch.setattr(store, "_OPENED", set())
    with pytest.raises(UserError) as err:
        store.open_store(uri)
    assert str(err.value) == (
        f"config key tracking.uri: the store {db} was made by an older MLflow ({store.short(mlflows.value, 200)}); "
        f"copy it (cp {db} {db}.bak), then run mlflow db upgrade {uri}, or point tracking.uri at a new store"
    )
    assert db.read_bytes() == before  # left as it was


def test_the_response_cache_a_job_opens_is_closed_however_the_job_ends(run_job_in, monkeypatch):
    from src.answering.cache import ResponseCache
    from src.job import runner

    opened: list[ResponseCache] = []

    class Watched(ResponseCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            opened.append(self)

    def closed(cache: ResponseCache) -> bool:
        try:
            cache.conn.execute("SELECT 1")
        except sqlite3.ProgrammingError:
            return True
        return False

    monkeypatch.setattr(runner, "open_cache", lambda path, shared: Watched(path))
    run_job_in("model=simulated", "limit=3")
    assert len(opened) == 1 and closed(opened[0])

    import src.metrics

    def broken(*args, **kwargs):
        raise RuntimeError("a metric failed")

    monkeypatch.setattr(src.metrics, "compute_metrics", broken)
    with pytest.raises(RuntimeError):
        run_job_in("model=simulated", "limit=4")
    assert len(opened) == 2 and closed(opened[1])


# -- a job killed while it makes a new store ---------------------------------------------------------------------


def job_command(db: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "src.run",
        "model=simulated",
        "limit=3",
        f"tracking.uri=sqlite:///{db}",
        f"cache.path={db.parent}/cache.db",
        f"hydra.run.dir={out}",
    ]


def wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the job never got there"
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "during", "after"])
def test_a_job_killed_while_it_makes_a_new_store_leaves_one_the_same_command_finishes_with(tmp_path, when):
    """SIGKILL before MLflow's migrations start, half way through them, and once the store is in place: the same
    command again exits 0 with one FINISHED run and no run left RUNNING."""
    db = tmp_path / "store" / "mlflow.db"
    env = {**os.environ, "TQDM_DISABLE": "1", "MCQ_DATA_DIR": str(DATA_DIR)}
    proc = subprocess.Popen(
        job_command(db, tmp_path / "killed"),
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    partial = lambda: list(db.parent.glob(".mlflow.db.tmp-*")) if db.parent.is_dir() else []  # noqa: E731

    def size(path):  # SQLite removes its journal file (`...-journal`) between the glob and the stat
        try:
            return path.stat().st_size
        except FileNotFoundError:
            return 0

    try:
        if when == "before":
            wait_for(lambda: db.parent.is_dir())  # the store's folder made: the migrations are next
        elif when == "during":
            made = lambda: partial() or [db] if db.is_file() else partial()  # noqa: E731 - the store being made
            wait_for(lambda: any(size(p) > 0 for p in made()))
            time.sleep(0.3)  # inside MLflow's migrations ("Updating database tables")
        else:
            wait_for(db.is_file)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    again = subprocess.run(job_command(db, tmp_path / "again"), cwd=REPO, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    _, runs = mlflow_runs(f"sqlite:///{db}")
    assert [r.info.status for r in runs if r.info.status == "FINISHED"] == ["FINISHED"]
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert partial() == []  # the killed creation's temporary store removed
