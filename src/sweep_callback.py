"""Hydra callback that gives each multirun one MLflow parent run and a shared `sweep_id`.

The parent run holds the sweep's config and overrides; every job's run carries `sweep_id` and
`mlflow.parentRunId`, so the MLflow UI can filter and compare one sweep. Jobs find the ids in
`<sweep dir>/sweep.json`, which also works for launchers that run jobs in other processes or hosts
sharing the sweep folder.
"""
from __future__ import annotations

import json
import logging
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


class MlflowSweepCallback(Callback):
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.client = None
        self.parent_id: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
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
