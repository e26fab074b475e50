"""The one module of src that names Hydra's private API (`hydra._internal`), for what the public API cannot do,
with the hydra-core versions it was checked with.

What the private name buys:

- `BasicSweeper`: Hydra's basic sweeper, the only implementation of its sweep semantics (the order of jobs, batches,
  `hydra.sweeper.params`); the project's sweeper (hydra_plugins/mcq_consistency_sweeper.py) derives from it, and
  the sweep callback lists its jobs with its own `split_arguments` before the sweep starts.

Hydra composes every job whole, as it does by itself. A loader subclassing `ConfigLoaderImpl` that composed a
sweep's jobs once per choice of config groups saved 0.27 s of CPU a job on the smoke sweep's 24 jobs (one process,
basic launcher: 31.5 s against 25.0 s), and one swapped into Hydra's main ~0.15 s of a one-job command: under the
second a job that would pay for a private name.

A Hydra release may change any of these without notice, so importing this module checks the installed hydra-core
against `SUPPORTED` (pyproject.toml pins the same range) and prints one `warning:` line to stderr when it is outside.
"""

from __future__ import annotations

from hydra._internal.core_plugins import basic_sweeper as _basic_sweeper_module
from hydra.core.override_parser.types import Override

from src.common import versions

ADAPTER = "src/config/hydra_adapter.py"
SUPPORTED = ">=1.3.2,<1.4"  # the hydra-core versions these private names were checked with (as pyproject.toml pins)

__all__ = [
    "BASIC_SWEEPER",
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


versions.warn_if_outside("hydra-core", SUPPORTED, ADAPTER)
