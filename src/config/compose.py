"""A job's config composed from command-line style overrides with no Hydra runtime (the pre-flight check of
`python -m src.run`, the benchmark command, tests), one job or a sweep's jobs, with every composition error as one
line (src/config/hydra_errors.py) and every key checked against the schema (src/config/schema.py)."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path

from omegaconf import DictConfig

from src.common.errors import UserError
from src.config.hydra_errors import one_line, unknown_key
from src.config.schema import CONF_DIR, GROUPS, NESTED, JobConfig


def known_keys(path: str, overrides: Sequence[str] = ()) -> list[str]:
    """The keys a node of the config has (the schema's, or a group's as its chosen config file gives them)."""
    top = [f.name for f in fields(JobConfig)]
    if not path:
        return top
    if path in NESTED:
        return [f.name for f in fields(NESTED[path])]
    if path in GROUPS:
        choices = [o for o in overrides if "=" in o and o.split("=", 1)[0] in GROUPS]
        try:
            return [str(k) for k in compose_job(choices)[path]]
        except UserError:
            return []
    return []


def check_keys(cfg: DictConfig) -> None:
    """Refuse a top-level, `cache.` or `tracking.` key the schema does not have (one added with `+`)."""
    for path in ("", *NESTED):
        node = cfg if not path else cfg.get(path) or {}
        known = known_keys(path)
        for key in node:
            if key != "hydra" and key not in known:
                raise unknown_key(f"{path}.{str(key)}" if path else str(key), known)


def check_group_choices(overrides: Sequence[str], conf_dir: Path = CONF_DIR) -> None:
    """Catch an unknown config-group choice (e.g. `benchmark=mmlux`) before Hydra prints a multi-line error."""
    for arg in overrides:
        key, sep, value = arg.partition("=")
        if not sep or key.startswith(("+", "~", "hydra")) or "." in key or "/" in key or not (conf_dir / key).is_dir():
            continue
        known = sorted(p.stem for p in (conf_dir / key).glob("*.yaml"))
        for choice in value.split(","):
            if choice and choice not in known and not choice.startswith(("choice(", "glob(", "range(")):
                close = difflib.get_close_matches(choice, known, n=1)
                hint = f"did you mean {key}={close[0]}? " if close else ""
                raise UserError(f"config key {key}: unknown choice {choice!r}; {hint}choose one of {', '.join(known)}")


@contextlib.contextmanager
def _own_hydra(conf_dir: Path) -> Iterator[None]:
    """Hydra initialised on `conf_dir` for composing inside; inside a Hydra app (the sweep callback), the app's
    instance is put back after."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    saved = GlobalHydra.instance().hydra  # None: not initialised (GlobalHydra.is_initialized)
    if saved is not None:
        GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            yield
    finally:
        if saved is not None:
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(saved)


def _checked(overrides: Sequence[str], conf_dir: Path, composed: Callable[[], DictConfig]) -> DictConfig:
    """`composed()`, the config of the job `overrides` names, with every config error as one line (UserError): an
    unknown group choice before composing, a Hydra/OmegaConf composition error (override grammar, types, unknown
    keys), then the keys and metrics the composed config names."""
    check_group_choices(overrides, conf_dir)
    try:
        cfg = composed()
    except UserError:
        raise
    except Exception as err:
        raise one_line(err, overrides, lambda node: known_keys(node, overrides)) from err
    check_keys(cfg)  # the values, `metrics` included, are check_config's (`job_spec`), once per job
    return cfg


def compose_job(overrides: Sequence[str] = (), *, conf_dir: Path = CONF_DIR, config_name: str = "config") -> DictConfig:
    """The composed config of one job from command-line style overrides, with no Hydra runtime (for tests, the
    benchmark command and the pre-flight check of `python -m src.run`). Raises UserError in one line."""
    from hydra import compose

    def composed() -> DictConfig:
        with _own_hydra(conf_dir):
            return compose(config_name, overrides=list(overrides))

    return _checked(overrides, conf_dir, composed)
