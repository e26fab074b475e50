"""The response cache that many nodes share (`cache.shared=true`): each job writes its own chunk files, published
by an atomic rename, and lookups read them all; correct with no file lock at all, as on a network filesystem
whose locks do not work."""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from src.answering.cache import SharedResponseCache


def no_locks(*args, **kwargs):
    raise OSError(errno.ENOLCK, "No locks available")  # what an NFS mount without a lock daemon answers


def writer(folder: str, k: int, chunks: int, size: int) -> None:
    """One job on its own node: fcntl's locks and SQLite fail there; it stores `chunks` chunks, some keys shared
    with the other writers (the same prompt asked by two jobs: both compute the same answer), and reads as it goes."""
    fcntl.flock = fcntl.lockf = no_locks
    sqlite3.connect = no_locks
    cache = SharedResponseCache(folder)
    for c in range(chunks):
        cache.put_many(
            [(f"own-{k}-{c}-{i}", [k, c, i]) for i in range(size)]
            + [(f"shared-{c}-{i}", ["same", c, i]) for i in range(3)]
        )
        seen = cache.get_many([f"own-{k}-{c}-0", f"shared-{c}-0"])
        assert seen[f"own-{k}-{c}-0"] == [k, c, 0] and seen[f"shared-{c}-0"] == ["same", c, 0]
    cache.close()


@pytest.mark.promise(
    "docs/clusters.md", "the shared cache: six writers and a reader with every file lock failing find every answer once"
)
def test_writers_on_many_nodes_share_the_cache_with_no_lock(tmp_path, monkeypatch):
    folder = str(tmp_path / "shared")
    writers, chunks, size = 6, 40, 25
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=writer, args=(folder, k, chunks, size)) for k in range(writers)]
    for p in procs:
        p.start()
    reader = SharedResponseCache(folder)
    while any(p.is_alive() for p in procs):  # a job reading while they write sees only whole chunks
        seen = len(reader)
        assert all(
            len(reader.get_many([f"own-{k}-{c}-{i}" for i in range(size)])) in (0, size)
            for k in range(writers)
            for c in range(chunks)
        )
        assert len(reader) >= seen
    for p in procs:
        p.join()
        assert p.exitcode == 0
    monkeypatch.setattr(fcntl, "flock", no_locks)
    fresh = SharedResponseCache(folder)
    keys = [f"own-{k}-{c}-{i}" for k in range(writers) for c in range(chunks) for i in range(size)]
    found = fresh.get_many(keys)
    assert len(found) == len(keys) and all(
        found[f"own-{k}-{c}-{i}"] == [k, c, i] for k in range(writers) for c in range(chunks) for i in range(size)
    )
    assert len(fresh) == len(keys) + 3 * chunks  # every shared key once
    assert not [n for n in os.listdir(tmp_path / "shared" / "chunks") if n.startswith(".")]  # no partial chunk


@pytest.mark.promise(
    "docs/clusters.md", "no reader of the shared cache sees part of a chunk; no temporary file is left"
)
def test_a_writer_killed_mid_chunk_leaves_no_part_of_it(tmp_path):
    """A chunk is readable only once renamed: a temporary file of a dead process is never read, and removed."""
    cache = SharedResponseCache(tmp_path)
    cache.put_many([("a", 1)])
    from src.common import owners

    dead = fork_and_exit()
    partial = tmp_path / "chunks" / f".x.jsonl.tmp-{owners.host()}-{dead}-abcd"
    partial.write_text("b\t2\n")  # half of a chunk its killed writer never renamed
    fresh = SharedResponseCache(tmp_path)
    assert fresh.get_many(["a", "b"]) == {"a": 1} and not partial.exists()


def fork_and_exit() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


@pytest.mark.promise("docs/clusters.md", "a job on cache.shared=true resumes from the shared cache")
def test_a_job_with_the_shared_cache_resumes_from_it(run_job_in, tmp_path):
    folder = tmp_path / "nfs-cache"
    job = ["model=simulated", "limit=4", "variants=cora", "cache.shared=true", f"cache.path={folder}", "resume=false"]
    first = run_job_in(*job)
    again = run_job_in(*job)
    assert first.metrics["cache_hit_rate"] == 0 and again.metrics["cache_hit_rate"] == 1
    assert again.metrics["mcqa"] == pytest.approx(first.metrics["mcqa"], abs=1e-12)


def test_a_shared_cache_path_that_is_a_file_is_refused(run_job_in, tmp_path):
    from src.common.errors import UserError

    (tmp_path / "responses.db").write_text("")
    with pytest.raises(UserError, match="cache.shared=true give the shared cache's folder"):
        run_job_in("model=simulated", "limit=2", "cache.shared=true", f"cache.path={tmp_path}/responses.db")


def conflicting_writer(folder: str, k: int, keys: int, out) -> None:
    """A job that stores its own answer for every key (the same keys as the other job, other values: a sampled
    answer computed twice), reading the cache between its chunks; then what it resolves every key to."""
    cache = SharedResponseCache(folder)
    for start in range(0, keys, 5):
        cache.put_many([(f"key-{i}", [k, i]) for i in range(start, start + 5)])
        cache.get_many([f"key-{start}"])
    out.put((k, cache.get_many([f"key-{i}" for i in range(keys)])))


@pytest.mark.promise("docs/clusters.md", "two processes storing different answers for one key resolve it to one value")
def test_two_processes_on_one_shared_cache_agree_on_every_key(tmp_path):
    """The first answer published for a key is the one every reader gets, its publisher included, whatever the
    names of the processes' chunks (docs/configuration.md, cache.shared)."""
    folder, keys = str(tmp_path / "shared"), 200
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    procs = [fork.Process(target=conflicting_writer, args=(folder, k, keys, out)) for k in range(2)]
    for p in procs:
        p.start()
    seen = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    later = SharedResponseCache(folder).get_many([f"key-{i}" for i in range(keys)])
    assert len(later) == keys
    assert seen[0] == later and seen[1] == later


def test_a_cache_path_with_home_and_variables_is_expanded(tmp_path, monkeypatch):
    from src.answering.cache import open_cache

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CACHE_ROOT", str(tmp_path / "root"))
    monkeypatch.chdir(tmp_path)
    open_cache("~/c.db").close()
    open_cache("$CACHE_ROOT/shared", shared=True).put_many([("k", 1)])
    assert (tmp_path / "home" / "c.db").is_file() and not (tmp_path / "~").exists()
    assert open_cache("${CACHE_ROOT}/shared", shared=True).get_many(["k"]) == {"k": 1}


def test_the_response_cache_returns_every_stored_key_across_its_lookup_chunks(tmp_path):
    """The SQLite response cache (`ResponseCache.get_many`) looks keys up 500 at a time (SQLite's bound-parameter
    limit): every key stored is found, the first chunk's, the last partial chunk's and those between (mutation run
    12: a chunk bound `start - 500` found none, and every job silently answered again)."""
    from src.answering.cache import ResponseCache

    cache = ResponseCache(tmp_path / "cache.db")
    stored = {f"key-{i}": [i, "answer"] for i in range(1203)}
    cache.put_many(stored.items())
    assert cache.get_many(list(stored) + ["absent"]) == stored
    cache.close()


@pytest.mark.promise(
    "docs/clusters.md", "chunks of an older version of the shared cache are read once, when a job opens it"
)
def test_an_older_versions_chunks_are_read_once_and_unfinished_writes_never(tmp_path):
    """A shared cache written by the version before numbered chunks (`<anything>.jsonl`) is read when it opens; a
    write that never finished (a dot-file) is not an answer (a mutant: either `not` of that rule dropped)."""
    chunks = tmp_path / "shared" / "chunks"
    chunks.mkdir(parents=True)
    (chunks / "job-a-0001.jsonl").write_text('old\t["from the older version"]\n', encoding="utf-8")
    (chunks / ".tmp-unfinished.jsonl").write_text('half\t["never published"]\n', encoding="utf-8")
    cache = SharedResponseCache(tmp_path / "shared")
    assert cache.get_many(["old", "half"]) == {"old": ["from the older version"]}
    cache.put_many([("new", ["published"])])
    assert SharedResponseCache(tmp_path / "shared").get_many(["old", "new"]) == {
        "old": ["from the older version"],
        "new": ["published"],
    }


def test_the_response_cache_makes_its_folders_and_opens_again(tmp_path):
    """A cache path in folders that do not exist yet is made (the first job of a new `cache.path`); a later job opens
    the same file and finds its answers (a mutant: `mkdir` without `parents` or without `exist_ok`)."""
    from src.answering.cache import ResponseCache

    first = ResponseCache(tmp_path / "new" / "deeper" / "cache.db")
    first.put_many([("key", ["answer"])])
    first.close()
    again = ResponseCache(tmp_path / "new" / "deeper" / "cache.db")
    assert again.get_many(["key"]) == {"key": ["answer"]}
    again.close()


def test_a_cache_a_parallel_job_holds_locked_is_waited_for_with_growing_pauses(tmp_path, monkeypatch):
    """A parallel job holding the new cache file's lock while this one sets it up: each attempt that finds it locked
    waits 50 ms longer than the one before (0.05, 0.1, 0.15 s, ...: 20 attempts wait 10.5 s in all), and the setup
    goes on once the lock is released (a mutant: the pauses started at 0.1 s)."""
    from src.answering import cache as cache_module

    path = tmp_path / "cache.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # the other job's setup, in SQLite's rollback journal before WAL is on
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 3:
            holder.execute("COMMIT")

    monkeypatch.setattr(cache_module.time, "sleep", sleep)
    cache = cache_module.ResponseCache(path, timeout_s=0)  # SQLite's own busy wait off: only the retries wait
    assert pauses == pytest.approx([0.05, 0.10, 0.15], abs=1e-12)
    cache.put_many([("key", ["answer"])])
    assert cache.get_many(["key"]) == {"key": ["answer"]}
    cache.close()
    holder.close()


def test_an_older_versions_answer_published_first_wins_over_a_numbered_chunks(tmp_path):
    """The first answer published for a key wins: an older version's chunk (named `<host>-<pid>-...jsonl`) was
    published before any numbered one, so it is read first, although `0...0.jsonl` sorts before its name (a mutant:
    numbered chunks taken for an older version's and read at open, in name order)."""
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    (chunks / "node-7-00001.jsonl").write_text('k\t["first"]\n', encoding="utf-8")  # as long as a numbered name
    (chunks / "000000000000.jsonl").write_text('k\t["later"]\nn\t["numbered"]\n', encoding="utf-8")
    assert SharedResponseCache(tmp_path).get_many(["k", "n"]) == {"k": ["first"], "n": ["numbered"]}


@pytest.mark.promise(
    "docs/clusters.md", "a chunk that shows late on a node is read later, in its place, never a wrong answer"
)
def test_a_chunk_number_another_node_took_is_read_in_its_place_even_when_it_shows_late(tmp_path, monkeypatch):
    """Another node publishes chunk 0 between this job's look and its link: the link fails, and the chunk is not
    yet visible here (an NFS attribute cache). The job waits, reads that chunk in its place, and publishes as 1;
    moving on without reading it would leave the other node's answers unread by this process."""
    from src.answering import cache as cache_module

    mine, other = SharedResponseCache(tmp_path), SharedResponseCache(tmp_path)
    real_link, real_read = os.link, mine._read_chunk
    hidden, pauses = [], []

    def link(source, target):
        if not hidden:  # the other node's publication lands just before this job's link
            hidden.append(Path(target))
            other.put_many([("theirs", ["the other node's"])])
        real_link(source, target)

    def read_chunk(path):
        if hidden and path == hidden[0] and not pauses:
            return False  # published, but not visible here yet
        return real_read(path)

    monkeypatch.setattr(cache_module.os, "link", link)
    monkeypatch.setattr(mine, "_read_chunk", read_chunk)
    monkeypatch.setattr(cache_module.time, "sleep", pauses.append)
    mine.put_many([("mine", ["this job's"])])
    assert pauses == [0.05]
    assert mine.get_many(["theirs", "mine"]) == {"theirs": ["the other node's"], "mine": ["this job's"]}
    assert sorted(p.name for p in (tmp_path / "chunks").iterdir()) == ["000000000000.jsonl", "000000000001.jsonl"]
