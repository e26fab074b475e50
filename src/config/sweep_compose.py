"""Composing a multirun's jobs: once per distinct choice of config groups instead of once per job, with
`GroupCachingConfigLoader` (src/config/hydra_adapter.py: it is Hydra's own loader, a private class).

The sweep callback composes every job with it before the first one runs (to refuse a bad sweep early), and the
sweeper (hydra_plugins/) hands the same loader to the launcher: the basic launcher reuses the callback's
compositions, and each joblib or submitit worker receives them with the loader (the cache is per process, reset per
sweep).
tests/test_sweeps.py checks, for every job of every committed sweep, that the result equals Hydra's whole
composition.
"""

from __future__ import annotations

from omegaconf import DictConfig, open_dict

from src.common.errors import UserError
from src.config.hydra_adapter import GroupCachingConfigLoader, split_arguments

__all__ = ["GroupCachingConfigLoader", "composed_jobs", "split_sweep", "without_hydra"]


def without_hydra(cfg: DictConfig) -> DictConfig:
    """What the job itself gets: its config without the hydra node."""
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def composed_jobs(
    config: DictConfig, jobs: list[list[str]], loader: GroupCachingConfigLoader
) -> list[tuple[list[str], DictConfig | Exception]]:
    """(overrides, composed config without the hydra node, or the exception composing it raised) of each job, as
    `loader` composes them."""
    out: list[tuple[list[str], DictConfig | Exception]] = []
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
