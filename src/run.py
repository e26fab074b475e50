"""Entry point: `python -m src.run [overrides]` or `python -m src.run -m key=a,b ...` for a sweep.

The Hydra application around `src.job.run_job`: it checks the overrides before Hydra composes them (so a typo
or a wrong type is one `error:` line and exit 2, not Hydra's traceback), gives each job its output folder and
sweep ids, prints one JSON line per job, and turns a `UserError` into one line and exit 2.
"""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from . import config_schema  # registers the typed schema `job_schema` before Hydra composes
from .errors import UserError
from .job import run_job
from .sweep_callback import read_sweep_info

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
        config_schema.compose_job(job)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    sweep = read_sweep_info(hydra_cfg.sweep.dir) if hydra_cfg.mode == RunMode.MULTIRUN else None
    try:
        print(run_job(cfg, out_dir=hydra_cfg.runtime.output_dir, sweep=sweep).summary())
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)


def main() -> None:
    try:
        check_argv(sys.argv[1:])
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    _hydra_main()


if __name__ == "__main__":
    main()
