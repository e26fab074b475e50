"""src/sweep/slurm_queue.py's QueueWatcher, submitit's own Slurm watcher with squeue asked about what sacct cannot tell,
against stand-in `sacct` and `squeue` commands on PATH: a cluster without accounting (sacct fails) still sees a
cancelled job end, and a job that has left the queue without a trace is reported, not waited for forever."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from src.sweep.slurm_queue import LEFT_QUEUE, QueueWatcher

NO_ACCOUNTING = "echo 'sacct: error: Slurm accounting storage is disabled' >&2; exit 1"


@pytest.fixture
def commands(tmp_path, monkeypatch):
    """commands(sacct=SCRIPT, squeue=SCRIPT): bash bodies for the two commands; each call is logged to calls.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def write(**bodies: str) -> Path:
        for name, body in bodies.items():
            path = bin_dir / name
            path.write_text(f'#!/usr/bin/env bash\necho {name} "$@" >> {tmp_path}/calls.log\n{body}\n')
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return tmp_path / "calls.log"

    return write


@pytest.mark.promise("docs/clusters.md", "without accounting, squeue -t all names a cancelled task's state")
def test_without_accounting_squeue_names_a_cancelled_task(commands):
    calls = commands(sacct=NO_ACCOUNTING, squeue="printf '7_0|RUNNING\\n7_1|CANCELLED\\n'")
    watcher = QueueWatcher(delay_s=30)
    watcher.register_job("7_0")
    assert watcher.is_done("7_1", mode="force") and watcher.get_state("7_1", mode="cache") == "CANCELLED"
    assert not watcher.is_done("7_0", mode="cache") and watcher.get_state("7_0", mode="cache") == "RUNNING"
    assert "squeue -h -r -t all -o %i|%T -j 7" in calls.read_text()


@pytest.mark.promise("docs/clusters.md", "without accounting, a job squeue no longer lists is reported as LEFT_QUEUE")
def test_a_task_squeue_no_longer_lists_has_left_the_queue(commands):
    commands(sacct=NO_ACCOUNTING, squeue="printf '7_0|RUNNING\\n'")
    watcher = QueueWatcher(delay_s=30)
    assert not watcher.is_done("7_0", mode="force")
    assert watcher.is_done("7_2", mode="force") and watcher.get_state("7_2", mode="cache") == LEFT_QUEUE


def test_a_running_task_is_asked_about_again_at_each_update(commands):
    """squeue's RUNNING is not kept as if sacct had said it: the next look sees the task gone."""
    commands(sacct=NO_ACCOUNTING, squeue="printf '7_0|RUNNING\\n'")
    watcher = QueueWatcher(delay_s=30)
    assert not watcher.is_done("7_0", mode="force")
    commands(squeue="echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1")  # MinJobAge has passed
    assert watcher.is_done("7_0", mode="force") and watcher.get_state("7_0", mode="cache") == LEFT_QUEUE


def test_an_unreachable_controller_is_not_a_lost_job(commands):
    commands(sacct=NO_ACCOUNTING, squeue="echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1")
    watcher = QueueWatcher(delay_s=30)
    assert not watcher.is_done("7_0", mode="force") and watcher.get_state("7_0", mode="cache") == "UNKNOWN"


def test_a_hanging_squeue_is_given_up_on_after_its_timeout_and_is_not_a_lost_job(commands, monkeypatch, caplog):
    import time

    from src.sweep import slurm_queue

    monkeypatch.setattr(slurm_queue, "SQUEUE_TIMEOUT_S", 0.5)
    commands(sacct=NO_ACCOUNTING, squeue="exec sleep 30")  # a controller that never answers
    watcher = QueueWatcher(delay_s=30)
    start = time.monotonic()
    assert not watcher.is_done("7_0", mode="force") and watcher.get_state("7_0", mode="cache") == "UNKNOWN"
    assert time.monotonic() - start < 10  # the sweep goes on; the job is asked about again at the next look
    assert "job states may be late" in caplog.text


def test_with_accounting_sacct_answers_and_squeue_is_not_asked(commands):
    calls = commands(
        sacct="printf 'JobID|State|NodeList\\n7_0|COMPLETED|vm\\n7_1|CANCELLED by 0|vm\\n'", squeue="exit 3"
    )
    watcher = QueueWatcher(delay_s=30)
    watcher.register_job("7_0")
    assert watcher.is_done("7_1", mode="force") and watcher.get_state("7_1", mode="cache") == "CANCELLED by 0"
    assert watcher.is_done("7_0", mode="cache")
    assert "squeue" not in calls.read_text()


@pytest.mark.promise("docs/clusters.md", "the submitting process asks Slurm about its jobs every 30 s at most")
def test_the_watcher_looks_at_least_every_state_poll(commands):
    """submitit's watcher waits up to its delay_s between two looks (10 minutes for Slurm jobs); ours at most 30 s."""
    from src.sweep.slurm_queue import STATE_POLL_S

    commands(sacct=NO_ACCOUNTING, squeue="printf '7_0|RUNNING\\n'")
    watcher = QueueWatcher(delay_s=STATE_POLL_S)
    watcher.is_done("7_0", mode="force")
    watcher._start_time -= 3600  # an hour after the last job was registered
    watcher._last_status_check -= STATE_POLL_S + 1
    calls_before = watcher.num_calls
    watcher.is_done("7_0")
    assert watcher.num_calls == calls_before + 1 and STATE_POLL_S <= 30
