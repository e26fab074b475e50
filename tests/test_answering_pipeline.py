"""The answering pipeline (src/answering/pipeline.py): while the backend answers chunk k, the producer prepares the
chunks after it and the writer stores chunk k-1, with at most two chunks prepared ahead; an error in any of the three
threads ends the job with that error and no thread left; a job stopped mid-way and run again gives the records of
an uninterrupted run, each answer stored once.

The overlap is asserted by events, not by timing: the backend's call for chunk k waits until it has seen the next
chunk rendered and the one before stored. Done in line, neither could happen while it waits, and the test fails.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import pytest

from src.answering.cache import ResponseCache
from src.answering.items import PlannedItems
from src.answering.trials import answer_items, to_records
from src.backends.base import Request, SamplingParams
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.common.errors import UserError

CHUNK = 4
WAIT_S = 10.0  # how long the backend waits for an event the pipeline owes it: a test that fails, not one that hangs
OVERRUN_S = 0.1  # how long a producer gets to run past its bound: a shorter wait could only miss an overrun
PIPELINE_THREADS = ("answering-prepare", "answering-store")


def planned(n: int, render: Callable[[int, Callable[[int], Request]], Request] | None = None) -> PlannedItems:
    """n one-question items of a simulated job, rendered when read; `render(i, rendered)` stands in for the job's."""
    from omegaconf import OmegaConf

    from src.config.checks import job_spec
    from src.config.compose import compose_job
    from src.core.prompts import PromptTemplate
    from src.core.questions import Question
    from src.job.runner import plan_items

    cfg = compose_job(["model=simulated", "variants=original", "scoring=generate"])
    questions = [
        Question(id=f"q/{i}", question=f"Which one is {i}?", options=(f"{i}", f"{i + 1}", f"{i + 2}"), answer=0)
        for i in range(n)
    ]
    template = PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True))  # type: ignore[arg-type]
    items, _ = plan_items(job_spec(cfg), questions, template)
    if render is not None:
        job_render = items.render
        items = PlannedItems(items.plan, lambda i: render(i, job_render))
    return items


class Events:
    """What each thread did, in order, and waits for what one thread owes another."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rendered: set[int] = set()
        self.stored_chunks = 0
        self.lookups = 0
        self.log: list[tuple[str, int]] = []

    def add(self, what: str, n: int) -> None:
        with self.cond:
            self.log.append((what, n))
            if what == "render":
                self.rendered.add(n)
            if what == "store":
                self.stored_chunks += 1
            if what == "lookup":
                self.lookups += 1
            self.cond.notify_all()

    def wait_for(self, ready: Callable[[], bool]) -> bool:
        with self.cond:
            return self.cond.wait_for(ready, timeout=WAIT_S)


class RecordingCache(ResponseCache):
    def __init__(self, path: Any, events: Events, fail_on_put: BaseException | None = None) -> None:
        super().__init__(path)
        self.events, self.fail_on_put = events, fail_on_put

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        found = super().get_many(keys)
        self.events.add("lookup", len(keys))
        return found

    def put_many(self, items: Any) -> None:
        if self.fail_on_put is not None:
            raise self.fail_on_put
        super().put_many(items)
        self.events.add("store", threading.get_ident())


class WatchedBackend(SimulatedBackend):
    """The simulated backend, whose every call records the thread it came from and what the other threads had done
    by then; `on_call(k)` runs at the start of call k."""

    def __init__(self, on_call: Callable[[int], None] | None = None) -> None:
        super().__init__(SimulatedSettings(success_rate=0.7))
        self.on_call = on_call
        self.calls = 0
        self.threads: set[int] = set()
        self.asked = 0

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        k = self.calls
        self.calls += 1
        self.threads.add(threading.get_ident())
        if self.on_call is not None:
            self.on_call(k)
        self.asked += len(requests)
        return super().generate(requests, params)


def answer(backend: SimulatedBackend, items: Any, cache: Any, n: int = 2) -> list[Any]:
    return answer_items(
        backend,
        items,
        scoring="generate",
        params=SamplingParams(n=n, temperature=0.7),
        cache=cache,
        chunk_size=CHUNK,
        progress=False,
    )


def no_pipeline_thread_left() -> bool:
    return not [t for t in threading.enumerate() if t.name in PIPELINE_THREADS]


@pytest.mark.promise(
    "docs/speed.md", "while the backend answers a chunk, the next chunks are prepared and the one before is stored"
)
def test_while_the_backend_answers_a_chunk_the_next_is_prepared_and_the_previous_stored(tmp_path):
    n_chunks = 6
    events = Events()
    seen: list[tuple[int, bool, bool, int, int]] = []  # (chunk, next rendered, previous stored, furthest, stored)

    def on_call(k: int) -> None:
        nxt = (k + 1) * CHUNK  # the first item of chunk k + 1
        rendered_next = k == n_chunks - 1 or events.wait_for(lambda: nxt in events.rendered)
        stored_previous = k == 0 or events.wait_for(lambda: events.stored_chunks >= k)
        with events.cond:
            seen.append((k, rendered_next, stored_previous, max(events.rendered), events.stored_chunks))

    def render(i: int, job_render: Callable[[int], Request]) -> Request:
        events.add("render", i)
        return job_render(i)

    backend = WatchedBackend(on_call)
    items = planned(n_chunks * CHUNK, render)
    answers = answer(backend, items, RecordingCache(tmp_path / "c.db", events))

    assert len(answers) == n_chunks * CHUNK and backend.calls == n_chunks
    assert [s[0] for s in seen] == list(range(n_chunks))
    assert all(s[1] for s in seen), f"chunk k+1 was not rendered while the backend answered chunk k: {seen}"
    assert all(s[2] for s in seen), f"chunk k-1 was not stored while the backend answered chunk k: {seen}"
    assert backend.threads == {threading.get_ident()}, "the backend is called from the calling thread only"


@pytest.mark.promise("docs/speed.md", "at most two chunks are prepared ahead of the backend, one answered chunk waits")
def test_at_most_two_chunks_are_prepared_ahead_and_one_answered_chunk_waits_to_be_stored(tmp_path):
    n_chunks = 8
    events = Events()
    seen: list[tuple[int, int, int]] = []  # (chunk, the furthest item rendered, chunks stored) as call k starts

    def on_call(k: int) -> None:
        # give the producer every chance to run ahead: wait until it stopped (two chunks ahead) or the job is planned
        ahead = min(n_chunks * CHUNK, (k + 3) * CHUNK) - 1
        events.wait_for(lambda: ahead in events.rendered)
        with events.cond:  # and a moment more, for a producer that would not stop there to go past it
            events.cond.wait_for(lambda: ahead + 1 in events.rendered, timeout=OVERRUN_S)
        with events.cond:
            seen.append((k, max(events.rendered), events.stored_chunks))

    def render(i: int, job_render: Callable[[int], Request]) -> Request:
        events.add("render", i)
        return job_render(i)

    answer(WatchedBackend(on_call), planned(n_chunks * CHUNK, render), RecordingCache(tmp_path / "c.db", events))
    for k, furthest, stored in seen:
        assert furthest < (k + 3) * CHUNK, f"more than chunks k+1 and k+2 prepared while chunk {k} was answered"
        assert stored >= k - 1, f"chunk {k} was asked while two answered chunks waited to be stored"


def test_an_error_in_the_producer_ends_the_job_with_that_error_and_no_thread_left(tmp_path):
    broken = RuntimeError("item 9 cannot be rendered")

    def render(i: int, job_render: Callable[[int], Request]) -> Request:
        if i == 9:
            raise broken
        return job_render(i)

    backend = WatchedBackend()
    with pytest.raises(RuntimeError) as raised:
        answer(backend, planned(6 * CHUNK, render), ResponseCache(tmp_path / "c.db"))
    assert raised.value is broken
    assert backend.calls <= 3, "the backend answered chunks past the one that could not be prepared"
    assert no_pipeline_thread_left()


def test_an_error_in_the_writer_ends_the_job_with_that_error_and_no_thread_left(tmp_path):
    # the content guard's error, as a changed model's files raise it while answers are stored: one line, exit 2
    changed = UserError("model simulated: its weights changed during this run: stopped before storing the answers")
    backend = WatchedBackend()
    with pytest.raises(UserError) as raised:
        answer(backend, planned(6 * CHUNK), RecordingCache(tmp_path / "c.db", Events(), fail_on_put=changed))
    assert raised.value is changed
    assert backend.calls <= 2, "the backend answered on after the first chunk could not be stored"
    assert no_pipeline_thread_left()


def test_the_backends_error_ends_the_job_with_it_once_the_answered_chunks_are_stored(tmp_path):
    stop_at = 3
    failed = RuntimeError("CUDA error: an illegal memory access was encountered")

    def on_call(k: int) -> None:
        if k == stop_at:
            raise failed

    cache = ResponseCache(tmp_path / "c.db")
    with pytest.raises(RuntimeError) as raised:
        answer(WatchedBackend(on_call), planned(6 * CHUNK), cache, n=1)
    assert raised.value is failed
    assert no_pipeline_thread_left()
    assert len(cache) == stop_at * CHUNK, "the chunks answered before the error were stored, no more"


@pytest.mark.promise("docs/speed.md", "a job stopped mid-way and run again gives the same records, each answer once")
def test_a_job_stopped_mid_way_and_run_again_gives_the_uninterrupted_records_each_answer_stored_once(tmp_path):
    n_items, reps, stop_at = 7 * CHUNK + 2, 3, 4

    def on_call(k: int) -> None:
        if k == stop_at:
            raise KeyboardInterrupt  # as SIGTERM and Ctrl-C stop a job: raised in the calling thread

    cache = ResponseCache(tmp_path / "c.db")
    with pytest.raises(KeyboardInterrupt):
        answer(WatchedBackend(on_call), planned(n_items), cache, n=reps)
    kept = len(cache)
    assert kept == stop_at * CHUNK * reps
    assert no_pipeline_thread_left()

    rerun = WatchedBackend()
    items = planned(n_items)
    resumed = to_records(items, answer(rerun, items, cache, n=reps), run_info={"scoring": "generate"})
    assert rerun.asked == n_items - stop_at * CHUNK, "the rerun asked only what the stopped job had not stored"
    assert len(cache) == n_items * reps, "every answer stored once"
    assert resumed.cache_hit.sum() == kept

    fresh = planned(n_items)
    fresh_answers = answer(WatchedBackend(), fresh, ResponseCache(tmp_path / "fresh.db"), n=reps)
    uninterrupted = to_records(fresh, fresh_answers, run_info={"scoring": "generate"})
    assert len(resumed) == n_items * reps
    assert not resumed.duplicated(["question_id", "variant_id", "repetition"]).any()
    pd.testing.assert_frame_equal(
        resumed.drop(columns=["cache_hit", "scoring"], errors="ignore"),
        uninterrupted.drop(columns=["cache_hit", "scoring"], errors="ignore"),
    )


def test_a_chunk_sees_the_answers_an_earlier_chunk_of_the_job_computed(tmp_path):
    """The same prompt twice in a job, in chunks far enough apart that the producer may look the second up before
    the first's answer is stored: the backend is asked it once, and both items get the same answers."""
    n_items = 5 * CHUNK
    twin = CHUNK + 1  # item 0's prompt again, one chunk on: looked up ahead, while chunk 0 is still answered

    def render(i: int, job_render: Callable[[int], Request]) -> Request:
        return job_render(0 if i == twin else i)

    asked: list[str] = []
    events = Events()

    def on_call(k: int) -> None:
        if k == 0:  # the twin's chunk looked up before chunk 0 is answered, so before its answers are stored
            assert events.wait_for(lambda: events.lookups >= 2), "the producer did not look up chunk 1 ahead"

    class Counting(WatchedBackend):
        def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
            asked.extend(r.prompt for r in requests)
            return super().generate(requests, params)

    items = planned(n_items, render)
    answers = answer(Counting(on_call), items, RecordingCache(tmp_path / "c.db", events))
    assert asked.count(items[0].request.prompt) == 1
    assert [a.raw_output for a in answers[twin]] == [a.raw_output for a in answers[0]]
    assert all(a.cache_hit for a in answers[twin])
