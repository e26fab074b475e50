"""The one module of src that names Hydra's private API (`hydra._internal`), for what the public API cannot do,
with the hydra-core versions it was checked with.

What each private name buys, measured on 2 cores (AMD EPYC Zen 4, load 2-4, 2026-11-26):

- `ConfigLoaderImpl`, subclassed here as `GroupCachingConfigLoader`: a sweep's jobs composed once per choice of
  config groups instead of each whole. Hydra composes every job of a sweep whole: it builds the defaults list,
  which only the config-group choices (and `+`, `++`, `~`, `hydra.*` overrides) change, merges its files, then
  applies the plain `key=value` overrides in order. This loader keeps the first composition of each group choice
  and gives every other job of that choice a copy with its plain overrides applied by Hydra's same step
  (`_apply_overrides_to_config`), and the job's own `hydra.overrides.task` and `hydra.job.override_dirname` (the
  only parts of the hydra node that plain overrides change, filled with Hydra's `get_overrides_dirname`). A job
  with any other kind of override is composed whole. A whole composition costs ~0.07 s of CPU; the sweep callback
  composes every job before the first one runs and the launcher's workers again, so the smoke sweep's 24 jobs
  (6 group choices) cost ~3 s of compositions less per sweep command; see tests/test_sweeps.py for the equality
  with Hydra's own compositions.
- `BasicSweeper`: Hydra's basic sweeper, the only implementation of its sweep semantics (the order of jobs, batches,
  `hydra.sweeper.params`); the project's sweeper (hydra_plugins/mcq_consistency_sweeper.py) derives from it, and
  the sweep callback lists its jobs with its own `split_arguments` before the sweep starts.

(A one-job command's three compositions, which a loader swapped into Hydra's main saved two of, ~0.15 s of CPU a
command, are Hydra's own again: under the half second that would pay for a private name.)

A Hydra release may change any of these without notice, so importing this module checks the installed hydra-core
against `SUPPORTED` (pyproject.toml pins the same range) and prints one `warning:` line to stderr when it is outside.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any, cast

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.core_plugins import basic_sweeper as _basic_sweeper_module
from hydra.core.config_loader import ConfigLoader
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf, open_dict

from src.common import versions

ADAPTER = "src/config/hydra_adapter.py"
SUPPORTED = ">=1.3.2,<1.4"  # the hydra-core versions these private names were checked with (as pyproject.toml pins)

__all__ = [
    "BASIC_SWEEPER",
    "GroupCachingConfigLoader",
    "SUPPORTED",
    "basic_sweeper",
    "split_arguments",
    "version_problem",
]

# the `_target_` of Hydra's basic sweeper in its config (`hydra/sweeper=basic`)
BASIC_SWEEPER = f"{_basic_sweeper_module.__name__}.BasicSweeper"


def basic_sweeper() -> type[_basic_sweeper_module.BasicSweeper]:
    """Hydra's `BasicSweeper` class as its module holds it now. Hydra's plugin scan executes the modules of
    `hydra._internal.core_plugins` (and `hydra_plugins`) again, making new classes: a subclass must derive from the
    current one, as the class's own `super(BasicSweeper, self)` names it, so it is looked up when the subclass is
    made (a plugin module's import, also in the scan), not kept from this module's first import."""
    return _basic_sweeper_module.BasicSweeper


def version_problem(version: str) -> str | None:
    """The one line to print when hydra-core `version` is outside `SUPPORTED`, else None (src/common/versions.py).

    >>> version_problem("1.3.2") is None
    True
    >>> version_problem("1.4.0")  # doctest: +NORMALIZE_WHITESPACE
    "warning: hydra-core 1.4.0 is outside >=1.3.2,<1.4, the versions whose private API src/config/hydra_adapter.py
    was checked with; pip install 'hydra-core>=1.3.2,<1.4'"
    """
    return versions.version_problem("hydra-core", version, SUPPORTED, ADAPTER)


def split_arguments(overrides: list[Override]) -> list[list[str]]:
    """The override lists of every job that parsed sweep `overrides` name, in the order Hydra's basic sweeper runs
    them (its own `split_arguments`)."""
    return [list(job) for batch in basic_sweeper().split_arguments(overrides, None) for job in batch]


# this process's compositions for one sweep: (token of its loader, top-level config groups, group choice -> config)
_CACHE: dict[str, Any] = {"token": None, "groups": None, "bases": {}}


class GroupCachingConfigLoader(ConfigLoaderImpl):
    """Hydra's config loader, composing once per group choice (module docstring). Made for one sweep: its token
    keys the per-process cache, so a worker that runs jobs of several sweeps never reuses another sweep's configs."""

    def __init__(self, config_search_path: ConfigSearchPath) -> None:
        super().__init__(config_search_path=config_search_path)
        self.token = uuid.uuid4().hex

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with this process's compositions (about 100 kB, 10 ms for the smoke sweep's six): a launcher's
        worker then composes none of its jobs whole (0.15-0.3 s each)."""
        state = dict(self.__dict__)
        if _CACHE["token"] == self.token:
            state["_composed"] = {"groups": _CACHE["groups"], "bases": dict(_CACHE["bases"])}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        composed = state.pop("_composed", None)
        self.__dict__.update(state)
        if composed is not None and _CACHE["token"] != self.token:
            _CACHE.update(token=self.token, **composed)

    @classmethod
    def wrap(cls, loader: ConfigLoader) -> GroupCachingConfigLoader:
        return loader if isinstance(loader, cls) else cls(loader.get_search_path())

    def _cache(self, master_config: DictConfig) -> dict[str, Any]:
        from hydra.core.object_type import ObjectType

        if _CACHE["token"] != self.token:
            groups = self.get_group_options(
                "",
                results_filter=ObjectType.GROUP,  # top-level config groups
                config_name=master_config.hydra.job.config_name,
                overrides=list(master_config.hydra.overrides.hydra),
            )
            _CACHE.update(token=self.token, groups=set(groups), bases={})
        return _CACHE

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        cache = self._cache(master_config)
        parsed = OverridesParser.create().parse_overrides(list(sweep_overrides))
        groups = cache["groups"]

        def plain(o: Override) -> bool:  # `key=value` on a config key: applied after the defaults list is merged
            return not (
                o.is_add()
                or o.is_force_add()
                or o.is_delete()
                or o.is_sweep_override()
                or o.package is not None
                or "/" in o.key_or_group
                or o.key_or_group in groups
                or o.key_or_group.split(".")[0] == "hydra"
            )

        def group_choice(o: Override) -> bool:  # changes the defaults list only
            return (
                ("/" in o.key_or_group or o.key_or_group in groups)
                and not o.is_sweep_override()
                and not isinstance(o.value(), dict)
            )

        if not all(plain(o) or group_choice(o) for o in parsed):  # `+key=`, `~key`, `hydra.*`, ...: composed whole
            return super().load_sweep_config(master_config, list(sweep_overrides))
        choice = tuple(cast(str, o.input_line) for o in parsed if not plain(o))  # the parser sets each input_line
        if choice not in cache["bases"]:
            try:
                cache["bases"][choice] = super().load_sweep_config(master_config, list(choice))
            except Exception:  # noqa: BLE001 - the job's own composition raises what is wrong with it
                return super().load_sweep_config(master_config, list(sweep_overrides))
        cfg: DictConfig = copy.deepcopy(cache["bases"][choice])
        self._apply_overrides_to_config([o for o in parsed if plain(o)], cfg)
        with open_dict(cfg.hydra):  # as Hydra's `_load_configuration_impl` fills them for the job's overrides
            cfg.hydra.overrides.task = [o.input_line for o in parsed]
            cfg.hydra.job.override_dirname = get_overrides_dirname(
                overrides=parsed,
                kv_sep=cfg.hydra.job.config.override_dirname.kv_sep,
                item_sep=cfg.hydra.job.config.override_dirname.item_sep,
                exclude_keys=cfg.hydra.job.config.override_dirname.exclude_keys,
            )
        OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
        return cfg


versions.warn_if_outside("hydra-core", SUPPORTED, ADAPTER)
