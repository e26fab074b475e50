"""hydra-ray-launcher's launcher (`ray`), with what a sweep needs on a running Ray cluster.

conf/hydra/launcher/ray_cluster.yaml selects it (`_target_`); its `ray.init` and `ray.remote` keys are the plugin's,
passed to `ray.init(...)` and `ray.remote(...)`. What it changes, and why:

- Joining a running cluster: the plugin always adds `object_store_memory` to `ray.init`, which Ray (2.40 and
  later) refuses when it connects to an existing cluster ("object_store_memory must not be provided"). Here
  nothing is added. A cluster that does not answer is one `error:` line naming the address, exit 2 (`ray.init`
  alone retries for minutes).
- The submitting process: `ray.init` replaces its SIGTERM handler with one that exits at once; the project's
  (src/sweep/state.py: the sweep stops, its parent run is marked KILLED) is put back.
- Waiting: the plugin calls `ray.get` on each job in turn, which raises at the first job whose worker died (the
  jobs after it are never reported, the sweep ends in a traceback). Here every job is waited for at once; a job
  that ended without a result (its worker killed or out of memory, its node lost) is one `error: job #N (...)`
  line naming Ray's error, a record for the sweep's summary, and the sweep goes on. Its run, left RUNNING by the
  killed process, is marked KILLED at the end of the sweep (src/sweep/callback.py); the same command again
  resumes it from the response cache.

The module imports nothing of the `ray` extra at its top: Hydra's plugin scan and pytest's doctest collection import
every module here, also where the extra is absent (then `hydra/launcher=ray_cluster` is refused in one line before
the sweep starts: LAUNCHER_EXTRAS in src/config/command_line.py). So the class derives from Hydra's `Launcher` and takes
the plugin's constructor and `setup` (hydra-ray-launcher's `RayLauncher` adds nothing else: its `launch` is the one
replaced here). Each job runs in its Ray worker through `run_job_in_worker`, which does what the plugin's own (private)
helper does, with Hydra's public API.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from src.config import plain_dict

log = logging.getLogger(__name__)

# Ray's errors for a task that ended without a result through no fault of its own code
KILLED_ERRORS = (
    "WorkerCrashedError",
    "NodeDiedError",
    "OutOfMemoryError",
    "TaskCancelledError",
    "ObjectLostError",
    "OwnerDiedError",
    "LocalRayletDiedError",
)


def run_job_in_worker(
    *,
    hydra_context: HydraContext,
    sweep_config: DictConfig,
    task_function: TaskFunction,
    singleton_state: dict[str, Any],
) -> JobReturn:
    """One sweep job in a Ray worker: Hydra's state of the submitting process (its singletons: config search path,
    job runtime) set, then Hydra's `run_job`, as hydra-ray-launcher 1.2.2's job helper does it."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals

    setup_globals()
    Singleton.set_state(singleton_state)
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=sweep_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


class TrackedRayLauncher(Launcher):
    def __init__(self, ray: DictConfig) -> None:
        """`ray`: the plugin's `ray` node (`init`, `remote`), as hydra-ray-launcher's `RayLauncher` takes it."""
        self.ray_cfg = ray
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Start every job as one Ray task (as the plugin does) and wait for all of them at once."""
        import ray  # local: the ray extra (see the module's docstring)
        from hydra.core.singleton import Singleton
        from hydra.core.utils import configure_log, filter_overrides, setup_globals
        from omegaconf import open_dict

        setup_globals()
        assert self.config is not None and self.hydra_context is not None and job_overrides
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        self._connect(ray, plain_dict(self.ray_cfg.init) or {})
        nums = [initial_job_idx + i for i in range(len(job_overrides))]
        refs = []
        for num, overrides in zip(nums, job_overrides):
            log.info("\t#%d : %s", num, " ".join(filter_overrides(overrides)))
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = f"job_id_for_{num}"
                sweep_config.hydra.job.num = num
            remote = plain_dict(self.ray_cfg.remote) or {}
            # Any: Ray's overloads of `remote` type a task by its positional parameters, and this one takes keywords
            as_task: Any = ray.remote(**remote) if remote else ray.remote
            job = as_task(run_job_in_worker)
            refs.append(
                job.remote(
                    hydra_context=self.hydra_context,
                    sweep_config=sweep_config,
                    task_function=self.task_function,
                    singleton_state=Singleton.get_state(),
                )
            )
        returns: dict[int, JobReturn] = {}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            i = refs.index(done[0])
            returns[i] = self._collect(ray, done[0], nums[i], list(job_overrides[i]))
        return [returns[i] for i in range(len(refs))]

    def _connect(self, ray: ModuleType, init: dict[str, Any]) -> None:
        """`ray.init(**init)`, the process's SIGTERM handler kept. A cluster that does not answer is one line and
        exit 2: a HOST:PORT nothing listens on is found by a plain TCP connection first (`ray.init` itself would
        retry for minutes), `auto` with no cluster on this machine by Ray."""
        if ray.is_initialized():
            return
        address = init.get("address")
        handler = signal.getsignal(signal.SIGTERM)
        try:
            if address and address != "auto" and "://" not in address:
                host, _, port = address.rpartition(":")
                socket.create_connection((host, int(port)), timeout=10).close()
            ray.init(**init)
        except (OSError, ValueError) as err:  # ConnectionError is an OSError
            print(
                f"error: hydra/launcher=ray_cluster: no Ray cluster answers at {address!r} "
                f"({type(err).__name__}: {' '.join(str(err).split())[:200]}); start one (ray start --head) or set "
                f"RAY_ADDRESS or hydra.launcher.ray.init.address to its HEAD:PORT",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(2) from None
        finally:
            signal.signal(signal.SIGTERM, handler)

    def _collect(self, ray: ModuleType, ref: object, num: int, overrides: list[str]) -> JobReturn:
        """The job's JobReturn; for a job that ended without one, its error line and outcome record."""
        from src.sweep.callback import report_lost_job  # local: Ray sweeps only

        try:
            returned: JobReturn = ray.get(ref)
            return returned
        except ray.exceptions.RayError as err:
            name = type(err).__name__
            first = next((line for line in str(err).splitlines() if line.strip()), "")[:300]
            killed = any(n in (c.__name__ for c in type(err).__mro__) for n in KILLED_ERRORS)
            assert self.config is not None  # launch() checked it
            report_lost_job(
                self.config,
                self.hydra_context,
                num,
                overrides,
                f"Ray task ended without a result ({name}: {first}); its log: the worker's lines above, "
                f"and worker-*.err in the session's logs folder on its node",
                status="killed" if killed else "failed",
            )
            return JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=None)
