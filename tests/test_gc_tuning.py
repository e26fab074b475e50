"""Garbage collection around a command's imports (src/common/gc_tuning.py): off while `python -m src.run` imports, back
on, with what the imports made frozen, once the job's MLflow store is open; a program that turned collection off
itself keeps it off."""

from __future__ import annotations

import gc

import pytest

from src.common import gc_tuning
from src.tracking import store


@pytest.fixture
def freezes(monkeypatch):
    """The calls to gc.freeze (recorded, not made: this test process keeps its own heap as it is)."""
    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(True))
    monkeypatch.setattr(gc_tuning, "_paused", False)
    yield calls
    gc.enable()


def test_collection_is_off_until_the_store_opens_then_on_with_the_imports_frozen_once(freezes):
    assert gc.isenabled()
    gc_tuning.pause_for_imports()
    assert not gc.isenabled() and not freezes
    store.open_store("http://127.0.0.1:9")  # a server's store: nothing to create, the imports are done
    assert gc.isenabled() and freezes == [True]
    store.open_store("http://127.0.0.1:9")  # every later store of the process: nothing more to do
    assert gc.isenabled() and freezes == [True]


def test_without_the_pause_opening_a_store_changes_nothing(freezes):
    store.open_store("http://127.0.0.1:9")
    assert gc.isenabled() and not freezes


def test_collection_a_program_turned_off_stays_off(freezes):
    gc.disable()
    gc_tuning.pause_for_imports()
    gc_tuning.end_import_pause()
    assert not gc.isenabled() and not freezes
