"""Entry point: `python -m src.run [overrides]` or `python -m src.run -m key=a,b ...` for a sweep.

The Hydra application around `src.job.run_job`: it checks the overrides before Hydra composes them (so a typo
or a wrong type is one `error:` line and exit 2, not Hydra's traceback), gives each job its output folder and
sweep ids, prints one JSON line per job, and turns a `UserError` into one line and exit 2.
"""
from __future__ import annotations

import atexit
import gc
import signal
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from . import config_schema  # registers the typed schema `job_schema` before Hydra composes
from . import sweep_callback, tracking
from .errors import UserError
from .job import run_job
from .redact import redact_text
from .sweep_callback import read_sweep_info, write_outcome

# Hydra finds sweepers only in the `hydra_plugins` namespace: ours (the default, conf/hydra/sweeper/) lives there
sys.path.append(str(Path(__file__).parent / "plugins"))
# Garbage collection tuned for a batch process whose heap is mostly what importing MLflow, SQLAlchemy, pandas and
# torch made (set on import: in the main process and in each launcher worker that imports this module to run jobs):
# - a young-generation threshold of 10,000 allocations instead of 700: a 24-job sweep ran 2,252 young and 11 full
#   collections (2.7 s of 35 s); with this, 110 young and 1 full (1.1 s);
# - no last collection at exit: Python walks every live object once more (about 1 s of a one-question job here) only
#   to free memory the process is about to give back. Freezing them in an exit handler skips that walk; objects are
#   still released by reference count, and the handler runs after every other one (MLflow's flushes included).
gc.set_threshold(10_000, *gc.get_threshold()[1:])
atexit.register(gc.freeze)
HYDRA_FLAGS = {"-m", "--multirun"}  # flags that still let us compose the overrides ourselves


def check_argv(argv: list[str]) -> None:
    """Compose every job the command line names (each job of a sweep) and raise the first config error in one
    line. Left to Hydra: its own options (--help, --cfg, ...) and `hydra.*` overrides."""
    from .sweep_callback import split_sweep

    if any(a.startswith("-") and a not in HYDRA_FLAGS for a in argv):
        return
    overrides = [a for a in argv if not a.startswith("-") and not a.lstrip("+~").startswith(("hydra.", "hydra/"))]
    jobs = split_sweep(overrides) if HYDRA_FLAGS & set(argv) else [overrides]
    for job in jobs:
        cfg = config_schema.compose_job(job)
        config_schema.check_values(cfg)  # types, then ranges: one line, exit 2
        tracking.check_options(cfg.tracking)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        try:
            result = run_job(cfg, out_dir=hydra_cfg.runtime.output_dir)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(err.exit_code)
        print(result.summary(), flush=True)  # the one JSON line scripts read
        print(result.closing(level=_level(cfg)), file=sys.stderr)  # for the person: headline, run, where to look
        return
    sweep_job(cfg, hydra_cfg)


def sweep_job(cfg: DictConfig, hydra_cfg) -> None:
    """One job of a multirun: its failure is one `error: job #N ...` line and a record in `<job dir>/job.json`
    for the sweep's summary, and the sweep goes on with the next job (Hydra would stop at the first)."""
    sweep = read_sweep_info(hydra_cfg.sweep.dir)
    out_dir = hydra_cfg.runtime.output_dir
    num, overrides = int(hydra_cfg.job.num), list(hydra_cfg.overrides.task)
    outcome = {"num": num, "overrides": overrides, "invocation": sweep.get("invocation"),
               "offline_dir": str(cfg.tracking.offline_dir)}
    tracking.last_run.clear()
    try:
        result = run_job(cfg, out_dir=out_dir, sweep=sweep)
    except KeyboardInterrupt:
        write_outcome(out_dir, **outcome, status="killed", run_id=tracking.last_run.get("run_id"),
                      error="interrupted")
        raise
    except Exception as err:  # noqa: BLE001 - reported in one line; the traceback goes to the job's folder
        crashed = not isinstance(err, UserError)
        message = str(err) if not crashed else redact_text(f"{type(err).__name__}: {tracking.short(err)}")
        if crashed:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            (Path(out_dir) / "error.txt").write_text(redact_text(traceback.format_exc()))
            message += f" (traceback in {Path(out_dir) / 'error.txt'})"
        print(f"error: job #{num} ({sweep_callback.job_label(overrides)}): {message}", file=sys.stderr)
        write_outcome(out_dir, **outcome, status="failed", run_id=tracking.last_run.get("run_id"), error=message,
                      crashed=crashed)
        return
    # went to the offline store because the server was down (tracking.on_outage=offline)
    offline = not cfg.tracking.offline and tracking.last_run.get("uri") == f"sqlite:///{cfg.tracking.offline_dir}/mlflow.db"
    write_outcome(out_dir, **outcome, status="skipped" if result.skipped else "finished", run_id=result.run_id,
                  offline=offline)
    print(result.summary(), flush=True)
    # the sweep's summary prints the commands once, for every job (src/sweep_callback.py)
    print(f"job #{num} {result.closing(level=_level(cfg), commands=False)}", file=sys.stderr)


def _level(cfg: DictConfig) -> float | None:
    """The coverage of the logged intervals (stats.level), None when none are logged (stats.bootstrap=0)."""
    stats = cfg.get("stats")
    return float(stats.level) if stats is not None and int(stats.bootstrap) > 0 else None


def _terminate(signum, frame):  # SIGTERM (Slurm's scancel, kill): end like Ctrl-C, so runs are marked KILLED
    raise KeyboardInterrupt


def main() -> None:
    try:
        check_argv(sys.argv[1:])
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        _hydra_main()
    except KeyboardInterrupt:
        active = sweep_callback.ACTIVE
        if active is None or active.closed:
            print("error: interrupted; run the same command again to resume from the response cache", file=sys.stderr)
            sys.exit(130)
        sys.exit(active.finish(interrupted=True))
    except SystemExit:  # a sweep ended early in some other way: its parent run is not left RUNNING
        active = sweep_callback.ACTIVE
        if active is not None and active.parent_id and not active.closed:
            active.finish(interrupted=True)
        raise
    sys.exit(sweep_callback.EXIT_CODE)


if __name__ == "__main__":
    main()
