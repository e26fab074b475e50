"""The typed schema of a job's config, and the one-line errors for configs that do not fit it.

`JobConfig` is registered in Hydra's ConfigStore as `job_schema`; `conf/config.yaml` names it first in its
defaults list, so the top level and its `cache` and `tracking` nodes are typed: `temperature=abc` fails to
merge. Hydra accepts a key added with `+` (`+temprature=0.5`) and states its own errors in several lines, so
`compose_job` composes the overrides itself and `check_keys` refuses any key the schema does not have; both
raise `UserError` with one line naming the key as the user wrote it and the nearest valid one.

The groups (`model`, `benchmark`, `variants`, `prompt`) differ in their keys by backend, loader and variant set;
each checks its own keys where it is built (e.g. `model.x is not a setting of backend hf`).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig

from .errors import UserError

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ("model", "benchmark", "variants", "prompt")


@dataclass
class CacheConfig:
    """The response cache: reruns and interrupted sweeps reuse every answer already computed."""

    enabled: bool = True
    path: str = ".cache/responses.db"


@dataclass
class TrackingConfig:
    uri: str = "sqlite:///mlruns/mlflow.db"
    experiment: str = "mcq-consistency"
    offline: bool = False  # true: log to offline_dir now, upload with `python -m src.sync` later
    offline_dir: str = "mlruns/offline"


@dataclass
class JobConfig:
    """One job = one model x benchmark x variant set x temperature (conf/config.yaml picks the groups)."""

    model: Any = MISSING
    benchmark: Any = MISSING
    variants: Any = MISSING  # original: each question once; cora: the CoRA divergent set; ...
    prompt: Any = MISSING
    seed: int = 0  # seeds variant shuffles, few-shot picks and sampling
    limit: Optional[int] = None  # first N questions in file order; null = all
    temperature: float = 0.0  # 0 = greedy decoding
    repetitions: int = 1  # samples of the same prompt (the repetition paper's R)
    scoring: str = "generate"  # generate | logprob | cloze | cloze_shown; conf/config.yaml takes model.scoring
    top_k: Optional[int] = None
    top_p: float = 1.0
    max_new_tokens: int = 3  # the repetition paper's setting: the answer letter and a little slack
    cloze_normalise: bool = False  # cloze picks the highest raw log-likelihood (lm-eval acc); true = per byte (acc_norm)
    fewshot: int = 0  # examples from the benchmark's dev/train split, never the evaluated questions
    option_refs: str = "keep_rules"  # options that refer to others ("all of the above"): keep_rules | exclude | ignore
    data_dir: str = "../shared/data"  # conf/config.yaml reads $MCQ_DATA_DIR first
    cache: CacheConfig = field(default_factory=CacheConfig)
    resume: bool = True  # skip a job whose identical config already has a FINISHED run in the experiment
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    vars: Dict[str, Any] = field(default_factory=dict)  # free values for interpolations in sweep files


ConfigStore.instance().store(name="job_schema", node=JobConfig)
NESTED = {f.name: f.default_factory for f in fields(JobConfig) if is_dataclass(f.default_factory)}


def unknown_key(key: str, known: Sequence[str]) -> UserError:
    """One line for a key that is not in its node: the nearest known key, or the list of them."""
    last = key.rpartition(".")[2]
    close = difflib.get_close_matches(last, list(known), n=1, cutoff=0.5)
    hint = f"did you mean {key.rpartition('.')[0] + '.' if '.' in key else ''}{close[0]}?" if close else \
        f"the keys here are {', '.join(known)}"
    return UserError(f"config key {key}: unknown; {hint}")


def _known_keys(path: str, overrides: Sequence[str]) -> list[str]:
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
        known = _known_keys(path, ())
        for key in node:
            if key != "hydra" and key not in known:
                raise unknown_key(f"{path}.{key}" if path else str(key), known)


_KEY_IN_MESSAGE = (re.compile(r"Key '([^']+)' (?:is )?not in"), re.compile(r"full_key: (\S+)"),
                   re.compile(r"Could not override '([^']+)'"))


def one_line(err: Exception, overrides: Sequence[str]) -> UserError:
    """A Hydra or OmegaConf composition error as one line naming the key as the user wrote it."""
    text = " ".join(f"{err} {err.__cause__ or ''}".split())
    key = next((m.group(1) for pattern in _KEY_IN_MESSAGE for m in [pattern.search(text)] if m), None)
    if key is None:
        return UserError(f"config overrides {' '.join(overrides)}: {text.split(' full_key:')[0]}")
    def written_key(override: str) -> str:
        return override.lstrip("+~").split("=", 1)[0]

    written = next((o for o in overrides if written_key(o) == key or written_key(o).endswith("." + key)), None)
    full = written_key(written) if written else key
    if " not in " in text:
        return unknown_key(full, _known_keys(full.rpartition(".")[0], overrides))
    reason = (err.__cause__ and " ".join(str(err.__cause__).split()) or text).split(" full_key:")[0]
    return UserError(f"config key {full}: {reason.split(' object_type=')[0]} (from {written or full}); give a value "
                     f"of the key's type")


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


def compose_job(overrides: Sequence[str] = (), *, conf_dir: Path = CONF_DIR) -> DictConfig:
    """The composed config of one job from command-line style overrides, with no Hydra runtime (for tests, the
    benchmark command and the pre-flight check of `python -m src.run`). Raises UserError in one line."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    check_group_choices(overrides, conf_dir)
    was_initialized = GlobalHydra.instance().is_initialized()
    if was_initialized:  # inside a Hydra app (the sweep callback): compose on a fresh instance, then put the app's back
        saved = GlobalHydra.instance().hydra
        GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides))
    except UserError:
        raise
    except Exception as err:  # Hydra/OmegaConf composition errors: override grammar, types, unknown keys
        raise one_line(err, overrides) from err
    finally:
        if was_initialized:
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(saved)
    check_keys(cfg)
    return cfg
