"""The one rule for the adapter modules that name a library's private API (docs/development.md, "Adapter
modules"): each checks, when imported, that the installed library is inside the versions its private names were
checked with, and prints one `warning:` line to stderr when it is not (a warning, not a refusal: the library may
still work, and the line says what to install where it does not)."""

from __future__ import annotations

import importlib.metadata
import sys

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def version_problem(distribution: str, version: str, supported: str, adapter: str) -> str | None:
    """The one line to print when `distribution` at `version` is outside `supported`, else None.

    >>> version_problem("hydra-core", "1.3.2", ">=1.3.2,<1.4", "src/config/hydra_adapter.py") is None
    True
    >>> version_problem("lm-eval", "0.5.0", ">=0.4,<0.5",
    ...                 "src/benchmarks/lm_eval_adapter.py")  # doctest: +NORMALIZE_WHITESPACE
    "warning: lm-eval 0.5.0 is outside >=0.4,<0.5, the versions whose private API
    src/benchmarks/lm_eval_adapter.py was checked with; pip install 'lm-eval>=0.4,<0.5'"
    """
    try:
        inside = Version(version) in SpecifierSet(supported)
    except InvalidVersion:
        inside = False
    if inside:
        return None
    return (
        f"warning: {distribution} {version} is outside {supported}, the versions whose private API {adapter} "
        f"was checked with; pip install '{distribution}{supported}'"
    )


def warn_if_outside(distribution: str, supported: str, adapter: str) -> None:
    """Print `version_problem`'s line for the installed `distribution` (nothing when it is not installed: the
    adapter's caller says what to install)."""
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return
    problem = version_problem(distribution, version, supported, adapter)
    if problem:
        print(problem, file=sys.stderr)
