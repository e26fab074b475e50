"""`with_retries` and `short` (src/tracking/store.py): a store another job holds locked is retried, and a lock that
outlasts every attempt raises the store's own error after exactly those attempts (never a None taken for the
result of an MLflow call that never happened); a store error is shown in one short line."""

from __future__ import annotations

import sqlite3
import time

import pytest

from src.tracking import store


def locked_store(fails: int):
    """An operation that finds the store locked (SQLITE_BUSY, as MLflow's SQLite store raises it) `fails` times."""
    calls = []

    def op():
        calls.append(len(calls))
        if len(calls) <= fails:
            err = sqlite3.OperationalError("database is locked")
            err.sqlite_errorcode = sqlite3.SQLITE_BUSY
            raise err
        return "done"

    return op, calls


@pytest.mark.parametrize("attempts", [1, 3])
def test_a_lock_that_outlasts_every_attempt_raises_after_exactly_those_attempts(monkeypatch, attempts):
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # tenacity sleeps through time.sleep
    op, calls = locked_store(fails=attempts)
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        store.with_retries(op, attempts=attempts)
    assert len(calls) == attempts


def test_a_lock_released_before_the_last_attempt_gives_the_operations_result(monkeypatch):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    op, calls = locked_store(fails=2)
    assert store.with_retries(op, attempts=3) == "done" and len(calls) == 3
    assert slept == pytest.approx([0.1, 0.2], abs=1e-9)  # backing off: 0.1 s, doubled each time


def test_an_error_that_is_no_race_is_raised_at_once():
    calls = []

    def op():
        calls.append(1)
        raise sqlite3.OperationalError("no such table: experiments")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        store.with_retries(op, attempts=5)
    assert len(calls) == 1


def test_a_store_error_is_shown_in_one_line_of_at_most_160_characters_from_its_cause():
    """`short` (the store's one-line messages): the error on one line, from its last "Caused by", cut to 160."""
    long = OSError("HTTPConnectionPool(host='mlflow', port=5000): Max retries exceeded\n Caused by " + "x" * 300)
    said = store.short(long)
    assert len(said) == 160 and said.endswith("...") and said.startswith("xxx") and "\n" not in said
    assert store.short(OSError("refused\n  by   the server")) == "refused by the server"
    assert store.short(long, limit=20) == "x" * 17 + "..."


def test_mlflows_retries_fit_the_budget_and_stop_at_ten():
    """client_retries: as many retries as urllib3's back-off (0, 2, 4, ... s, up to 1 s of jitter each) fits in the
    budget, at most 10 (the config allows budgets up to 600 s, 9 retries; the bound holds for any caller)."""
    for budget in (0, 5, 20, 600, 3600):
        retries, timeout = store.client_retries(budget)
        assert (2**retries - 2) + (retries - 1) <= budget, budget  # the last retry fits
        assert retries == 10 or (2 ** (retries + 1) - 2) + retries > budget, budget  # one more would not
        assert timeout == max(5, -(-budget // (retries + 1)))
    assert store.client_retries(3600)[0] == 10


def test_a_lock_is_tried_twelve_times_by_default_waits_doubling_from_0_1_s_capped_at_5_s(monkeypatch):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    op, calls = locked_store(fails=100)
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        store.with_retries(op)
    assert len(calls) == 12
    assert slept == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0, 5.0, 5.0], abs=1e-9)
