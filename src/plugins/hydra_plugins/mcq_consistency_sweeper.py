"""Hydra's basic sweeper, composing each job once per choice of config groups and not twice.

- Before launching a batch, Hydra's `BasicSweeper` composes each of its jobs (`validate_batch_is_legal`), ~0.15 s a
  job in the sweep's main process. The sweep callback (src/sweep/callback.py) has already composed every job, in
  `on_multirun_start`, and refused the sweep when one is invalid; this sweeper has Hydra compose only the jobs the
  callback did not (a sweep without the callback, a job whose composition failed there). Each job's own
  `check_config` still runs inside the job (src/job/runner.py).
- The launcher gets the callback's config loader (src/config/sweep_compose.py): it composes once per distinct choice of
  config groups and applies each job's plain `key=value` overrides to a copy, in whichever process runs the job.

Hydra takes sweepers only from the `hydra_plugins` namespace package: `python -m src.run` puts this folder's
parent on sys.path (src/run.py). conf/hydra/sweeper/prechecked.yaml selects it; `hydra/sweeper=basic` gives
Hydra's own. (No `__init__.py` here: `hydra_plugins` is a namespace shared with the installed launchers.)
"""
from __future__ import annotations

from typing import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.types import HydraContext


class PrecheckedSweeper(BasicSweeper):
    def setup(self, *, hydra_context: HydraContext, task_function, config) -> None:
        from src.config.sweep_compose import GroupCachingConfigLoader  # local: loads omegaconf (slow import)
        from src.sweep import state as sweep_state  # local: Hydra's plugin scan imports this module in every process

        active = sweep_state.current().callback
        loader = active.loader if active is not None and active.loader is not None \
            else GroupCachingConfigLoader.wrap(hydra_context.config_loader)
        super().setup(hydra_context=HydraContext(config_loader=loader, callbacks=hydra_context.callbacks),
                      task_function=task_function, config=config)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from src.sweep import state as sweep_state  # local: Hydra's plugin scan imports this module in every process

        active = sweep_state.current().callback
        composed = active.composed if active is not None else set()
        unchecked = [job for job in batch if tuple(job) not in composed]
        if unchecked:
            super().validate_batch_is_legal(unchecked)
