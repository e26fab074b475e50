"""What state a Slurm job is in, for the sweep's Slurm launcher (hydra_plugins/mcq_slurm_launcher.py),
whether or not the cluster keeps accounting.

submitit asks `sacct` only, and reads a job it gets no state for as still running: where `sacct` fails (no
slurmdbd) a cancelled or lost job is waited for forever. `QueueWatcher` asks `squeue` about those jobs.

The one module of src that names submitit's private API: the watcher's state (`_info_dict`, `_registered`,
`_finished`), which its subclass must fill for submitit's own `get_state` and `is_done` to read the answer (submitit
has no public hook for another source of job states). Importing it checks the installed submitit against
`SUPPORTED` (pyproject.toml pins the same range; one `warning:` line when outside, src/common/versions.py).
"""

from __future__ import annotations

import logging
import subprocess

from submitit.slurm.slurm import SlurmInfoWatcher

from src.common import versions

ADAPTER = "src/sweep/slurm_queue.py"
SUPPORTED = ">=1.5,<1.6"  # checked with 1.5.4

log = logging.getLogger(__name__)

STATE_POLL_S = 30  # the longest wait between two looks at the queue (submitit's own: 10 minutes)
SQUEUE_TIMEOUT_S = 60  # an squeue that has not answered by then is given up on, until the next look
LEFT_QUEUE = "LEFT_QUEUE"  # no accounting, and squeue no longer lists the job (MinJobAge has passed)


class QueueWatcher(SlurmInfoWatcher):
    """submitit's Slurm watcher (sacct), asking `squeue` about the jobs sacct has no state for: without
    accounting (sacct fails) `squeue -t all` still names a finished job's state for MinJobAge (300 s by default),
    and a job it no longer lists has left the queue (`LEFT_QUEUE`)."""

    _from_queue: set[str] = set()  # jobs whose state came from squeue, asked again at the next update

    def update(self) -> None:
        for job_id in self._from_queue - self._finished:  # sacct's answer, when it gives one, wins
            self._info_dict.pop(job_id, None)
        self._from_queue: set[str] = set()
        super().update()
        unseen = {j for j in self._registered - self._finished if not self._info_dict.get(j, {}).get("State")}
        if not unseen:
            return
        arrays = sorted({j.split("_")[0] for j in unseen})
        try:  # -r: one line per array task; -t all: finished jobs too
            out = subprocess.run(
                ["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-j", ",".join(arrays)],
                capture_output=True,
                text=True,
                timeout=SQUEUE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            log.warning("squeue: %s; job states may be late", err)
            return
        listed = dict(line.split("|", 1) for line in out.stdout.splitlines() if "|" in line)
        if out.returncode != 0 and "Invalid job id" not in out.stderr:  # the controller did not answer
            log.warning("squeue: %s; job states may be late", out.stderr.strip()[:200])
            return
        for job_id in unseen:
            self._info_dict[job_id] = {"State": listed.get(job_id, LEFT_QUEUE)}
            self._from_queue.add(job_id)
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)


versions.warn_if_outside("submitit", SUPPORTED, ADAPTER)
