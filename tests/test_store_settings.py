"""The tracking settings a job and the other commands read before any compute (src/tracking/store.py), on what
the mutation check (docs/mutation.md) found no fast test checking:

- `tracking.offline=true` logs to `tracking.offline_dir`'s SQLite file, `mlruns/offline` where it names none;
- the store check refuses MLflow's file store (a bare path, `file:`) for every command that reads a store, not only
  for the job's config check (compare, plan, recheck, sync read a `--tracking-uri` of their own);
- `tracking.retry_budget_s` holds from 0 to 600 seconds, both included."""

from __future__ import annotations

import pytest

from src.common.errors import UserError
from src.tracking import store


def test_an_offline_job_logs_to_its_offline_dir_or_to_mlruns_offline(tmp_path):
    assert store.job_tracking_uri({"uri": "http://h:5000", "offline": False}) == "http://h:5000"
    offline = {"uri": "http://h:5000", "offline": True}
    assert store.job_tracking_uri({**offline, "offline_dir": str(tmp_path)}) == f"sqlite:///{tmp_path}/mlflow.db"
    assert store.job_tracking_uri({**offline, "offline_dir": None}) == "sqlite:///mlruns/offline/mlflow.db"
    assert store.job_tracking_uri(offline) == "sqlite:///mlruns/offline/mlflow.db"


@pytest.mark.parametrize("uri", ["mlruns", "./runs/here", "file:///tmp/mlruns", "file:mlruns"])
def test_the_store_check_refuses_a_file_store_in_one_line(uri):
    with pytest.raises(UserError) as err:
        store.check_tracking(uri)
    said = str(err.value)
    assert said.startswith("config key tracking.uri: ") and "is a file store" in said and "\n" not in said


def test_the_store_check_leaves_a_database_uri_to_mlflow(tmp_path):
    """A database URI (postgresql://, mysql://) is no file store: nothing to create or probe before the job."""
    assert store.check_tracking("postgresql://user@db.example:5432/mlflow") is None
    assert store.check_tracking(f"sqlite:///{tmp_path}/new/mlflow.db") is None
    assert (tmp_path / "new").is_dir()  # a SQLite store's folder is made


@pytest.mark.parametrize("budget", [0, 0.0, 20, 599.5, 600, "600"])
def test_a_retry_budget_from_0_to_600_seconds_is_accepted(budget):
    store.check_options({"on_outage": "fail", "retry_budget_s": budget})


@pytest.mark.parametrize("budget", [-0.5, 600.5, 601, None])
def test_a_retry_budget_outside_0_to_600_seconds_is_one_line(budget):
    with pytest.raises(UserError) as err:
        store.check_options({"on_outage": "offline", "retry_budget_s": budget})
    assert str(err.value) == f"config key tracking.retry_budget_s: {budget} must be between 0 and 600 seconds"


def test_a_killed_store_creations_sqlite_files_are_removed_and_a_live_ones_kept(tmp_path, monkeypatch, empty_mlflow_db):
    """Before a store is made, SQLite's side files (`-journal`, `-wal`, `-shm`) of a temporary store whose creator
    died (this host, its pid gone) are removed; a living creator's, and files that are not SQLite's, are kept.
    MLflow's migrations are stood in for by a client that makes the file: seconds each (the store is a copy of the
    session's template, `empty_mlflow_db`, made before)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import mlflow.tracking

    from src.common import owners

    class MadeStore:
        def __init__(self, tracking_uri):
            self.path = Path(tracking_uri.removeprefix("sqlite:///"))

        def search_experiments(self, max_results):
            self.path.write_bytes(b"SQLite format 3\x00")

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = f".mlflow.db.tmp-{owners.host()}-{int(dead.stdout)}-0a1b2c3d"
    living = f".mlflow.db.tmp-{owners.host()}-{os.getpid()}-4e5f6a7b"
    kept = [f"{living}-journal", f"{killed}-notes"]
    for name in [f"{killed}-journal", f"{killed}-wal", f"{killed}-shm", *kept]:
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setattr(mlflow.tracking, "MlflowClient", MadeStore)
    store._create_sqlite_store(tmp_path / "mlflow.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "mlflow.db"])


def test_mlflows_retries_of_one_call_end_within_the_retry_budget():
    """urllib3 waits 0 s before the first retry, then 2, 4, 8 ... s (backoff factor 1), each but the first with up
    to 1 s of jitter: the retries allowed are the most whose waits fit in `tracking.retry_budget_s` (at most 10)."""

    def worst_wait(retries: int) -> int:
        return sum(2 ** (k - 1) + 1 for k in range(2, retries + 1))

    for tenths in range(0, 6001):
        budget = tenths / 10
        retries, timeout = store.client_retries(budget)
        assert worst_wait(retries) <= budget, budget  # the first retry, at once, fits any budget
        assert retries == 10 or worst_wait(retries + 1) > budget, budget
        assert timeout >= 5


def test_a_store_in_a_folder_that_exists_is_checked_without_complaint(tmp_path):
    """The SQLite store's folder is made when missing and taken as it is when it exists (a mutant:
    `check_tracking`'s `exist_ok`): a second job, or a folder the user made, is no error."""
    (tmp_path / "runs").mkdir()
    store.check_tracking(f"sqlite:///{tmp_path}/runs/mlflow.db")
    store.check_tracking(f"sqlite:///{tmp_path}/new/runs/mlflow.db")  # its parents made too
    assert (tmp_path / "new" / "runs").is_dir()


def test_a_sqlite_uri_with_tilde_or_a_variable_is_the_path_the_shell_means(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))
    assert store.local_uri("sqlite:///~/m/mlflow.db") == f"sqlite:///{tmp_path}/home/m/mlflow.db"
    assert store.local_uri("sqlite:///$RUNS/mlflow.db") == f"sqlite:///{tmp_path}/runs/mlflow.db"
    assert store.local_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


def test_a_store_folder_that_cannot_be_made_is_one_line_naming_it(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(UserError) as caught:
        store.check_tracking(f"sqlite:///{tmp_path}/file/sub/mlflow.db")
    assert str(caught.value) == (
        f"config key tracking.uri: cannot create {tmp_path}/file/sub (Not a directory); "
        "point tracking.uri at a writable sqlite:/// path"
    )


class HealthServer:
    """A server on 127.0.0.1 that answers `GET /health` (MLflow's) with 200 and anything else with 404, the paths
    asked recorded; `silent=True`: it accepts connections and never answers."""

    def __init__(self, silent: bool = False):
        import http.server
        import socket
        import threading

        self.paths: list[str] = []
        paths = self.paths
        if silent:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(8)
            self.port = self.sock.getsockname()[1]
            self.server = None
            return

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                asked = self.requestline.split()[1]  # as sent: http.server's own `path` folds a leading "//"
                paths.append(asked)
                self.send_response(200 if asked == "/health" else 404)
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        else:
            self.sock.close()


@pytest.mark.parametrize("given", ["http://127.0.0.1:{port}", "http://127.0.0.1:{port}/"])
def test_a_servers_health_is_asked_at_its_own_health_path_with_or_without_a_trailing_slash(given):
    server = HealthServer()
    try:
        store.check_tracking(given.format(port=server.port))
    finally:
        server.close()
    assert server.paths == ["/health"]


def test_a_server_that_does_not_answer_its_health_check_is_down_after_health_timeout_s(monkeypatch):
    import time

    server = HealthServer(silent=True)
    monkeypatch.setattr(store, "HEALTH_TIMEOUT_S", 0.3)
    started = time.monotonic()
    try:
        with pytest.raises(
            UserError, match=r"^config key tracking.uri: MLflow server http://127.0.0.1:\d+ is unreachable"
        ):
            store.check_tracking(f"http://127.0.0.1:{server.port}")
    finally:
        server.close()
    assert time.monotonic() - started < 5  # the timeout, not the socket's default (none)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_server_that_refuses_connections_is_one_line_saying_what_to_do(scheme):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UserError) as caught:
        store.check_tracking(f"{scheme}://127.0.0.1:{port}")
    line = str(caught.value)
    assert line.startswith(f"config key tracking.uri: MLflow server {scheme}://127.0.0.1:{port} is unreachable (")
    assert line.endswith(f"); start it, set tracking.on_outage=offline or tracking.uri={store.DEFAULT_URI}")


def test_tracking_options_left_out_are_the_schemas_defaults_and_a_wrong_one_is_one_line():
    store.check_options({})  # on_outage=fail, retry_budget_s=20: the schema's defaults, accepted
    store.check_options({"on_outage": "offline", "retry_budget_s": 0})
    with pytest.raises(UserError) as caught:
        store.check_options({"on_outage": "retry"})
    assert str(caught.value) == (
        "config key tracking.on_outage: 'retry' is not a choice; choose fail (stop the job, exit 2) or offline "
        "(log to tracking.offline_dir, upload later with python -m src.sync)"
    )


def test_the_tracking_options_are_the_nodes_values_an_empty_offline_dir_the_default():
    node = {
        "uri": "http://127.0.0.1:5000",
        "experiment": "study",
        "offline": True,
        "offline_dir": "/scratch/offline",
        "on_outage": "offline",
        "retry_budget_s": 7,
    }
    options = store.TrackingOptions.of(node)
    assert options == store.TrackingOptions(
        uri="http://127.0.0.1:5000",
        experiment="study",
        offline=True,
        offline_dir="/scratch/offline",
        on_outage="offline",
        retry_budget_s=7.0,
    )
    assert options.job_uri == "sqlite:////scratch/offline/mlflow.db"
    assert store.TrackingOptions.of({**node, "offline_dir": ""}).offline_dir == "mlruns/offline"
    assert store.TrackingOptions.of({**node, "offline_dir": None}).offline_dir == "mlruns/offline"
