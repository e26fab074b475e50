"""Response cache: SQLite, embedded, shared by every job on the machine; or, with `cache.shared=true`, a folder of
chunk files that jobs on many nodes share without any file lock (`SharedResponseCache`).

A backend result is stored per (model identity, exact prompt, displayed labels/options, scoring mode,
decoding settings, trial seed, repetition). Identical prompts across variant sets, sweeps and reruns are
computed once, and an interrupted run resumes from what it had: results are committed chunk by chunk.
WAL mode and a busy timeout let parallel jobs (joblib launcher) share one file. Within a job, the answering
pipeline looks answers up in one thread and stores them in another (src/answering/pipeline.py): each cache serialises
its operations with a lock of its own.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import tenacity

from src.backends.base import Request
from src.common import owners
from src.common.digests import text_sha256
from src.common.paths import expand_path

T = TypeVar("T")
SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"


def request_key(
    identity: str, mode: str, request: Request, settings: dict[str, Any], repetition: int | None, *, seeded: bool
) -> str:
    """Everything that can change a backend's answer to this request, hashed.

    `identity` is the backend's (its weights by content: src/backends/weights.py) and `request.data` the question's
    (src/core/questions.py), so new weights or a corrected question never get an answer cached for the old ones.
    `seeded` says whether the answer depends on the trial's seed (sampling, or an oracle backend); when it does
    not (greedy decoding, label and option scores of a real model) identical prompts share one entry, whichever
    question, variant or variant set they came from.
    """
    trial = [request.seed, request.key] if seeded else None
    fields: list[Any] = [
        identity,
        request.data,
        mode,
        request.prompt,
        request.labels,
        request.options,
        trial,
        sorted(settings.items()),
        repetition,
    ]
    if request.continuation_prefix is not None:  # only then: the keys of every other request stay as they were
        fields.append(["continuation_prefix", request.continuation_prefix])
    return text_sha256(_KEY_JSON.encode(fields))


# `json.dumps(fields, ensure_ascii=False)`'s encoder, made once: dumps builds one per call when given an option
_KEY_JSON = json.JSONEncoder(ensure_ascii=False)


def _locked(err: BaseException) -> bool:
    return isinstance(err, sqlite3.OperationalError) and ("locked" in str(err) or "busy" in str(err))


class ResponseCache:
    """Key -> JSON value store. `get_many`/`put_many` are the only operations the pipeline needs."""

    def __init__(self, path: str | Path, *, timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one connection for the threads of the answering pipeline, used by one at a time (`_lock`)
        self.conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self.conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        self._retry(lambda: self.conn.execute("PRAGMA journal_mode=WAL"))
        self._retry(lambda: self.conn.execute(SCHEMA))

    def _retry(self, op: Callable[[], T], attempts: int = 20) -> T:
        """Writers from parallel jobs can still collide on schema setup or checkpoints (the file locked or busy
        past the busy timeout): back off 0.05 s more each time and retry; the last attempt's error is raised."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_locked),
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_incrementing(start=0.05, increment=0.05),
            reraise=True,
        )
        return retrying(op)

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        with self._lock:
            return self._get_many(keys)

    def _get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            query = f"SELECT key, value FROM responses WHERE key IN ({marks})"
            rows = self._retry(lambda: self.conn.execute(query, chunk).fetchall())  # noqa: B023 -- called at once
            found.update((k, json.loads(v)) for k, v in rows)
        return found

    def put_many(self, items: Iterable[tuple[str, Any]]) -> None:
        rows = [(k, json.dumps(v), time.time()) for k, v in items]
        if not rows:
            return

        def write() -> None:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.executemany("INSERT OR IGNORE INTO responses VALUES (?, ?, ?)", rows)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

        with self._lock:
            self._retry(write)

    def __len__(self) -> int:
        with self._lock:
            return int(self.conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self.conn.close()


class SharedResponseCache:
    """The response cache as a folder that jobs on several nodes share (an NFS or Lustre folder), correct without
    file locks, which such filesystems do not give reliably (SQLite's WAL needs all its processes on one host).

    Each `put_many` is one chunk: written and fsynced under a temporary name (`owners.temp_prefix`), then published
    as `chunks/<n>.jsonl` (a line per answer: key, tab, JSON value) by a hard link that fails when `<n>` exists, the
    publisher then trying `<n+1>`. A link is atomic on a network filesystem too, so the chunk numbers are the order
    of publication: a reader sees a chunk whole or not at all, and reads them in that order, `0, 1, 2, ...`, opening
    the next number until there is none (no listing of the folder). The first answer published for a key wins,
    for every reader and the publisher alike: every process resolves a key to one value. A chunk another node
    published moments ago may show a little later (the filesystem's attribute cache): reading stops at the first
    number it cannot open, so it is read later, in its place. Chunks of an older version (`<host>-<pid>-...jsonl`)
    are read once, when the cache opens, before the numbered ones.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.chunks = self.path / "chunks"
        self.chunks.mkdir(parents=True, exist_ok=True)
        owners.clean_stale_temps([self.chunks], "an interrupted cache write", ownerless=False)
        self._index: dict[str, str] = {}  # key -> the value's JSON text (parsed when asked for)
        self._next = 0  # the number of the next chunk to read (and to try to publish as)
        self._lock = threading.Lock()  # the index and `_next`, for the answering pipeline's two threads
        for entry in sorted(os.scandir(self.chunks), key=lambda e: e.name):  # an older version's chunks, once
            if entry.name.endswith(".jsonl") and not entry.name.startswith(".") and not chunk_number(entry.name):
                self._read_chunk(Path(entry.path))

    def _read_chunk(self, path: Path) -> bool:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition("\t")
            self._index.setdefault(key, value)
        return True

    def _refresh(self) -> None:
        """Read the chunks published since the last lookup, in the order of publication."""
        while self._read_chunk(self.chunks / chunk_name(self._next)):
            self._next += 1

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        with self._lock:
            self._refresh()
            return {k: json.loads(self._index[k]) for k in keys if k in self._index}

    def put_many(self, items: Iterable[tuple[str, Any]]) -> None:
        rows = [(k, json.dumps(v)) for k, v in items]
        if rows:
            with self._lock:
                self._publish(rows)

    def _publish(self, rows: list[tuple[str, str]]) -> None:
        partial = self.chunks / f"{owners.temp_prefix('chunk.jsonl')}{os.urandom(4).hex()}"
        try:
            with open(partial, "w", encoding="utf-8") as handle:
                handle.write("".join(f"{k}\t{v}\n" for k, v in rows))
                handle.flush()
                os.fsync(handle.fileno())  # on disk before it has its name: a crash never publishes part of it
            while True:  # the first free number: what others published before it is read first
                self._refresh()
                try:
                    os.link(partial, self.chunks / chunk_name(self._next))
                    break
                except FileExistsError:  # published by another job meanwhile: read in its place, then the next
                    if not self._read_chunk(self.chunks / chunk_name(self._next)):
                        time.sleep(0.05)  # another node's, not yet visible here (its attribute cache)
                    else:
                        self._next += 1
        finally:
            partial.unlink(missing_ok=True)
        self._next += 1
        for key, value in rows:  # every earlier chunk is in the index: an earlier answer keeps its place
            self._index.setdefault(key, value)

    def __len__(self) -> int:
        with self._lock:
            self._refresh()
            return len(self._index)

    def close(self) -> None:
        with self._lock:
            self._index.clear()


def chunk_name(number: int) -> str:
    return f"{number:012d}.jsonl"


def chunk_number(name: str) -> bool:
    """Whether a chunk's file name is a publication number (this version's), not an older version's name."""
    return len(name) == len("000000000000.jsonl") and name[:12].isdigit()


class GuardedCache:
    """A response cache that stores answers only while `check` passes: the job's check that the model's files are
    still those its identity names (src/job/runner.py `content_guard`). If they changed during the run, `check`
    raises before anything is stored, so no answer is kept under an identity it did not come from."""

    def __init__(self, cache: ResponseCache | SharedResponseCache, check: Callable[[], object]):
        self.cache, self.check = cache, check

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        return self.cache.get_many(keys)

    def put_many(self, items: Iterable[tuple[str, Any]]) -> None:
        self.check()
        self.cache.put_many(items)

    def __len__(self) -> int:
        return len(self.cache)

    def close(self) -> None:
        self.cache.close()


# what the answering loop reads answers from and stores them in: a cache, or one behind the job's content check
AnswerStore = ResponseCache | SharedResponseCache | GuardedCache


def open_cache(path: str | Path, *, shared: bool = False) -> ResponseCache | SharedResponseCache:
    """The response cache of `cache.path` (`~` and `$VARIABLES` expanded): the SQLite file, or with `cache.shared`
    the folder many nodes share."""
    path = expand_path(path)
    return SharedResponseCache(path) if shared else ResponseCache(path)
