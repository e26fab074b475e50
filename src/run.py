"""Entry point: `python -m src.run [overrides]` or `python -m src.run -m key=a,b ...` for a sweep.

The Hydra application around `src.job.runner.run_job`: it checks the overrides before Hydra composes them (so a typo
or a wrong type is one `error:` line and exit 2, not Hydra's traceback), gives each job its output folder and
sweep ids, prints one JSON line per job (stdout holds nothing else: src/common/stdout_data.py), and turns a
`UserError` into one line and exit 2. Garbage collection waits until the job's imports are done
(src/common/gc_tuning.py).
"""

from __future__ import annotations

import signal
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from src.cli import user_error
from src.common import gc_tuning, progress, stdout_data
from src.common.errors import UserError
from src.config import command_line  # through src/config/schema.py: registers `job_schema` before Hydra composes
from src.job.runner import release_backends, run_job
from src.sweep import state as sweep_state
from src.sweep.job import run_sweep_job

# The project's sweeper and launchers (conf/hydra/sweeper/, conf/hydra/launcher/slurm_*.yaml, ray_cluster.yaml) are
# the `hydra_plugins` namespace package at the repository's root, installed with the project (pyproject.toml): Hydra,
# a Slurm job and a Ray worker find them in the environment, as they find the launcher plugins they extend.


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        try:
            with stdout_data.to_stderr():  # whatever a library prints while the job runs (src/common/stdout_data.py)
                result = run_job(cfg, out_dir=hydra_cfg.runtime.output_dir)
                summary = result.summary()  # its imports too
        except UserError as err:
            sys.exit(user_error(err))
        print(summary, flush=True)  # the one JSON line scripts read
        print(result.closing(level=result.level), file=sys.stderr)  # for the person: headline, run, where to look
        return
    run_sweep_job(cfg, hydra_cfg)


def main() -> None:
    with sweep_state.opened() as sweep:
        try:
            _checked_main(sweep)
        finally:  # success, an error, SIGTERM or Ctrl-C: no engine process outlives the command
            release_backends()


def _checked_main(sweep: sweep_state.SweepState) -> None:
    try:
        command_line.check_command_line(sys.argv[1:])
    except UserError as err:
        sys.exit(user_error(err))
    signal.signal(signal.SIGTERM, sweep_state.interrupt_on_sigterm)
    try:
        _hydra_main()
    except KeyboardInterrupt:
        active = sweep.callback
        if active is None or active.closed:
            print("error: interrupted; run the same command again to resume from the response cache", file=sys.stderr)
            sys.exit(130)
        sys.exit(active.finish(interrupted=True))
    except SystemExit:  # a sweep ended early in some other way: its parent run is not left RUNNING
        active = sweep.callback
        if active is not None and active.parent_id and not active.closed:
            active.finish(interrupted=True)
        raise
    sys.exit(sweep.exit_code)


if __name__ == "__main__":
    gc_tuning.tune_for_batch()  # the entry point owns the process's GC settings (src/common/gc_tuning.py)
    gc_tuning.pause_for_imports()  # until the job's MLflow store is open (src/common/gc_tuning.py)
    progress.quiet_housekeeping()
    main()
