"""Hydra's basic sweeper, without its second composition of the jobs the sweep callback has composed.

- Before launching a batch, Hydra's `BasicSweeper` composes each of its jobs (`validate_batch_is_legal`), ~0.15 s a
  job in the sweep's main process. The sweep callback (src/sweep/callback.py) has already composed every job, in
  `on_multirun_start`, and refused the sweep when one is invalid; this sweeper has Hydra compose only the jobs the
  callback did not (a sweep without the callback, a job whose composition failed there). Each job's own
  `check_config` still runs inside the job (src/job/runner.py).
- The launcher Hydra's and submitit's documentation teach by its plugin's name (`hydra/launcher=submitit_slurm`, or
  hydra-ray-launcher's `ray`) is the project's launcher class with the plugin's keys unchanged (`PROJECT_LAUNCHERS`):
  the plugin's own waits on a cancelled Slurm job forever where `sacct` has no accounting, and stops at the first
  Ray job whose worker died. `submitit_local`, `joblib` and `basic` are used as they are.

Hydra takes sweepers only from the `hydra_plugins` namespace package: this folder is installed with the project
(pyproject.toml), and from a clone's root it is importable as it is. conf/hydra/sweeper/prechecked.yaml selects it;
`hydra/sweeper=basic` gives Hydra's own. (No `__init__.py` here: `hydra_plugins` is a namespace shared with the
installed launchers.)
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict, read_write

from src.config import hydra_adapter  # Hydra's basic sweeper is a private class: named in the adapter only

# a launcher plugin's class -> the project's class that takes the same keys (hydra_plugins/)
PROJECT_LAUNCHERS = {
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher": (
        "hydra_plugins.mcq_slurm_launcher.TrackedSlurmLauncher"
    ),
    "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher": "hydra_plugins.mcq_ray_launcher.TrackedRayLauncher",
}


def use_project_launcher(config: DictConfig) -> None:
    """Point the launcher's `_target_` at the project's class where it names a plugin's class the project replaces.

    >>> from omegaconf import OmegaConf
    >>> cfg = OmegaConf.create({"hydra": {"launcher": {"_target_": next(iter(PROJECT_LAUNCHERS)), "partition": "cpu"}}})
    >>> use_project_launcher(cfg); cfg.hydra.launcher["_target_"], cfg.hydra.launcher.partition
    ('hydra_plugins.mcq_slurm_launcher.TrackedSlurmLauncher', 'cpu')
    """
    launcher = config.hydra.launcher
    target = PROJECT_LAUNCHERS.get(launcher.get("_target_"))
    if target is not None:
        with read_write(launcher), open_dict(launcher):
            launcher["_target_"] = target


class PrecheckedSweeper(hydra_adapter.basic_sweeper()):  # type: ignore[misc]  # mypy takes no call as a base class
    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        use_project_launcher(config)
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from src.sweep import state as sweep_state  # local: Hydra's plugin scan imports this module in every process

        active = sweep_state.current().callback
        composed = active.composed if active is not None else set()
        unchecked = [job for job in batch if tuple(job) not in composed]
        if unchecked:
            super().validate_batch_is_legal(unchecked)
