"""The one module of src/config that names Hydra's private API (`hydra._internal`), for what the public API cannot
do, with the hydra-core versions it was checked with.

What it buys, as measured where it was written (2 cores; the modules that use it say more):

- `ConfigLoaderImpl`, subclassed by src/config/sweep_compose.py: a sweep's jobs composed once per choice of config
  groups instead of each whole, 0.15-0.3 s less per job (seconds on a sweep of tens of jobs, in the sweep
  callback's check and again in every launcher worker), with the job's own `hydra` node filled as Hydra fills it
  (`get_overrides_dirname`);
- `ConfigLoaderImpl` swapped in `hydra._internal.hydra` (`use_config_loader`) by src/config/command_line.py: a
  one-job command composed once where Hydra composes it three times, 0.1-0.15 s a composition;
- `BasicSweeper.split_arguments`: a sweep's jobs listed in the very order Hydra's basic sweeper runs them, for the
  check of every job before the sweep starts.

A Hydra release may change any of these without notice, so importing this module checks the installed hydra-core
against `SUPPORTED` (pyproject.toml pins the same range) and prints one `warning:` line to stderr when it is outside.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import sys
from typing import Iterator

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

SUPPORTED = ">=1.3.2,<1.4"  # the hydra-core versions these private names were checked with (as pyproject.toml pins)

__all__ = ["ConfigLoaderImpl", "SUPPORTED", "get_overrides_dirname", "split_arguments", "use_config_loader",
           "version_problem"]


def version_problem(version: str) -> str | None:
    """The one line to print when hydra-core `version` is outside `SUPPORTED`, else None.

    >>> version_problem("1.3.2") is None
    True
    >>> version_problem("1.4.0")
    "warning: hydra-core 1.4.0 is outside >=1.3.2,<1.4, the versions whose private config loader src/config/hydra_adapter.py was checked with; pip install 'hydra-core>=1.3.2,<1.4'"
    """
    try:
        inside = Version(version) in SpecifierSet(SUPPORTED)
    except InvalidVersion:
        inside = False
    if inside:
        return None
    return (f"warning: hydra-core {version} is outside {SUPPORTED}, the versions whose private config loader "
            f"src/config/hydra_adapter.py was checked with; pip install 'hydra-core{SUPPORTED}'")


@contextlib.contextmanager
def use_config_loader(loader_class: type[ConfigLoaderImpl]) -> Iterator[None]:
    """Every Hydra instance made inside composes with `loader_class` (Hydra's main looks the class up in its
    module, so it is replaced there and put back on leaving)."""
    import hydra._internal.hydra as hydra_main  # only a command that composes once needs Hydra's main here

    hydra_main.ConfigLoaderImpl = loader_class
    try:
        yield
    finally:
        hydra_main.ConfigLoaderImpl = ConfigLoaderImpl


def split_arguments(overrides: list) -> list[list[str]]:
    """The override lists of every job that parsed sweep `overrides` name, in the order Hydra's basic sweeper runs
    them (its own `split_arguments`)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # only a sweep's check needs it

    return [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


_problem = version_problem(importlib.metadata.version("hydra-core"))
if _problem:
    print(_problem, file=sys.stderr)
