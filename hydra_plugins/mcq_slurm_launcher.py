"""hydra-submitit-launcher's Slurm launcher, with what a sweep needs when Slurm cancels, preempts or loses a job.

conf/hydra/launcher/slurm_gpu.yaml and slurm_cpu.yaml select it (`_target_`); every `submitit_slurm` key works
as before. What it changes, and why:

- In the job (`__call__`): submitit's job process ignores SIGTERM (it logs "Bypassing signal SIGTERM") and
  answers the time-limit signal (USR2, `signal_delay_s` before the limit) by requeueing at once. Here SIGTERM
  (`scancel`, `scontrol requeue`, a preemption) ends the job as Ctrl-C does in a one-process sweep (src/sweep/state.py's
  handler): its run is marked KILLED and its outcome written; the response cache already holds every answered
  chunk. USR2 does the same, then hands over to submitit's own handler, which checkpoints (this launcher's
  `checkpoint`, the plugin's: the same job again) and requeues it; the requeued job resumes from the cache.
- In the submitting process (`launch`): the plugin waits with `job.results()` on each job in turn, which raises
  at the first job that ended without a result (the jobs after it are never reported) and, where `sacct` has no
  accounting database to ask, waits forever (submitit reads a job it cannot see as still running). Here every
  job is watched at once by src/sweep/slurm_queue.py's `QueueWatcher`: `sacct` every `STATE_POLL_S` at most, `squeue`
  for the jobs sacct does not know. A job that ended without a result is one `error: job #N (...)` line naming its
  Slurm state, a record for the sweep's summary, and the sweep goes on: reported within STATE_POLL_S + 15 s
  (submitit's wait for a late result file) of leaving the queue.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from hydra.core.utils import JobReturn, JobStatus

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

if TYPE_CHECKING:
    from submitit import Job

log = logging.getLogger(__name__)


class _Preempted(KeyboardInterrupt):
    """The time-limit/preemption signal, raised in the job's code: it unwinds as Ctrl-C does (run KILLED, outcome
    written) before submitit checkpoints and requeues."""


def _preempted(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Preempted


class TrackedSlurmLauncher(SlurmLauncher):
    def __call__(
        self, sweep_overrides: list[str], job_dir_key: str, job_num: int, job_id: str, singleton_state: dict[Any, Any]
    ) -> JobReturn:
        """One sweep job in its Slurm job's process (submitit has set its signal handlers). `singleton_state`:
        Hydra's `Singleton.get_state()`, keyed by str (the plugin's `__call__` says `dict[type, Singleton]`)."""
        from submitit import JobEnvironment

        from src.sweep.state import interrupt_on_sigterm  # local: Slurm sweeps only

        usr = getattr(signal, f"SIG{JobEnvironment.USR_SIG}")  # submitit's preemption signal (SUBMITIT_PREEMPT_SIGNAL)
        submitit_term, submitit_usr = signal.getsignal(signal.SIGTERM), signal.getsignal(usr)
        signal.signal(signal.SIGTERM, interrupt_on_sigterm)
        signal.signal(usr, _preempted)
        try:
            ran: JobReturn = super().__call__(sweep_overrides, job_dir_key, job_num, job_id, singleton_state)
            return ran
        except _Preempted:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # `scontrol requeue` below sends one to this process
            assert callable(submitit_usr)  # submitit's handler: set before the job started
            submitit_usr(usr, None)  # checkpoint (self.checkpoint), `scontrol requeue`, exit
            raise
        finally:  # once the job has its result, submitit's handlers again: a late signal must not lose it
            if signal.getsignal(signal.SIGTERM) is interrupt_on_sigterm:
                signal.signal(signal.SIGTERM, submitit_term)
            signal.signal(usr, submitit_usr)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit the jobs as one Slurm array (as the plugin does) and wait for all of them at once."""
        import submitit
        from hydra.core.singleton import Singleton
        from hydra.core.utils import filter_overrides
        from omegaconf import OmegaConf

        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        assert self.config is not None and job_overrides
        init_keys = {"max_num_timeout", "submitit_folder"}
        executor = submitit.AutoExecutor(
            cluster=self._EXECUTOR,
            folder=self.params["submitit_folder"],
            slurm_max_num_timeout=self.params.get("max_num_timeout", 0),
        )
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{k if k in base else f"{self._EXECUTOR}_{k}": v for k, v in self.params.items() if k not in init_keys}
        )
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        nums = [initial_job_idx + i for i in range(len(job_overrides))]
        for num, overrides in zip(nums, job_overrides):
            log.info("\t#%d : %s", num, " ".join(filter_overrides(overrides)))
        state = Singleton.get_state()
        jobs = executor.map_array(
            self,
            [list(o) for o in job_overrides],
            ["hydra.sweep.dir"] * len(nums),
            nums,
            [f"job_id_for_{n}" for n in nums],
            [state] * len(nums),
        )
        from src.sweep.slurm_queue import STATE_POLL_S, QueueWatcher  # local: Slurm sweeps only

        watcher = QueueWatcher(delay_s=STATE_POLL_S)
        for job in jobs:
            job.watcher = watcher  # this sweep's jobs only; submitit's other jobs keep its shared watcher
        returns: dict[int, JobReturn] = {}
        while len(returns) < len(jobs):
            for i, job in enumerate(jobs):
                if i not in returns and job.done():
                    returns[i] = self._collect(job, nums[i], list(job_overrides[i]))
            time.sleep(1)
        return [returns[i] for i in range(len(jobs))]

    def _collect(self, job: Job[JobReturn], num: int, overrides: list[str]) -> JobReturn:
        """The job's JobReturn; for a job that ended without one, its error line and outcome record."""
        from submitit.core.utils import FailedJobError, UncompletedJobError

        from src.sweep.slurm_queue import LEFT_QUEUE  # local: Slurm sweeps only

        try:
            return job.result()
        except (UncompletedJobError, FailedJobError) as err:
            slurm_state = job.watcher.get_state(job.job_id, mode="cache")
            how = "ended" if isinstance(err, FailedJobError) else "ended without a result"
            self._lost(
                num,
                overrides,
                f"Slurm job {job.job_id} {how} ({slurm_state}); its log: {job.paths.stderr}",
                status="killed"
                if slurm_state.startswith(("CANCELLED", "PREEMPTED", "TIMEOUT", "NODE_FAIL", LEFT_QUEUE))
                else "failed",
            )
            return JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=None)

    def _lost(self, num: int, overrides: list[str], what: str, *, status: str) -> None:
        """One line and the outcome record of job #num, which ended outside its own error handling."""
        from src.sweep.callback import report_lost_job  # local: Slurm sweeps only

        assert self.config is not None  # launch() checked it
        report_lost_job(self.config, self.hydra_context, num, overrides, what, status=status)
