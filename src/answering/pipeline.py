"""The answering loop as a pipeline: the backend never waits for the framework.

A job's prompts are answered chunk by chunk, and each chunk has work before the backend's (its prompts rendered, their
response-cache keys hashed and looked up) and after it (the fresh answers stored in the cache, one transaction a
chunk, and parsed into answers). Done in line, that work adds to the backend's time; here it runs beside it:

- a producer thread renders, hashes and looks up the prompts ahead of the backend, in blocks, keeping about two
  chunks prepared (no more: what it prepares waits in memory);
- the calling thread takes each chunk as the backend sizes it (`prompts_per_chunk`, asked just before the chunk, as
  the loop always has) and asks the backend: it alone calls the backend, so a backend that is not thread-safe is only
  ever called from one thread;
- a writer thread stores and parses the chunk the backend answered last, while the backend answers the next; a
  chunk is handed to it only once the one before is stored, so at most one answered chunk waits to be stored.

So a job killed outright loses at most the chunk the backend was answering and the one being stored; stopped by a
signal or an error in the calling thread (SIGTERM and Ctrl-C raise there), the writer first stores what was answered.
An exception in the producer or the writer ends the job with that exception, raised in the calling thread, and
every thread has ended when the loop returns or raises.

A chunk sees every answer an earlier chunk of the job computed, as it would in line: a key the producer looked up
before an earlier chunk's answers were stored is found among the answers the calling thread keeps of the chunks
whose storing that lookup may have missed (`_Recent`).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from src.answering.cache import AnswerStore
from src.answering.items import Answer, Item
from src.backends.base import Request

P = TypeVar("P")  # what a scoring mode prepares for one request: its response-cache keys


@dataclass
class Asked:
    """What the backend gave for one chunk: `fresh` values by cache key (the chunk's answers read them), `also`
    stored beside them (label scores at temperature 1 under a sampled run), `done`: what was asked (the scoring
    mode's own: request indices or keys), which `answers` marks as not from the cache."""

    fresh: dict[str, Any]
    done: Collection[Any]
    also: list[tuple[str, Any]] = field(default_factory=list)

    def stored(self) -> list[tuple[str, Any]]:
        return [*self.fresh.items(), *self.also]


class ChunkWork(ABC, Generic[P]):
    """One scoring mode's work on a chunk, in the three parts the pipeline's threads share."""

    @abstractmethod
    def prepare(self, request: Request) -> P:
        """What `ask` and `answers` need of one request (its cache keys); in the producer thread."""

    @abstractmethod
    def lookup_keys(self, prepared: P) -> Sequence[str]:
        """The keys of one request's answers in the response cache."""

    @abstractmethod
    def ask(self, requests: Sequence[Request], prepared: Sequence[P], found: dict[str, Any]) -> Asked:
        """The backend's answers for what `found` (the cache's) lacks; in the calling thread, the only one that
        calls the backend."""

    @abstractmethod
    def answers(
        self, requests: Sequence[Request], prepared: Sequence[P], found: dict[str, Any], asked: Asked
    ) -> list[list[Answer]]:
        """Each request's answers, read from `found` (the cache's and the fresh ones); in the writer thread."""


def answer_chunk(work: ChunkWork[P], requests: Sequence[Request], cache: AnswerStore | None) -> list[list[Answer]]:
    """One chunk in line: looked up, asked, stored, parsed (the rounds of adaptive repetitions)."""
    prepared = [work.prepare(r) for r in requests]
    found = cache.get_many([k for p in prepared for k in work.lookup_keys(p)]) if cache is not None else {}
    return _settle(work, requests, prepared, found, work.ask(requests, prepared, found), cache)


def _settle(
    work: ChunkWork[P],
    requests: Sequence[Request],
    prepared: Sequence[P],
    found: dict[str, Any],
    asked: Asked,
    cache: AnswerStore | None,
) -> list[list[Answer]]:
    stored = asked.stored()
    if cache is not None and stored:
        cache.put_many(stored)  # one transaction for the chunk
    found.update(asked.fresh)
    return work.answers(requests, prepared, found, asked)


@dataclass
class _Block(Generic[P]):
    """Requests the producer prepared: items `start` on, their lookups, and how many of the job's items had their
    answers stored when the lookup ran (`visible`)."""

    start: int
    requests: list[Request]
    prepared: list[P]
    found: dict[str, Any]
    visible: int
    taken: int = 0  # of its requests, those already in a chunk


@dataclass
class _Chunk(Generic[P]):
    start: int
    requests: list[Request]
    prepared: list[P]
    found: dict[str, Any]
    asked: Asked | None = None

    @property
    def end(self) -> int:
        return self.start + len(self.requests)


class _Recent:
    """The values stored by the chunks whose storing a pending lookup may have missed, by key: a chunk stored after
    a block's lookup ran is kept until every block still to be read was looked up after it was stored."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.chunks: deque[tuple[int, list[str]]] = deque()  # (end, keys) in the order the chunks were answered

    def add(self, end: int, stored: list[tuple[str, Any]]) -> None:
        self.values.update(stored)
        self.chunks.append((end, [k for k, _ in stored]))

    def fill(self, found: dict[str, Any], prepared: Sequence[Any], keys_of: Callable[[Any], Sequence[str]]) -> None:
        """`found` completed with the kept values of the prepared requests' keys that its lookup missed."""
        if self.values:
            for p in prepared:
                for k in keys_of(p):
                    if k not in found and k in self.values:
                        found[k] = self.values[k]

    def forget_through(self, visible: int) -> None:
        """Every lookup still to be read saw the chunks that end at or before item `visible` stored."""
        while self.chunks and self.chunks[0][0] <= visible:
            for k in self.chunks.popleft()[1]:
                self.values.pop(k, None)


class Pipeline(Generic[P]):
    """`items` answered by `work` with the producer, the calling thread and the writer (the module's docstring);
    `run()` gives their answers in item order."""

    def __init__(
        self,
        work: ChunkWork[P],
        items: Sequence[Item],
        *,
        cache: AnswerStore | None,
        chunk_size: Callable[[], int],
        block: int,
        on_chunk: Callable[[int], object],
    ) -> None:
        self.work, self.items, self.cache = work, items, cache
        self.chunk_size, self.block, self.on_chunk = chunk_size, max(1, block), on_chunk
        self.cond = threading.Condition()
        # all below under `cond`
        self.blocks: deque[_Block[P]] = deque()
        self.buffered = 0  # prepared items not yet taken into a chunk
        self.want = 2 * self.block  # the producer keeps up to this many items prepared: two chunks
        self.produced = 0  # items prepared so far (the producer's next item)
        self.pending: deque[_Chunk[P]] = deque()  # answered, handed to the writer
        self.writing = False
        self.stored = 0  # items whose answers the writer stored and parsed (a prefix of the items)
        self.stop = False  # the calling thread has stopped: the producer ends, the writer empties `pending`
        self.error: BaseException | None = None  # the producer's or the writer's
        self.results: list[list[Answer]] = []

    # -- the calling thread ------------------------------------------------------------------------------------------

    def run(self) -> list[list[Answer]]:
        if not self.items:
            return []
        threads = [
            threading.Thread(target=self._guarded(self._produce), name="answering-prepare", daemon=True),
            threading.Thread(target=self._guarded(self._write), name="answering-store", daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            self._answer_all()
        finally:  # stopped (a signal, the backend's error, another thread's) or done: both threads end before this
            with self.cond:
                self.stop = True
                self.cond.notify_all()
            for thread in threads:
                thread.join()
        return self.results

    def _answer_all(self) -> None:
        recent = _Recent() if self.cache is not None else None  # no cache: no chunk sees another's answers
        answered = 0
        while answered < len(self.items):
            size = max(1, self.chunk_size())
            chunk, oldest = self._take(size)
            if recent is not None:
                recent.forget_through(oldest)
                recent.fill(chunk.found, chunk.prepared, self.work.lookup_keys)
            chunk.asked = self.work.ask(chunk.requests, chunk.prepared, chunk.found)
            if recent is not None:
                recent.add(chunk.end, chunk.asked.stored())
            self._hand_over(chunk)
            answered = chunk.end
            self.on_chunk(len(chunk.requests))
        with self.cond:  # the last chunk stored
            while (self.pending or self.writing) and self.error is None:
                self.cond.wait()
            self._raise_error()

    def _take(self, size: int) -> tuple[_Chunk[P], int]:
        """The next `size` prepared items (fewer at the end), and the fewest items that a lookup not yet read
        (this chunk's, or a later one's) saw stored."""
        with self.cond:
            self.want = 2 * max(size, self.block)
            self.cond.notify_all()
            while self.buffered < size and self.produced < len(self.items) and self.error is None:
                self.cond.wait()
            self._raise_error()
            oldest = min(self.blocks[0].visible, self.stored)  # lookups run in order, each seeing no fewer stored
            requests: list[Request] = []
            prepared: list[P] = []
            found: dict[str, Any] = {}
            start = self.blocks[0].start + self.blocks[0].taken
            while len(requests) < size and self.blocks:
                block = self.blocks[0]
                n = min(size - len(requests), len(block.requests) - block.taken)
                requests += block.requests[block.taken : block.taken + n]
                prepared += block.prepared[block.taken : block.taken + n]
                found.update(block.found)
                block.taken += n
                if block.taken == len(block.requests):
                    self.blocks.popleft()
            self.buffered -= len(requests)
            self.cond.notify_all()
            return _Chunk(start, requests, prepared, found), oldest

    def _hand_over(self, chunk: _Chunk[P]) -> None:
        """To the writer, once the chunk before is stored: one answered chunk at most waits for it."""
        with self.cond:
            while (self.pending or self.writing) and self.error is None:
                self.cond.wait()
            self._raise_error()
            self.pending.append(chunk)
            self.cond.notify_all()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    # -- the other two threads ---------------------------------------------------------------------------------------

    def _guarded(self, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as err:  # noqa: BLE001 -- handed to the calling thread, which raises it
                with self.cond:
                    if self.error is None:
                        self.error = err
                    self.cond.notify_all()

        return run

    def _produce(self) -> None:
        start, total = 0, len(self.items)
        while start < total:
            with self.cond:
                while self.buffered >= self.want and not self.stop:
                    self.cond.wait()
                if self.stop:
                    return
            end = min(total, start + self.block)
            requests = [self.items[i].request for i in range(start, end)]  # a planned job's prompts render here
            prepared = [self.work.prepare(r) for r in requests]
            with self.cond:
                visible = self.stored  # before the lookup: what it finds includes these items' answers
            keys = [k for p in prepared for k in self.work.lookup_keys(p)]
            found = self.cache.get_many(keys) if self.cache is not None else {}
            with self.cond:
                self.blocks.append(_Block(start, requests, prepared, found, visible))
                self.buffered += end - start
                self.produced = end
                self.cond.notify_all()
            start = end

    def _write(self) -> None:
        while True:
            with self.cond:
                while not self.pending and not self.stop:
                    self.cond.wait()
                if not self.pending:
                    return
                chunk = self.pending[0]
                self.writing = True
            assert chunk.asked is not None
            answers = _settle(self.work, chunk.requests, chunk.prepared, chunk.found, chunk.asked, self.cache)
            with self.cond:
                self.pending.popleft()
                self.results.extend(answers)
                self.stored = chunk.end
                self.writing = False
                self.cond.notify_all()
