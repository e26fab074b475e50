"""Garbage collection tuned for a batch process whose heap is mostly what importing MLflow, SQLAlchemy, pandas and
torch made. Each entry point calls `tune_for_batch` before its imports (`src.cli.entry`, `python -m src.run`, `mcq`),
and so does a launcher worker's job (`src.sweep.job.run_sweep_job`); importing the package changes nothing. Set
that early, it also spares the collections that imports alone would start (one full collection, ~0.15 s, of a
one-question job).

- A young-generation threshold of 10,000 allocations instead of 700: a 24-job sweep ran 2,252 young and 11 full
  collections (2.7 s of 35 s); with this, 110 young and 1 full (1.1 s).
- No last collection at exit: Python walks every live object once more (about 1 s of a one-question job here) only
  to free memory the process is about to give back. Freezing them in an exit handler skips that walk; objects are
  still released by reference count, and the handler, registered first, runs after every other one (MLflow's
  flushes included).
- No collection at all while a command's imports build its heap (`pause_for_imports`, called by `python -m
  src.run` before the job imports MLflow): importing MLflow and its SQLAlchemy store alone made ~50 young and 4
  middle-generation collections (0.18 s of a one-question job) that found next to nothing to free. Once the job's
  store is open (`src.tracking.store.open_store`) `end_import_pause` freezes what the imports made, so no later
  collection walks it again, and turns collection back on for the work itself.
"""

from __future__ import annotations

import atexit
import gc

YOUNG_THRESHOLD = 10_000
_paused = False  # collection off since `pause_for_imports`, until `end_import_pause`
_tuned = False  # tune_for_batch ran in this process


def tune_for_batch() -> None:
    """The young-generation threshold and no last collection at exit; once per process, whoever calls first."""
    global _tuned
    if not _tuned:
        _tuned = True
        gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        atexit.register(gc.freeze)


def pause_for_imports() -> None:
    """Collection off until `end_import_pause`: only for a command's own process (never a test process, whose
    objects a freeze would keep alive)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def end_import_pause() -> None:
    """After the imports: what they made frozen, collection on again. Nothing to do unless paused."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
