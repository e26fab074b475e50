"""A tracking server that goes away mid-sweep: the sweep ends fast with one line per failed job and a summary
(`tracking.on_outage=fail`), or finishes into the offline store (`offline`) and `python -m src.sync` uploads it
once the server is back, every trial once; no run is left RUNNING.

One real `mlflow server` for the module (it takes ~20 s to start). The outage is a TCP forwarder in front of it
that the test stops and starts: for the jobs, exactly a server that died (connections reset, then refused) and
came back, without paying a second server start.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from src.tracking.names import SERVER_ENV
from src.tracking.records import read_run_records

from .conftest import DATA_DIR, REPO

pytestmark = pytest.mark.slow  # a server and two sweeps in subprocesses


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Forwarder:
    """127.0.0.1:port -> 127.0.0.1:target, byte for byte; `stop()` resets every connection and refuses new ones."""

    def __init__(self, target: int) -> None:
        self.target, self.port = target, free_port()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.2)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        listener.close()
        for s in self._open:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
                s.close()
            except OSError:
                pass
        self._open.clear()


@pytest.fixture(scope="module")
def server(tmp_path_factory, empty_mlflow_db):
    """A real `mlflow server` on 127.0.0.1 (its SQLite store pre-made), behind a Forwarder."""
    root = tmp_path_factory.mktemp("mlflow-server")
    shutil.copyfile(empty_mlflow_db, root / "mlflow.db")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root}/mlflow.db",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "server.log", "w"),
        start_new_session=True,
        env={**os.environ, **SERVER_ENV},
    )
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"mlflow server did not start:\n{(root / 'server.log').read_text()[-3000:]}")
                time.sleep(0.3)
        forwarder = Forwarder(port)
        forwarder.start()
        forwarder.db = root / "mlflow.db"
        forwarder.uri = f"http://127.0.0.1:{forwarder.port}"
        yield forwarder
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the server and its uvicorn worker, by the group this test started
        proc.wait(timeout=30)


def running_jobs(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute(
                "SELECT COUNT(*) FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid WHERE "
                "r.status = 'RUNNING' AND t.key = 'kind' AND t.value = 'job'"
            ).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_server_killed_mid_sweep(server, tmp_path):
    from mlflow.tracking import MlflowClient

    from src.sync import main as sync

    def sweep(name: str, *extra: str) -> subprocess.Popen:
        # 2 jobs; each asks 8 questions at 0.4 s a question, so the first is computing when the server goes
        cmd = [
            sys.executable,
            "-m",
            "src.run",
            "-m",
            "model=simulated",
            "model.latency_ms=400",
            "limit=8",
            "seed=0,1",
            f"tracking.uri={server.uri}",
            f"tracking.experiment={name}",
            "tracking.retry_budget_s=3",
            f"tracking.offline_dir={tmp_path}/{name}.offline",
            f"cache.path={tmp_path}/{name}-cache.db",
            f"hydra.sweep.dir={tmp_path}/{name}",
            *extra,
        ]
        return subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "MCQ_DATA_DIR": str(DATA_DIR), "TQDM_DISABLE": "1"},
        )

    failing, offline = sweep("outage-fail"), sweep("outage-offline", "tracking.on_outage=offline")
    deadline = time.time() + 180
    while running_jobs(server.db) < 2:  # both sweeps' first job has its run and is computing
        assert time.time() < deadline and failing.poll() is None and offline.poll() is None, (
            failing.poll() is not None and failing.communicate()
        ) or offline.communicate()
        time.sleep(0.2)
    server.stop()
    killed_at = time.time()
    out_fail, err_fail = failing.communicate(timeout=300)
    fail_s = time.time() - killed_at
    out_off, err_off = offline.communicate(timeout=300)
    offline_s = time.time() - killed_at
    server.start()  # the server is back

    # on_outage=fail: over within 2 minutes, one line per failed job, a summary, exit 2, no traceback
    assert fail_s < 120 and "Traceback" not in err_fail, err_fail
    assert failing.returncode == 2, err_fail
    errors = [ln for ln in err_fail.splitlines() if ln.startswith("error: job #")]
    assert len(errors) == 2, err_fail
    assert "stopped answering" in errors[0] and "is unreachable" in errors[1], "\n".join(errors)
    summary = next(ln for ln in err_fail.splitlines() if ln.startswith("sweep "))
    assert ": 2 job(s), 0 finished, 0 skipped, 2 failed; parent run " in summary, err_fail

    # on_outage=offline: the sweep completes and says to sync
    assert offline_s < 180 and "Traceback" not in err_off, err_off
    assert offline.returncode == 0, err_off
    assert ": 2 job(s), 2 finished, 0 skipped, 0 failed" in err_off and "python -m src.sync --offline-dir" in err_off

    # after the restart: sync uploads the offline runs once and closes what the outage left open
    assert sync(["--offline-dir", f"{tmp_path}/outage-offline.offline"]) == 0
    assert sync(["--offline-dir", f"{tmp_path}/outage-fail.offline"]) == 0
    assert sync(["--offline-dir", f"{tmp_path}/outage-offline.offline"]) == 0  # a second sync uploads nothing twice
    client = MlflowClient(tracking_uri=server.uri)
    runs = {
        name: client.search_runs([client.get_experiment_by_name(name).experiment_id])
        for name in ("outage-fail", "outage-offline")
    }
    assert not [(r.info.run_id, r.data.tags) for rs in runs.values() for r in rs if r.info.status == "RUNNING"], (
        err_fail + err_off
    )
    kinds = lambda rs, kind: [r for r in rs if r.data.tags.get("kind") == kind]  # noqa: E731
    (parent,) = kinds(runs["outage-fail"], "sweep")
    assert parent.info.status == "FAILED"
    # the run of the job the outage cut: FAILED while logging, KILLED if its creation's answer was lost
    assert len(kinds(runs["outage-fail"], "job")) == 1

    (parent,) = kinds(runs["outage-offline"], "sweep")
    jobs = kinds(runs["outage-offline"], "job")
    finished = [r for r in jobs if r.info.status == "FINISHED"]
    assert parent.info.status == "FINISHED"
    assert sorted(r.data.params["seed"] for r in finished) == ["0", "1"]  # every job, exactly once
    assert {r.data.tags["mlflow.parentRunId"] for r in finished} == {parent.info.run_id}
    assert {r.info.status for r in jobs if r not in finished} <= {"KILLED"}  # a run the outage cut, replaced
    for run in finished:
        records = read_run_records(run.info.run_id, server.uri)
        assert len(records) == run.data.metrics["n_trials"] == 8
        assert not records.duplicated(["question_id", "variant_id", "repetition"]).any()
