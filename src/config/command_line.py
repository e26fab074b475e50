"""Composing the config of a `python -m src.run` command once, where it was composed three times.

For a command without sweep overrides (0.1-0.15 s a composition on 2 cores):
- the pre-check (`config_schema.check_command_line`) composes it, through Hydra's compose API, before Hydra starts;
- Hydra's main composes it to read `hydra.mode`, as a multirun and unvalidated;
- then again to run it, with `hydra.mode=RUN` appended to the overrides when the config leaves the mode unset
  (ours does).
They differ only in what the hydra node records: the `hydra.*` overrides (the pre-check leaves them out), the
validation of sweep overrides, the multirun's skipping of missing defaults, and the job name (`app` for the compose
API, `run` for Hydra's main). `CommandConfigLoader`, Hydra's own loader, keeps the command's first composition (made
as a run, which is the same in both modes when it succeeds) and answers the others with a copy: validated as Hydra
validates it, the extra `hydra.key=value` overrides applied and listed in `hydra.overrides.hydra` as Hydra's own
composition applies and lists them, and the job name of the Hydra instance that asks. Anything else (a sweep
override, `hydra/launcher=...`, other task overrides) is composed as Hydra composes it; a sweep's jobs:
src/config/sweep_compose.py.

`composed_once()` has every Hydra instance made inside it use this loader, and forgets the composition at its end.
tests/test_sweeps.py checks that single-job commands run with configs equal to Hydra's own, hydra node included.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Iterator

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobRuntime
from hydra.types import RunMode
from omegaconf import DictConfig
from src.config.hydra_adapter import ConfigLoaderImpl, use_config_loader
from src.config.schema import HYDRA_FLAGS

# the command's compositions while `composed_once` is active (None otherwise, as in a launcher worker that received
# this loader): (config sources, config name, task overrides, hydra overrides) -> (config, whether its job name came
# from Hydra's runtime, not from the config)
_COMPOSED: dict[tuple, tuple[DictConfig, bool]] | None = None
# the pre-check's composition and Hydra's first (they differ when the command has a `hydra/...` override); later
# ones (the jobs of a multirun that a config file asks for, as the sweeps/ files do) are not asked for again
_KEPT = 2


def _plain_hydra(o) -> bool:
    """`hydra.key=value`: applied after the config is merged, like a task override, and changing nothing else."""
    return (o.key_or_group.startswith("hydra.") and o.key_or_group != "hydra.searchpath" and o.package is None
            and not (o.is_add() or o.is_force_add() or o.is_delete()) and not isinstance(o.value(), dict))


class CommandConfigLoader(ConfigLoaderImpl):
    """Hydra's config loader, composing a command once (module docstring)."""

    def load_configuration(self, config_name: str | None, overrides: list[str], run_mode: RunMode,
                           from_shell: bool = True, validate_sweep_overrides: bool = True) -> DictConfig:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
        if _COMPOSED is None or any(o.is_sweep_override() for o in parsed):
            return super().load_configuration(config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        sources = tuple((s.provider, s.scheme(), s.path) for s in self.repository.get_sources())
        task = tuple(o.input_line for o in parsed if not o.is_hydra_override())
        hydra_overrides = [o for o in parsed if o.is_hydra_override()]
        for (sources0, name0, task0, hydra0), (composed, runtime_name) in _COMPOSED.items():
            head, extra = hydra_overrides[:len(hydra0)], hydra_overrides[len(hydra0):]
            if (sources0, name0, task0) != (sources, config_name, task) \
                    or tuple(o.input_line for o in head) != hydra0 or not all(map(_plain_hydra, extra)):
                continue
            if validate_sweep_overrides:
                self.validate_sweep_overrides_legal(overrides=parsed, run_mode=run_mode, from_shell=from_shell)
            cfg = copy.deepcopy(composed)
            self._apply_overrides_to_config(extra, cfg)  # as Hydra's `_load_configuration_impl` does
            cfg.hydra.overrides.hydra.extend([o.input_line for o in extra])
            if runtime_name:
                cfg.hydra.job.name = JobRuntime().get("name")
            return cfg
        try:
            cfg = super().load_configuration(config_name, overrides, RunMode.RUN, from_shell, False)
        except Exception:  # noqa: BLE001 - composed as Hydra would, which raises what is wrong with it
            return super().load_configuration(config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        if validate_sweep_overrides:
            self.validate_sweep_overrides_legal(overrides=parsed, run_mode=run_mode, from_shell=from_shell)
        if len(_COMPOSED) < _KEPT:
            _COMPOSED[(sources, config_name, task, tuple(o.input_line for o in hydra_overrides))] = (
                copy.deepcopy(cfg), cfg.hydra.job.name == JobRuntime().get("name"))
        return cfg


@contextlib.contextmanager
def composed_once(argv: list[str]) -> Iterator[None]:
    """Every Hydra instance made inside (the pre-check's, Hydra's main) composes with a `CommandConfigLoader`,
    for a command of one job (no `-m`: a multirun's pre-check composes each of its jobs, which nothing reuses)."""
    if HYDRA_FLAGS & set(argv):
        yield
        return
    global _COMPOSED
    _COMPOSED = {}
    try:
        with use_config_loader(CommandConfigLoader):
            yield
    finally:
        _COMPOSED = None
