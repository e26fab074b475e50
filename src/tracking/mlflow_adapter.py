"""What an MLflow error means for the tool: a race of parallel first use (retried), a server that does not answer
(an outage), a store of an older schema (refused in one line); and the schema revision of an empty store. The one
module of src that reads MLflow's errors and its tables, with the MLflow versions it was checked with.

MLflow's public API says most of it without reading messages:
- its SQL store raises `MlflowException(error_code=TEMPORARILY_UNAVAILABLE)` from SQLAlchemy's `OperationalError`,
  and `BAD_REQUEST` from its other errors, the database driver's error chained below (`__cause__`); a REST client
  gets the server's `error_code` in its `RestException`;
- its REST client raises from the `requests` error of a request that failed (`__context__`);
so a lock is SQLite's own error code (`SQLITE_BUSY`, `SQLITE_LOCKED`), a row two jobs insert at once is SQLite's
`SQLITE_CONSTRAINT_UNIQUE`/`PRIMARYKEY` or SQLAlchemy's `StaleDataError` (an update that found its row gone), a
server's transient error is its `TEMPORARILY_UNAVAILABLE` code, and an outage is a `requests` connection error,
timeout or exhausted retries, all read from the exception chain.

Two things have nothing but a message: a unique-key race inside a tracking server's database reaches the client as
`BAD_REQUEST` with the driver's text (PostgreSQL's "duplicate key value violates unique constraint", SQLite's
"UNIQUE constraint failed"), and MLflow's refusal of a store of an older schema is an `MlflowException` with no
code of its own ("Detected out-of-date database schema"). Those two texts are matched here and nowhere else;
importing this module checks the installed MLflow against `SUPPORTED` (pyproject.toml pins the same range) and
prints one `warning:` line when it is outside (src/common/versions.py). tests/test_store_errors.py makes each
error as MLflow and SQLite make it.

It also names the one private function that says which schema revision this MLflow makes
(`mlflow.store.db.utils._get_latest_schema_revision`), the key of the empty store new SQLite stores are copied
from, and reads and trims that store's own tables (`alembic_version`, the Default experiment) with sqlite3
(tests/test_store_template.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from src.common import versions

ADAPTER = "src/tracking/mlflow_adapter.py"
SUPPORTED = ">=3.17,<3.18"  # as pyproject.toml pins mlflow

SQLITE_LOCKS = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}  # primary codes (an extended code's low byte)
SQLITE_UNIQUE = {sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY}
# a tracking server's database saying that another request inserted the same row first (the only sign it gives)
SERVER_UNIQUE_RACE = ("duplicate key value violates unique constraint", "unique constraint failed")
OLD_SCHEMA = "out-of-date database schema"


def schema_revision() -> str:
    """The schema revision a store this MLflow makes is at (the head of its alembic migrations): the key of the
    empty store that new SQLite stores are copied from (src/tracking/store.py `store_template`: ~0.1 s a store
    instead of 5-10 s of migrations on two cores). MLflow's public API does not give it; reading it costs ~40 ms."""
    from mlflow.store.db import utils

    return str(utils._get_latest_schema_revision())  # type: ignore[no-untyped-call]  # MLflow leaves it untyped


def empty_store_revision(db: Path) -> str | None:
    """The schema revision a SQLite store with no experiment is at (its `alembic_version` row); None for no file,
    no such row, or a store that holds an experiment."""
    if not db.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            experiments = conn.execute("SELECT count(*) FROM experiments").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return str(row[0]) if row and experiments == 0 else None


def drop_default_experiment(db: Path) -> None:
    """Remove the Default experiment (id 0) of a store no one has used: MLflow makes it again when it opens the
    store, with that process's artifact root and time, so a copy of an empty store opens as a store MLflow made."""
    conn = sqlite3.connect(db)
    try:
        with conn:  # one transaction, committed
            conn.execute("DELETE FROM experiments WHERE experiment_id = 0")
    finally:
        conn.close()


def chain(err: BaseException) -> Iterator[BaseException]:
    """`err` and the errors it was raised from or while handling (`__cause__`, `__context__`, a DB-API error's
    `orig`), each once."""
    seen: set[int] = set()
    todo = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.extend(x for x in (e.__cause__, e.__context__, getattr(e, "orig", None)) if isinstance(x, BaseException))


def is_race(err: BaseException) -> bool:
    """Parallel first use of a store by another job (retried), not a real error: a SQLite lock, a row another job
    inserted or changed first, or a server's own "temporarily unavailable". A missing table or column is no race: a
    new SQLite store is made whole under a temporary name and renamed into place (src/tracking/store.py
    `open_store`), so no process sees one half made; it is a store of another schema, reported at once."""
    from sqlalchemy.orm.exc import StaleDataError

    for e in chain(err):
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(e, sqlite3.OperationalError) and code is not None and code & 0xFF in SQLITE_LOCKS:
            return True
        if isinstance(e, sqlite3.IntegrityError) and code in SQLITE_UNIQUE:
            return True
        if isinstance(e, StaleDataError):
            return True
        if _rest_code(e) == "TEMPORARILY_UNAVAILABLE":
            return True
        if _rest_code(e) == "BAD_REQUEST" and any(m in str(e).lower() for m in SERVER_UNIQUE_RACE):
            return True
    return False


def is_outage(err: BaseException) -> bool:
    """A tracking server that does not answer: refused, reset, timed out, or still failing (5xx) after MLflow's
    retries."""
    import requests

    outages = (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        requests.exceptions.RetryError,
        ConnectionError,
    )
    return any(isinstance(e, outages) for e in chain(err))


def is_old_schema(err: BaseException) -> bool:
    """MLflow's refusal of a SQL store made by an older MLflow (it never upgrades one in place)."""
    return OLD_SCHEMA in str(err)


def _rest_code(err: BaseException) -> str | None:
    """The error code a tracking server answered with (None for any other error)."""
    from mlflow.exceptions import RestException

    return err.error_code if isinstance(err, RestException) else None


versions.warn_if_outside("mlflow", SUPPORTED, ADAPTER)
