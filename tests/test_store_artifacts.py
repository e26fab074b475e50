"""Where a run's experiment and files go in the store (src/tracking/store.py): an experiment made once and found by
name (also when a parallel job made it first), a SQLite store's artifacts beside its database, a job's files
hard-linked into a local artifact root (one set of bytes), copied by MLflow where linking fails or the root is
remote, and MLflow's HTTP retries bounded through the variables MLflow itself reads."""

from __future__ import annotations

import errno
import os
import shutil
from types import SimpleNamespace

import pytest

from src.tracking import store


@pytest.fixture
def sqlite_store(tmp_path, empty_mlflow_db):
    """(uri, client) of a new SQLite store in tmp_path/runs."""
    (tmp_path / "runs").mkdir()
    shutil.copyfile(empty_mlflow_db, tmp_path / "runs" / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/runs/mlflow.db"
    return uri, store.client(uri)


def test_an_experiment_is_made_once_with_its_artifacts_beside_the_sqlite_database(sqlite_store, tmp_path):
    uri, client = sqlite_store
    made = store.experiment_id(client, "study", uri)
    assert store.experiment_id(client, "study", uri) == made  # found by name, not made again
    assert [e.name for e in client.search_experiments()].count("study") == 1
    expected = (tmp_path / "runs" / "artifacts").resolve().as_uri()
    assert client.get_experiment(made).artifact_location == expected


class FakeTracking:
    """An MLflow client's experiment calls, recorded: `made_by_other` makes create_experiment fail as when a
    parallel job of the sweep created the experiment between the lookup and the creation."""

    def __init__(self, made_by_other: str | None = None):
        self.created: list[tuple[str, str | None]] = []
        self.lookups: list[str] = []
        self.made_by_other = made_by_other

    def get_experiment_by_name(self, name):
        self.lookups.append(name)
        if self.made_by_other is not None and len(self.lookups) > 1:
            return SimpleNamespace(experiment_id=self.made_by_other)
        return None

    def create_experiment(self, name, artifact_location=None):
        self.created.append((name, artifact_location))
        if self.made_by_other is not None:
            raise RuntimeError("UNIQUE constraint failed: experiments.name")
        return "12"


def test_a_server_stores_experiment_gets_the_servers_artifact_root():
    tracking = FakeTracking()
    assert store.experiment_id(tracking, "study", "http://127.0.0.1:5000") == "12"
    assert tracking.created == [("study", None)]  # no local folder named for a server's runs


def test_an_experiment_a_parallel_job_made_first_is_found_by_name():
    tracking = FakeTracking(made_by_other="7")
    assert store.experiment_id(tracking, "study", "http://127.0.0.1:5000") == "7"
    assert tracking.lookups == ["study", "study"]


def test_an_experiment_that_cannot_be_made_and_is_not_there_raises_the_error():
    class Refusing(FakeTracking):
        def create_experiment(self, name, artifact_location=None):
            raise PermissionError("read-only store")

    with pytest.raises(PermissionError, match="read-only store"):
        store.experiment_id(Refusing(), "study", "http://127.0.0.1:5000")


def job_files(folder):
    """A job's output folder: files at its top, in a sub-folder and a deeper one."""
    for name, text in {"a.txt": "a", "sub/b.txt": "b", "sub/c.txt": "c", "sub/deeper/d.txt": "d"}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def artifact_root(client, run_id):
    from mlflow.utils.file_utils import local_file_uri_to_path

    return store.Path(local_file_uri_to_path(client.get_run(run_id).info.artifact_uri))


def test_a_jobs_files_are_hard_linked_into_a_local_artifact_root_replacing_what_was_there(sqlite_store, tmp_path):
    uri, client = sqlite_store
    run_id = client.create_run(store.experiment_id(client, "study", uri)).info.run_id
    folder = tmp_path / "out"
    names = job_files(folder)
    root = artifact_root(client, run_id)
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "b.txt").write_text("an older b")  # logged before: replaced
    store.log_artifacts(client, run_id, folder)
    assert sorted(f.path for f in walk(client, run_id)) == names
    for name in names:
        assert os.path.samefile(folder / name, root / name), name  # one set of bytes under two names
    assert (root / "sub" / "b.txt").read_text() == "b"


def walk(client, run_id, path=None):
    for entry in client.list_artifacts(run_id, path):
        yield from walk(client, run_id, entry.path) if entry.is_dir else [entry]


def test_where_a_link_fails_part_way_the_linked_ones_are_removed_and_mlflow_copies_them_all(
    sqlite_store, tmp_path, monkeypatch
):
    uri, client = sqlite_store
    run_id = client.create_run(store.experiment_id(client, "study", uri)).info.run_id
    folder = tmp_path / "out"
    names = job_files(folder)
    linked = []
    real_link = os.link

    def link_then_cross_device(source, target):
        if linked:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        linked.append(target)
        real_link(source, target)

    monkeypatch.setattr(store.os, "link", link_then_cross_device)
    store.log_artifacts(client, run_id, folder)
    root = artifact_root(client, run_id)
    assert len(linked) == 1
    assert sorted(f.path for f in walk(client, run_id)) == names
    for name in names:  # whole copies, none linked
        assert not os.path.samefile(folder / name, root / name) and (root / name).read_text() == name[-5]


def test_a_remote_artifact_root_gets_mlflows_own_upload_and_nothing_is_written_locally(tmp_path):
    remote = tmp_path / "bucket"
    uploads = []
    client = SimpleNamespace(
        get_run=lambda run_id: SimpleNamespace(info=SimpleNamespace(artifact_uri=f"s3://bucket{remote}")),
        log_artifacts=lambda run_id, folder: uploads.append((run_id, folder)),
    )
    folder = tmp_path / "out"
    job_files(folder)
    store.log_artifacts(client, "r1", folder)
    assert uploads == [("r1", str(folder))]
    assert not remote.exists()


def test_the_retry_budget_reaches_mlflow_through_the_variables_mlflow_reads(monkeypatch):
    from mlflow import environment_variables as env

    for variable in (env.MLFLOW_HTTP_REQUEST_MAX_RETRIES, env.MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR):
        monkeypatch.setenv(variable.name, "99")  # restored after the test
    monkeypatch.setenv(env.MLFLOW_HTTP_REQUEST_TIMEOUT.name, "99")
    store.apply_retry_budget(20)
    retries, timeout = store.client_retries(20)
    assert env.MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == retries
    assert env.MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() == 1  # urllib3's 0, 2, 4 ... s that client_retries counts
    assert env.MLFLOW_HTTP_REQUEST_TIMEOUT.get() == timeout
