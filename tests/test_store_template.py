"""A new SQLite store is a copy of an empty store of MLflow's schema (src/tracking/store.py `store_template`): MLflow's
migrations run once per schema revision, not once per store, and the copy opens as a store MLflow made itself."""

from __future__ import annotations

import shutil
import sqlite3
import time
from types import SimpleNamespace

import pytest

from src.tracking import mlflow_adapter, store


@pytest.fixture
def cache(tmp_path, monkeypatch, empty_mlflow_db):
    """A cache folder of the test's own; its migrations stood in for by a copy of the session's template (seconds
    each otherwise), counted."""
    monkeypatch.setenv("MCQ_CACHE_DIR", str(tmp_path / "cache"))
    migrations = []

    def migrate(partial):  # as MLflow's: the tables, and the Default experiment it makes on opening them
        migrations.append(partial)
        shutil.copyfile(empty_mlflow_db, partial)
        store.client(f"sqlite:///{partial}").search_experiments(max_results=1)

    monkeypatch.setattr(store, "_migrate", migrate)
    return SimpleNamespace(path=tmp_path / "cache", migrations=migrations)


def test_new_stores_are_copies_of_one_template_made_once_per_schema_revision(cache, tmp_path, monkeypatch):
    for folder in ("elsewhere", "work"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    store.store_template()  # made from another folder than the one the stores are opened in
    work = tmp_path / "work"
    monkeypatch.chdir(work)
    started_ms = time.time() * 1000
    for name in ("a", "b"):
        store.open_store(f"sqlite:///{tmp_path}/{name}/mlflow.db")
    assert len(cache.migrations) == 1  # the template's, not each store's
    template = cache.path / store.TEMPLATES / f"mlflow-{mlflow_adapter.schema_revision()}.db"
    assert mlflow_adapter.empty_store_revision(template) == mlflow_adapter.schema_revision()
    client = store.client(f"sqlite:///{tmp_path}/b/mlflow.db")
    default = client.get_experiment("0")  # made by MLflow on opening the copy, as in a store it made itself
    assert default.name == "Default" and default.artifact_location == str(work / "mlruns" / "0")
    assert default.creation_time >= started_ms - 1000  # this store's time, within a second
    assert client.create_experiment("next") == "1"  # the ids a new store gives
    assert mlflow_adapter.empty_store_revision(template) is not None  # the template itself stays empty


@pytest.mark.parametrize("defect", ["another revision", "an experiment in it", "cut short"])
def test_a_template_that_is_not_an_empty_store_of_this_schema_is_made_again(cache, empty_mlflow_db, defect):
    template = cache.path / store.TEMPLATES / f"mlflow-{mlflow_adapter.schema_revision()}.db"
    template.parent.mkdir(parents=True)
    shutil.copyfile(empty_mlflow_db, template)
    if defect == "cut short":
        template.write_bytes(template.read_bytes()[:4096])
    else:
        with sqlite3.connect(template) as conn:
            if defect == "another revision":
                conn.execute("UPDATE alembic_version SET version_num = '451aebb31d03'")  # MLflow's first schema
            else:
                conn.execute(
                    "INSERT INTO experiments (experiment_id, name, lifecycle_stage, workspace) "
                    "VALUES (7, 'left', 'active', 'default')"
                )
        conn.close()
    assert store.store_template() == template
    assert len(cache.migrations) == 1
    assert mlflow_adapter.empty_store_revision(template) == mlflow_adapter.schema_revision()


def test_a_cache_that_cannot_be_written_leaves_the_store_to_mlflows_migrations(cache, tmp_path, monkeypatch):
    def unwritable(folder=None):
        raise PermissionError(13, "Permission denied", str(cache.path))

    monkeypatch.setattr(store, "store_template", unwritable)
    store.open_store(f"sqlite:///{tmp_path}/s/mlflow.db")
    assert cache.migrations and cache.migrations[0].parent == tmp_path / "s"  # made in place, beside the store
    assert store.client(f"sqlite:///{tmp_path}/s/mlflow.db").get_experiment("0").name == "Default"


def test_a_template_is_made_in_the_folder_asked_for(cache, tmp_path):
    template = store.store_template(tmp_path / "mine")
    assert template == tmp_path / "mine" / f"mlflow-{mlflow_adapter.schema_revision()}.db"
    assert mlflow_adapter.empty_store_revision(template) == mlflow_adapter.schema_revision()
    assert not (cache.path / store.TEMPLATES).exists()


def dead_pid() -> int:
    import subprocess
    import sys

    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)


@pytest.mark.parametrize("made", ["a store", "a store in place", "a template"])
def test_a_killed_creations_temporary_is_removed_and_the_log_says_what_left_it(
    cache, tmp_path, monkeypatch, made, caplog
):
    """A temporary left by a creation whose process died (this host, its pid gone) is removed before the next one,
    and the log line names what left it: a store's creation (copied from the template, or migrated in place where
    the cache cannot be written) or the template's."""
    import logging

    from src.common import owners

    if made == "a template":
        target = cache.path / store.TEMPLATES / f"mlflow-{mlflow_adapter.schema_revision()}.db"
    else:
        target = tmp_path / "s" / "mlflow.db"
    target.parent.mkdir(parents=True)
    left = target.parent / f".{target.name}.tmp-{owners.host()}-{dead_pid()}-0a1b2c3d"
    left.write_bytes(b"half a store")
    if made == "a store in place":

        def unwritable(folder=None):
            raise PermissionError(13, "Permission denied", str(cache.path))

        monkeypatch.setattr(store, "store_template", unwritable)
    caplog.set_level(logging.INFO, logger=owners.__name__)
    if made == "a template":
        store.store_template()
    else:
        store.open_store(f"sqlite:///{target}")
    assert not left.exists()
    what = "an interrupted store template" if made == "a template" else "an interrupted store creation"
    assert f"removed {left}, left by {what}" in caplog.messages


def test_a_store_is_opened_in_new_nested_folders_or_over_an_empty_file_once_per_process(cache, tmp_path, monkeypatch):
    made = []  # the stores made by the tool's own creation (a template's copy, renamed into place whole)
    create = store._create_sqlite_store
    monkeypatch.setattr(store, "_create_sqlite_store", lambda db: (made.append(db), create(db)))
    nested = f"sqlite:///{tmp_path}/a/b/c/mlflow.db"
    store.open_store(nested)
    assert store.client(nested).get_experiment("0").name == "Default"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "mlflow.db").touch()  # a file someone touched, or a creation killed before writing
    store.open_store(f"sqlite:///{tmp_path}/empty/mlflow.db")
    assert store.client(f"sqlite:///{tmp_path}/empty/mlflow.db").get_experiment("0").name == "Default"
    assert made == [tmp_path / "a" / "b" / "c" / "mlflow.db", tmp_path / "empty" / "mlflow.db"]

    def no_second_check(uri):
        raise AssertionError(f"{uri} opened again")

    monkeypatch.setattr(store, "client", no_second_check)
    store.open_store(nested)  # opened before in this process: no second check


def test_a_server_store_is_left_to_its_server(cache, monkeypatch):
    monkeypatch.setattr(store, "_OPENED", set())
    store.open_store("http://127.0.0.1:9")  # nothing made, nothing asked: the server's schema is its own
    assert not cache.migrations
