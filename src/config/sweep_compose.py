"""Composing a multirun's jobs: once per distinct choice of config groups instead of once per job.

Hydra composes every job of a sweep whole (0.15-0.3 s each on 2 cores): it builds the defaults list, which only the
config-group choices (and `+`, `++`, `~`, `hydra.*` overrides) change, merges its files, then applies the plain
`key=value` overrides in order. `GroupCachingConfigLoader` is Hydra's own loader that keeps the first composition
of each group choice and gives every other job of that choice a copy with its plain overrides applied by Hydra's
same step, and the job's own `hydra.overrides.task` and `hydra.job.override_dirname` (the only parts of the hydra
node that plain overrides change). A job with any other kind of override is composed whole, as before.

The sweep callback composes every job with it before the first one runs (to refuse a bad sweep early), and the
sweeper (src/plugins/hydra_plugins/) hands the same loader to the launcher: the basic launcher reuses the callback's
compositions, and each joblib or submitit worker receives them with the loader (the cache is per process, reset per
sweep).
tests/test_sweeps.py checks, for every job of every committed sweep, that the result equals Hydra's whole
composition.
"""
from __future__ import annotations

import copy
import uuid
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from src.common.errors import UserError
from src.config.hydra_adapter import ConfigLoaderImpl, get_overrides_dirname, split_arguments

# this process's compositions for one sweep: (token of its loader, top-level config groups, group choice -> config)
_CACHE: dict[str, Any] = {"token": None, "groups": None, "bases": {}}


class GroupCachingConfigLoader(ConfigLoaderImpl):
    """Hydra's config loader, composing once per group choice (module docstring). Made for one sweep: its token
    keys the per-process cache, so a worker that runs jobs of several sweeps never reuses another sweep's configs."""

    def __init__(self, config_search_path) -> None:
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
    def wrap(cls, loader: ConfigLoaderImpl) -> "GroupCachingConfigLoader":
        return loader if isinstance(loader, cls) else cls(loader.config_search_path)

    def _cache(self, master_config: DictConfig) -> dict[str, Any]:
        from hydra.core.object_type import ObjectType

        if _CACHE["token"] != self.token:
            groups = self.get_group_options("", results_filter=ObjectType.GROUP,  # top-level config groups
                                            config_name=master_config.hydra.job.config_name,
                                            overrides=list(master_config.hydra.overrides.hydra))
            _CACHE.update(token=self.token, groups=set(groups), bases={})
        return _CACHE

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        cache = self._cache(master_config)
        parsed = OverridesParser.create().parse_overrides(list(sweep_overrides))
        groups = cache["groups"]

        def plain(o) -> bool:  # `key=value` on a config key: applied after the defaults list is merged
            return not (o.is_add() or o.is_force_add() or o.is_delete() or o.is_sweep_override()
                        or o.package is not None or "/" in o.key_or_group or o.key_or_group in groups
                        or o.key_or_group.split(".")[0] == "hydra")

        def group_choice(o) -> bool:  # changes the defaults list only
            return ("/" in o.key_or_group or o.key_or_group in groups) and not o.is_sweep_override() \
                and not isinstance(o.value(), dict)

        if not all(plain(o) or group_choice(o) for o in parsed):  # `+key=`, `~key`, `hydra.*`, ...: composed whole
            return super().load_sweep_config(master_config, list(sweep_overrides))
        choice = tuple(o.input_line for o in parsed if not plain(o))
        if choice not in cache["bases"]:
            try:
                cache["bases"][choice] = super().load_sweep_config(master_config, list(choice))
            except Exception:  # noqa: BLE001 - the job's own composition raises what is wrong with it
                return super().load_sweep_config(master_config, list(sweep_overrides))
        cfg = copy.deepcopy(cache["bases"][choice])
        self._apply_overrides_to_config([o for o in parsed if plain(o)], cfg)
        with open_dict(cfg.hydra):  # as Hydra's `_load_configuration_impl` fills them for the job's overrides
            cfg.hydra.overrides.task = [o.input_line for o in parsed]
            cfg.hydra.job.override_dirname = get_overrides_dirname(
                overrides=parsed, kv_sep=cfg.hydra.job.config.override_dirname.kv_sep,
                item_sep=cfg.hydra.job.config.override_dirname.item_sep,
                exclude_keys=cfg.hydra.job.config.override_dirname.exclude_keys)
        OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
        return cfg


def without_hydra(cfg: DictConfig) -> DictConfig:
    """What the job itself gets: its config without the hydra node."""
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def composed_jobs(config: DictConfig, jobs: list[list[str]],
                  loader: GroupCachingConfigLoader) -> list[tuple[list[str], Any]]:
    """(overrides, composed config without the hydra node, or the exception composing it raised) of each job, as
    `loader` composes them."""
    out = []
    for job in jobs:
        try:
            out.append((job, without_hydra(loader.load_sweep_config(config, list(job)))))
        except Exception as err:  # noqa: BLE001 - reported by refused_jobs
            out.append((job, err))
    return out


def split_sweep(overrides: list[str]) -> list[list[str]]:
    """The override lists of every job a sweep's overrides name, in the order Hydra's basic sweeper runs them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except OverrideParseException as err:
        raise UserError(f"config overrides {' '.join(overrides)}: {' '.join(str(err).split())}") from err
    return split_arguments(parsed)
