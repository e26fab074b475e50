"""Hydra callback that gives each multirun one MLflow parent run and a shared `sweep_id`.

The parent run holds the sweep's config and overrides; every job's run carries `sweep_id` and
`mlflow.parentRunId`, so the MLflow UI can filter and compare one sweep. Jobs find the ids in
`<sweep dir>/sweep.json`, which also works for launchers that run jobs in other processes or hosts
sharing the sweep folder.
"""
from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)
SWEEP_FILE = "sweep.json"


def read_sweep_info(sweep_dir: str | Path) -> dict[str, str]:
    path = Path(sweep_dir) / SWEEP_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def split_sweep(overrides: list[str]) -> list[list[str]]:
    """The override lists of every job a sweep's overrides name, in the order Hydra's basic sweeper runs them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from .errors import UserError

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except OverrideParseException as err:
        raise UserError(f"config overrides {' '.join(overrides)}: {' '.join(str(err).split())}") from err
    return [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """The override lists of every job of this multirun, as Hydra's basic sweeper will launch them ([] for another
    sweeper, whose jobs are then checked one by one as they start)."""
    sweeper = config.hydra.get("sweeper") or {}
    if sweeper.get("_target_") != "hydra._internal.core_plugins.basic_sweeper.BasicSweeper":
        return []
    params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    return split_sweep([*params, *config.hydra.overrides.task])


def refused_jobs(config: DictConfig) -> list[str]:
    """One line per job whose composed config the run would refuse (validity rules, value checks), naming the job
    by its overrides."""
    from hydra.core.global_hydra import GlobalHydra

    from .errors import UserError
    from .job import check_config

    loader = GlobalHydra.instance().config_loader()
    lines = []
    for job in sweep_jobs(config):
        try:
            check_config(loader.load_sweep_config(config, job))
        except UserError as err:
            lines.append(f"job {' '.join(job)}: {err}")
    return lines


class MlflowSweepCallback(Callback):
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.client = None
        self.parent_id: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        refused = refused_jobs(config)
        if refused:  # before any job runs or any parent run is made
            for line in refused:
                print(f"error: {line}", file=sys.stderr)
            print(f"error: the sweep refuses {len(refused)} job(s) listed above and runs none; drop those "
                  f"combinations (or run them as separate sweeps) and start again", file=sys.stderr)
            sys.exit(2)
        if not self.enabled:
            return
        from mlflow.tracking import MlflowClient

        from . import tracking

        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        info = read_sweep_info(sweep_dir)  # a resumed sweep keeps its id and parent run
        if info.get("parent_run_id"):
            self.parent_id = info["parent_run_id"]
            return
        sweep_id = uuid.uuid4().hex[:12]
        tracking.check_tracking(config.tracking.uri)
        import mlflow

        mlflow.set_tracking_uri(config.tracking.uri)
        exp_id = tracking.experiment_id(mlflow, config.tracking.experiment, config.tracking.uri)
        self.client = MlflowClient(tracking_uri=config.tracking.uri)
        overrides = list(config.hydra.overrides.task)
        params = config.hydra.sweeper.get("params")
        sweep_params = OmegaConf.to_container(params) if OmegaConf.is_config(params) else dict(params or {})
        run = self.client.create_run(exp_id, run_name=f"sweep-{config.tracking.experiment}-{sweep_id}",
                                     tags={"sweep_id": sweep_id, "kind": "sweep", "git_commit": tracking.git_commit()})
        self.parent_id = run.info.run_id
        self.client.log_dict(self.parent_id, {"overrides": overrides, "sweeper_params": sweep_params,
                                              "config": OmegaConf.to_container(config, resolve=False)}, "sweep.json")
        self.client.log_param(self.parent_id, "overrides", " ".join(overrides)[:6000])
        (sweep_dir / SWEEP_FILE).write_text(json.dumps({"sweep_id": sweep_id, "parent_run_id": self.parent_id,
                                                        "experiment_id": exp_id}))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.enabled and self.parent_id:
            from mlflow.tracking import MlflowClient

            MlflowClient(tracking_uri=config.tracking.uri).set_terminated(self.parent_id, "FINISHED")
