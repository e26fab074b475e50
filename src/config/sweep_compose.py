"""A multirun's jobs as overrides and as configs: the override lists a sweep names (Hydra's basic sweeper's split),
and each job composed by Hydra's own loader, for the sweep callback's check of every job before the first one runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig, open_dict

from src.common.errors import UserError
from src.config.hydra_adapter import split_arguments

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader


def without_hydra(cfg: DictConfig) -> DictConfig:
    """What the job itself gets: its config without the hydra node."""
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def composed_jobs(
    config: DictConfig, jobs: list[list[str]], loader: ConfigLoader
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
