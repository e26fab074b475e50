"""What a store error means, read from the exception chain as MLflow, SQLAlchemy and SQLite raise it
(src/tracking/mlflow_adapter.py): a lock or a row inserted by another job first is a race (retried); a missing table
is not; a server that does not answer is an outage."""

from __future__ import annotations

import socket
import sqlite3

import pytest
import sqlalchemy
from mlflow.exceptions import MlflowException, RestException
from mlflow.tracking import MlflowClient

from src.tracking import mlflow_adapter, store


def _as_mlflow_raises_it(engine, statement: str, code: str) -> MlflowException:
    """Run `statement` on `engine`, and raise its SQLAlchemy error as MLflow's session maker does
    (mlflow/store/db/utils.py: `raise MlflowException(message=e, error_code=...) from e`)."""
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text(statement))
    except sqlalchemy.exc.SQLAlchemyError as e:
        try:
            raise MlflowException(message=e, error_code=code) from e
        except MlflowException as wrapped:
            return wrapped
    raise AssertionError(f"{statement} did not fail")


def test_a_locked_sqlite_store_is_a_race(tmp_path):
    db = tmp_path / "s.db"
    sqlite3.connect(db).execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a parallel job's write transaction
    try:
        engine = sqlalchemy.create_engine(f"sqlite:///{db}", connect_args={"timeout": 0})
        err = _as_mlflow_raises_it(engine, "INSERT INTO t VALUES ('a')", "TEMPORARILY_UNAVAILABLE")
    finally:
        holder.execute("ROLLBACK")
    assert "locked" in str(err)  # the precondition: SQLite's lock, not another failure
    assert mlflow_adapter.is_race(err) and store.is_race(err)


def test_a_row_another_job_inserted_first_is_a_race_and_other_integrity_errors_are_not(tmp_path):
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path}/s.db")
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL)"))
        conn.execute(sqlalchemy.text("INSERT INTO t VALUES ('a', 'x')"))
    duplicate = _as_mlflow_raises_it(engine, "INSERT INTO t VALUES ('a', 'y')", "BAD_REQUEST")
    missing_value = _as_mlflow_raises_it(engine, "INSERT INTO t (k) VALUES ('b')", "BAD_REQUEST")
    assert store.is_race(duplicate)
    assert not store.is_race(missing_value), "a NOT NULL violation is the caller's error, retried in vain"


def test_a_store_missing_a_table_is_no_race_though_mlflow_calls_it_temporarily_unavailable(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    store.open_store(uri)
    with sqlite3.connect(tmp_path / "mlflow.db") as conn:
        conn.execute("DROP TABLE experiment_tags")  # a store of another schema
    with pytest.raises(MlflowException) as caught:
        MlflowClient(tracking_uri=uri).set_experiment_tag("0", "a", "b")
    assert caught.value.error_code == "TEMPORARILY_UNAVAILABLE"  # MLflow's code for every OperationalError
    assert not store.is_race(caught.value)


def test_a_servers_answers_are_read_by_their_codes():
    unavailable = RestException({"error_code": "TEMPORARILY_UNAVAILABLE", "message": "database is busy"})
    duplicate = RestException(
        {
            "error_code": "BAD_REQUEST",
            "message": "(psycopg2.errors.UniqueViolation) duplicate "
            'key value violates unique constraint "experiment_tag_pk"',
        }
    )
    bad = RestException({"error_code": "BAD_REQUEST", "message": "Param value 'x' had length 7000, limit 6000"})
    exists = RestException({"error_code": "RESOURCE_ALREADY_EXISTS", "message": "Experiment(name=x) already exists"})
    assert store.is_race(unavailable) and store.is_race(duplicate)
    assert not store.is_race(bad) and not store.is_race(exists)
    assert not any(map(store.is_outage, (unavailable, duplicate, bad, exists)))


def test_a_server_that_does_not_answer_is_an_outage(monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    with pytest.raises(MlflowException) as caught:
        MlflowClient(tracking_uri=f"http://127.0.0.1:{port}").search_experiments()
    assert store.is_outage(caught.value) and not store.is_race(caught.value)
    assert not store.is_outage(ValueError("API request to http://x failed with exception timeout"))


def test_a_row_another_job_changed_first_is_a_race():
    """SQLAlchemy's StaleDataError (an UPDATE or DELETE that matched 0 rows where it expected 1: a parallel job changed
    them first), as MLflow raises it, wrapped, is a race to retry (a mutant: `mlflow_adapter.is_race`)."""
    from sqlalchemy.orm.exc import StaleDataError

    with pytest.raises(MlflowException) as caught:
        try:
            raise StaleDataError("UPDATE statement on table 'runs' expected to update 1 row(s); 0 were matched.")
        except StaleDataError as stale:
            raise MlflowException(str(stale), error_code="INTERNAL_ERROR") from stale
    assert mlflow_adapter.is_race(caught.value) and store.is_race(caught.value)


def test_an_errors_chain_is_every_cause_context_and_driver_error_once_even_in_a_cycle():
    """`chain` reads the errors below one (what it was raised from, while handling, a DB-API wrapper's `orig`),
    each once: an error met again (two links to one error, or errors that name each other) is passed over and the
    rest still read."""
    driver = sqlite3.OperationalError("database is locked")
    shared, other = ValueError("shared"), KeyError("other")
    wrapper = RuntimeError("wrapped")
    wrapper.orig = driver  # as SQLAlchemy's DBAPIError keeps the driver's error
    top = MlflowException("top")
    top.__cause__, top.__context__ = other, shared
    other.__context__ = wrapper
    shared.__context__ = top  # a cycle back to the first
    found = list(mlflow_adapter.chain(top))
    assert sorted(map(id, found)) == sorted(map(id, (top, shared, other, wrapper, driver)))
    met_twice = LookupError("met twice")
    first = TypeError("first")
    first.__cause__, first.__context__, first.orig = other, met_twice, met_twice  # read last: orig, then context
    assert {id(e) for e in mlflow_adapter.chain(first)} == {id(e) for e in (first, met_twice, other, wrapper, driver)}


def test_a_store_error_is_shown_as_its_last_cause_on_one_line_cut_only_past_the_limit():
    """`short`: MLflow's and urllib3's nested messages ("... Caused by ...") shown as the innermost cause alone, on
    one line; a text of exactly the limit kept whole, a longer one cut to it with an ellipsis."""
    nested = "API request failed\n (Caused by ProtocolError(reset)) Caused by: (XMLParseError: bad tag)"
    assert store.short(RuntimeError(nested)) == "XMLParseError: bad tag)"
    assert store.short(RuntimeError("no cause given here")) == "no cause given here"
    assert store.short(RuntimeError("x" * 160)) == "x" * 160
    assert store.short(RuntimeError("x" * 161)) == "x" * 157 + "..."
    assert store.short(RuntimeError("y" * 30), limit=20) == "y" * 17 + "..."
