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
