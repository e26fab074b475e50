"""Runs of dead jobs: a live job's heartbeat, whether the process that made a RUNNING run is gone, and those runs
marked KILLED (by the rerun of the job, and by a sweep at its end for its own jobs)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from src.common import owners
from src.tracking import store

log = logging.getLogger(__name__)

HEARTBEAT_S = 30.0  # a live job refreshes its run's `heartbeat` tag this often


STALE_S = 180.0  # a run of another host whose heartbeat is older than this is taken for dead


def provably_dead(tags: Mapping[str, str], *, now: float | None = None) -> bool:
    """Whether the process that made a RUNNING run is gone: its `owner` (src/common/owners.py) is a process of this host
    that no longer runs, or, for another host, its `heartbeat` (epoch seconds) is older than STALE_S. A run
    without an owner (logged before owners were tagged) is taken for dead, as it always was.

    >>> from src.common import owners
    >>> provably_dead({"owner": owners.this_owner(), "heartbeat": "0"})
    False
    >>> provably_dead({"owner": "elsewhere:1", "heartbeat": str(time.time())}), provably_dead({"owner": "elsewhere:1"})
    (False, True)
    """
    owner = tags.get("owner")
    if owners.parse_owner(owner) is None:
        return True
    alive = owners.is_alive(owner)
    if alive is not None:
        return not alive
    try:
        beat = float(tags.get("heartbeat", "nan"))
    except ValueError:
        return True
    return not ((now if now is not None else time.time()) - beat <= STALE_S)


def mark_interrupted_runs(client: store.Client, experiment: str, job_hash: str) -> None:
    """Runs of this job left RUNNING by a process that is provably dead are marked KILLED, so the UI shows what
    happened; the rerun that calls this resumes their work from the response cache. A run whose process still
    lives (the same command started twice) is left alone: this job makes a run of its own beside it."""
    mark_dead_runs(client, experiment, f"tags.config_hash = '{job_hash}'")


def mark_dead_runs(client: store.Client, experiment: str, which: str) -> list[str]:
    """The RUNNING runs of `experiment` that the filter `which` selects and whose process is provably dead, marked
    KILLED (tag `interrupted=true`); their ids. A sweep calls it at its end for its own job runs
    (`tags.sweep_id = ...`): a job whose process was killed outright (SIGKILL, out of memory, its node lost) leaves
    no run RUNNING."""
    marked: list[str] = []
    for run in store.search_all(client, [experiment], f"{which} and attributes.status = 'RUNNING'"):
        if not provably_dead(run.data.tags):
            log.info("run %s is still running (owner %s): left as it is", run.info.run_id, run.data.tags.get("owner"))
            continue
        client.set_tag(run.info.run_id, "interrupted", "true")
        client.set_terminated(run.info.run_id, "KILLED")
        marked.append(run.info.run_id)
    return marked
