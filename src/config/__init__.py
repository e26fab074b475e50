"""The config: its typed schema and checks, composing the command line's and a sweep's configs."""

from __future__ import annotations

from typing import Any, cast


def plain_dict(node: Any, *, resolve: bool = True) -> dict[str, Any]:
    """A mapping node of a config as plain values (`OmegaConf.to_container`), typed as the dict it is: the stub
    gives the union of what any node becomes (a dict, a list, a string, None)."""
    from omegaconf import OmegaConf  # local: this package's other modules need not load omegaconf to import it

    return cast(dict[str, Any], OmegaConf.to_container(node, resolve=resolve))
