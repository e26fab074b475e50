"""One job of a multirun, as a launcher runs it (`python -m src.run -m ...`, src/run.py).

Its failure is one `error: job #N ...` line and a record in `<job dir>/job.json` for the sweep's summary
(src/sweep/callback.py), and the sweep goes on with the next job (Hydra would stop at the first).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from src.common import gc_tuning, progress, stdout_data
from src.common.errors import UserError
from src.common.redact import redact_text
from src.job.runner import run_job
from src.sweep.callback import job_label, read_sweep_info, write_outcome
from src.tracking import store
from src.tracking.job_tracker import last_run

if TYPE_CHECKING:
    from hydra.conf import HydraConf


def run_sweep_job(cfg: DictConfig, hydra_cfg: HydraConf) -> None:
    """Run the job `cfg` of the multirun whose Hydra config is `hydra_cfg`, record its outcome, print its lines."""
    gc_tuning.tune_for_batch()  # a launcher's worker process runs no entry point of ours: tuned here
    progress.quiet_housekeeping()  # and its MLflow defaults (a Ray worker does not inherit the command's environment)
    sweep = read_sweep_info(hydra_cfg.sweep.dir)
    out_dir = hydra_cfg.runtime.output_dir
    num, overrides = int(hydra_cfg.job.num), list(hydra_cfg.overrides.task)
    # read before the job's spec is built (run_job): a job whose config is refused still reports where it logs
    offline_dir, offline_mode = str(cfg.tracking.offline_dir), bool(cfg.tracking.offline)
    outcome = {"num": num, "overrides": overrides, "invocation": sweep.get("invocation"), "offline_dir": offline_dir}
    last_run.clear()
    try:
        with stdout_data.to_stderr():  # stdout holds the JSON lines alone (src/common/stdout_data.py)
            result = run_job(cfg, out_dir=out_dir, sweep=sweep)
            summary = result.summary()  # its imports too
    except KeyboardInterrupt:
        write_outcome(out_dir, **outcome, status="killed", run_id=last_run.get("run_id"), error="interrupted")
        raise
    except Exception as err:  # noqa: BLE001 - reported in one line; the traceback goes to the job's folder
        crashed = not isinstance(err, UserError)
        message = str(err) if not crashed else redact_text(f"{type(err).__name__}: {store.short(err)}")
        if crashed:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            (Path(out_dir) / "error.txt").write_text(redact_text(traceback.format_exc()))
            message += f" (traceback in {Path(out_dir) / 'error.txt'})"
        print(f"error: job #{num} ({job_label(overrides)}): {message}", file=sys.stderr)
        write_outcome(
            out_dir, **outcome, status="failed", run_id=last_run.get("run_id"), error=message, crashed=crashed
        )
        return
    # went to the offline store because the server was down (tracking.on_outage=offline)
    offline = not offline_mode and last_run.get("uri") == f"sqlite:///{offline_dir}/mlflow.db"
    write_outcome(
        out_dir, **outcome, status="skipped" if result.skipped else "finished", run_id=result.run_id, offline=offline
    )
    print(summary, flush=True)
    # the sweep's summary prints the commands once, for every job (src/sweep/callback.py)
    print(f"job #{num} {result.closing(level=result.level, commands=False)}", file=sys.stderr)
