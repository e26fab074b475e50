"""Response cache: SQLite, embedded, shared by every job on the machine.

A backend result is stored per (model identity, exact prompt, displayed labels/options, scoring mode,
decoding settings, trial seed, repetition). Identical prompts across variant sets, sweeps and reruns are
computed once, and an interrupted run resumes from what it had: results are committed chunk by chunk.
WAL mode and a busy timeout let parallel jobs (joblib launcher) share one file.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from src.backends.base import Request

SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"


def request_key(identity: str, mode: str, request: Request, settings: dict[str, Any], repetition: int | None, *,
                seeded: bool) -> str:
    """Everything that can change a backend's answer to this request, hashed.

    `identity` is the backend's (its weights by content: src/backends/weights.py) and `request.data` the question's
    (src/core/questions.py), so new weights or a corrected question never get an answer cached for the old ones.
    `seeded` says whether the answer depends on the trial's seed (sampling, or an oracle backend); when it does
    not (greedy decoding, label and option scores of a real model) identical prompts share one entry, whichever
    question, variant or variant set they came from.
    """
    trial = [request.seed, request.key] if seeded else None
    payload = json.dumps([identity, request.data, mode, request.prompt, request.labels, request.options, trial,
                          sorted(settings.items()), repetition], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class ResponseCache:
    """Key -> JSON value store. `get_many`/`put_many` are the only operations the pipeline needs."""

    def __init__(self, path: str | Path, *, timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
        self.conn.execute("PRAGMA busy_timeout = %d" % int(timeout_s * 1000))
        self._retry(lambda: self.conn.execute("PRAGMA journal_mode=WAL"))
        self._retry(lambda: self.conn.execute(SCHEMA))

    def _retry(self, op, attempts: int = 20):
        """Writers from parallel jobs can still collide on schema setup or checkpoints; back off and retry."""
        for attempt in range(attempts):
            try:
                return op()
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) and "busy" not in str(err) or attempt == attempts - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = list(keys[start:start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._retry(lambda: self.conn.execute(
                f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk).fetchall())
            found.update((k, json.loads(v)) for k, v in rows)
        return found

    def put_many(self, items: Iterable[tuple[str, Any]]) -> None:
        rows = [(k, json.dumps(v), time.time()) for k, v in items]
        if not rows:
            return

        def write():
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.executemany("INSERT OR IGNORE INTO responses VALUES (?, ?, ?)", rows)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

        self._retry(write)

    def __len__(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self.conn.close()
