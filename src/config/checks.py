"""The one check of a composed job config, the same at every door (the command line, a sweep's pre-check, the
job), and the typed, frozen `JobSpec` it gives (`job_spec`): every value in its range, the metrics' options, the
intervals, the tracking options and the validity rules of scoring x variant set, each refused in one line."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from src.backends.batch_tokens import check_max_batch_tokens
from src.benchmarks import CONTINUATION_BENCHMARKS
from src.benchmarks.lm_eval import task_label, task_spec
from src.common.errors import UserError
from src.common.paths import expand_path
from src.common.redact import redact_text
from src.config import plain_dict
from src.config.schema import GROUPS
from src.config.spec import JobSpec, spec_of
from src.core.metric_choices import PRIDE_PROTOCOLS, SURE_RULES
from src.core.validity import check_option_style, check_validity
from src.tracking.names import DEFAULT_URI
from src.tracking.store import check_options
from src.variants.rules import POLICIES as OPTION_REFS  # the policies of src.variants.plan_variants


def check_metrics(cfg: DictConfig) -> None:
    """Refuse a `metrics.sure_rule` or `metrics.pride_protocol` that is not one of its choices (one line naming
    the key)."""
    from omegaconf import OmegaConf

    for key, noun, choices in (("sure_rule", "rule", SURE_RULES), ("pride_protocol", "protocol", PRIDE_PROTOCOLS)):
        value = OmegaConf.select(cfg, f"metrics.{key}", default=choices[0])
        if value not in choices:
            raise UserError(f"config key metrics.{key}: unknown {noun} {value!r}; choose one of {', '.join(choices)}")


_REQUIRED_HINT = {
    "benchmark.path": "/path/to/questions.jsonl (jsonl, csv or parquet)",
    "benchmark.task": "<an lm-eval task, e.g. arc_easy>",
    "model.path": "<a local model folder or a hub id org/name>",
}
# key, null allowed, in range, the rule as the error states it
_RANGES: tuple[tuple[str, bool, Callable[[float], bool], str], ...] = (
    ("seed", False, lambda v: v >= 0, "must be an integer >= 0"),
    ("limit", True, lambda v: v >= 1, "must be a positive integer or null (all questions)"),
    ("temperature", False, lambda v: 0 <= v < float("inf"), "must be a finite number >= 0 (0 = greedy)"),
    ("repetitions", False, lambda v: v >= 1, "must be >= 1"),
    ("top_k", True, lambda v: v >= 1, "must be >= 1, or null (no top-k cut)"),
    ("top_p", False, lambda v: 0 < v <= 1, "must be in (0, 1] (1 = no nucleus cut)"),
    ("max_new_tokens", False, lambda v: v >= 1, "must be >= 1"),
    ("fewshot", False, lambda v: v >= 0, "must be >= 0 (0 = zero-shot)"),
)
_DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # MLflow's SQLAlchemy stores (`postgresql+psycopg2` too)


def check_values(cfg: DictConfig) -> None:
    """Every value of a composed job in its range: required keys given, numbers in range, choices known,
    `tracking.uri` and `cache.path` of a shape that can work. One `UserError` line naming the key, before any
    compute: `python -m src.run` calls it for every job of the command line before Hydra starts, and
    `check_config` calls it at every door (the command line, the sweep's pre-check, the job).
    Types were checked when the config was composed (the schema above)."""
    from omegaconf import OmegaConf

    for key in sorted(k for k in OmegaConf.missing_keys(cfg) if not k.startswith("hydra")):
        group = key.split(".", 1)[0]
        owner = f"{group}={OmegaConf.select(cfg, f'{group}.name')}" if group in GROUPS else "the config"
        raise UserError(
            f"config key {key}: required by {owner} (no default); give {key}={_REQUIRED_HINT.get(key, '<value>')}"
        )
    for key, nullable, in_range, rule in _RANGES:
        value = cfg.get(key)
        if not (value is None and nullable) and (value is None or not in_range(value)):
            shown = "null" if value is None else f"{value:g}" if isinstance(value, float) else value
            raise UserError(f"config key {key}: {shown} {rule}")
    if cfg.get("option_refs") not in OPTION_REFS:
        raise UserError(
            f"config key option_refs: unknown policy {cfg.get('option_refs')!r}; choose "
            f"{', '.join(OPTION_REFS[:-1])} or {OPTION_REFS[-1]}"
        )
    shared = bool(cfg.cache.get("shared", False))
    if cfg.cache.enabled and shared and (not cfg.cache.path or expand_path(cfg.cache.path).is_file()):
        problem = f"{cfg.cache.path!r} is a file" if cfg.cache.path else "empty"
        raise UserError(
            f"config key cache.path: {problem}; with cache.shared=true give the shared cache's folder, "
            f"e.g. cache.path=/shared/mcq-cache (or cache.shared=false for a database file)"
        )
    if cfg.cache.enabled and not shared and (not cfg.cache.path or expand_path(cfg.cache.path).is_dir()):
        problem = f"{cfg.cache.path!r} is a folder" if cfg.cache.path else "empty"
        raise UserError(
            f"config key cache.path: {problem}; give the cache's database file, e.g. "
            f"cache.path=.cache/responses.db (or cache.shared=true for a folder many nodes share, or "
            f"cache.enabled=false)"
        )
    check_tracking_uri(str(cfg.tracking.uri or ""))
    if OmegaConf.select(cfg, "model.backend") == "hf":
        check_max_batch_tokens(OmegaConf.select(cfg, "model.max_batch_tokens"))
    from src.answering.adaptive import (
        check_adaptive,
    )  # local: loads numpy, pandas (slow import); adaptive=true only where stopping early keeps the full run's verdicts

    check_adaptive(
        adaptive=bool(cfg.get("adaptive", False)),
        repetitions=int(cfg.repetitions),
        temperature=float(cfg.temperature),
        scoring=str(cfg.scoring),
        backend=OmegaConf.select(cfg, "model.backend"),
    )


def check_tracking_uri(uri: str, key: str = "tracking.uri") -> None:
    """The shapes of tracking URI that MLflow can log to: `sqlite:///file.db`, another SQLAlchemy database
    (`postgresql://...`) or a server (`http(s)://host[:port]`). A bare path or `file:` is MLflow's file store,
    which current MLflow refuses; reachability is checked later (src.tracking.store.check_tracking).

    >>> check_tracking_uri("sqlite:///mlruns/mlflow.db"), check_tracking_uri("http://127.0.0.1:5000")
    (None, None)
    >>> check_tracking_uri("mlruns")  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    src.common.errors.UserError: config key tracking.uri: 'mlruns' is a file store, which current MLflow refuses;
    use ...
    """
    from urllib.parse import urlsplit

    shown = redact_text(uri)  # the error line goes to the terminal and logs: no password in it
    fix = f"use tracking.uri={DEFAULT_URI}"
    scheme, sep, rest = uri.partition("://")
    if not uri.strip():
        raise UserError(f"config key {key}: empty; {fix} or http://host:port for an MLflow server")
    if not sep or scheme == "file" or uri.startswith("file:"):
        raise UserError(f"config key {key}: {shown!r} is a file store, which current MLflow refuses; {fix}")
    if scheme == "sqlite":
        path = Path(rest[1:]).expanduser() if rest.startswith("/") else None
        if path is None or not rest[1:]:
            raise UserError(f"config key {key}: {shown!r} names no database file; {fix} (three slashes, then a path)")
        if path.is_dir():
            raise UserError(
                f"config key {key}: {shown!r} points at a folder; give the database file inside it, "
                f"e.g. {uri.rstrip('/')}/mlflow.db"
            )
    elif scheme in ("http", "https"):
        if not urlsplit(uri).hostname:
            raise UserError(f"config key {key}: {shown!r} names no host; give e.g. http://127.0.0.1:5000")
    elif scheme.split("+", 1)[0] not in _DB_SCHEMES and scheme not in ("databricks", "databricks-uc"):
        raise UserError(
            f"config key {key}: unknown scheme {scheme!r}; {fix}, http(s)://host:port for a server, "
            f"or a database URI (postgresql://, mysql://, mssql://)"
        )


def check_config(cfg: DictConfig) -> None:
    """The one check of a composed job config, before any compute: every value in its range (`check_values`), the
    metrics it names (`check_metrics`), the interval settings, the tracking options, then the validity rules of
    scoring x variant set. The same function at all three doors: `python -m src.run`'s check before Hydra starts
    (`check_command_line`), the sweep callback's check of every job before a sweep starts, and the job itself
    (`src.job.runner.run_job`); so a config accepted at one door is never refused at another."""

    check_values(cfg)
    check_metrics(cfg)
    stats = cfg.get("stats")
    if stats is not None and not stats.bootstrap >= 0:
        raise UserError(f"config key stats.bootstrap: {stats.bootstrap} must be >= 0 (resamples; 0 = no intervals)")
    if stats is not None and not 0 < stats.level < 1:
        raise UserError(f"config key stats.level: {stats.level:g} must be between 0 and 1 (exclusive), e.g. 0.95")
    check_options(cfg.tracking)
    variants = plain_dict(cfg.variants)
    lm_evals_own = cfg.benchmark.name == "lm_eval" and cfg.prompt.get("name") == "lm_eval"
    if cfg.benchmark.name == "lm_eval":
        task_spec(plain_dict(cfg.benchmark).get("task"))  # a name or a list of names, else one line
    check_validity(
        scoring=cfg.scoring,
        variants=variants,
        temperature=float(cfg.temperature),
        repetitions=int(cfg.repetitions),
        per_task=lm_evals_own,  # each task shows its options or not by its shape: checked when it loads (run_job)
    )
    # an lm-eval task's option style is known here only when benchmark.choices says it; else when it loads (run_job)
    check_option_style(
        variants=variants,
        benchmark=benchmark_label(cfg.benchmark),
        continuation=cfg.benchmark.name in CONTINUATION_BENCHMARKS or cfg.benchmark.get("choices") == "continuation",
    )


def benchmark_label(benchmark: Mapping[str, Any]) -> str:
    """The benchmark as its keys name it (a config node or a spec's plain values): `hellaswag`, or
    `lm_eval benchmark.task=arc_easy`."""
    if benchmark["name"] == "lm_eval":
        task = plain_dict(benchmark).get("task") if isinstance(benchmark, DictConfig) else benchmark.get("task")
        return f"lm_eval benchmark.task={task_label(task_spec(task))}"
    return str(benchmark["name"])


_BUILT: OrderedDict[str, JobSpec] = OrderedDict()  # the latest specs this process built, by their resolved config
_KEPT = 1024  # the doors of one process (command line, sweep pre-check, its in-process jobs) share them


def job_spec(cfg: DictConfig) -> JobSpec:
    """The typed `JobSpec` of a composed job config, checked (`check_config`: one `UserError` line for a config it
    refuses). Each door builds it, and only it reads the config: a config this process has already checked (the
    command line's check, then the same job inside Hydra) gives the spec built then, so a job is checked once."""
    try:
        resolved = plain_dict(cfg)
    except Exception:  # an interpolation that does not resolve: the check names the missing key first
        check_config(cfg)
        raise
    resolved.pop("hydra", None)
    key = json.dumps(resolved, sort_keys=True, default=str)
    spec = _BUILT.get(key)
    if spec is None:
        check_config(cfg)
        spec = spec_of(resolved)
        _BUILT[key] = spec
        while len(_BUILT) > _KEPT:
            _BUILT.popitem(last=False)
    else:
        _BUILT.move_to_end(key)
    return spec


def logged_spec(cfg: DictConfig) -> JobSpec:
    """The `JobSpec` of the config a finished run logged (its config.yaml), which was checked when the run was made;
    for reading what it asked (`python -m src.plan`), not for running it again (that is `job_spec`'s)."""
    return spec_of(plain_dict(cfg))
